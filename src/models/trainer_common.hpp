// SPDX-License-Identifier: BSD-3-Clause
// Pieces the one-rank and the 3D trainers share (not installed).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/models/checkpoint.hpp"
#include "tessera/models/model3d.hpp"
#include "tessera/models/trainer.hpp"

namespace tessera {

/// The console line and the --metrics JSON line of one epoch (`extra` is merged into the JSON).
void report_epoch(const EpochRecord& r, const TrainOptions& options, std::ofstream& metrics,
                  const nlohmann::json& extra);
/// Collective: CollectiveError on impossible settings.
void check_train_options(const TrainOptions& options, const Communicator& world);
/// Atomic text file of one prediction per line.
void write_predictions_file(const std::string& path, const std::vector<int64_t>& predictions);
/// Records r as the best-validation epoch if it is one (evaluated and better than before); true then.
bool record_if_best(TrainingProgress& progress, const EpochRecord& r);
/// DIR/checkpoint.h5, or empty without --checkpoint.
std::string checkpoint_path(const TrainOptions& options);
/// With --resume: loads the checkpoint into `state` and says so; otherwise a fresh start.
TrainingProgress resume_if_asked(const TrainOptions& options, const CheckpointState& state,
                                 const Communicator& world);
/// The best-validation bookkeeping and the final weights of a replicated model, into `result`.
void finish_result(TrainResult& result, const TrainingProgress& progress, GnnModel<float>& model);
/// The --metrics file on rank 0 (appended to after a resume); not open elsewhere or without --metrics.
std::ofstream open_metrics(const TrainOptions& options, const TrainingProgress& progress,
                           const Communicator& world);

/// Collective: the bytes this rank sent per collective kind since `before` ("bytes_<kind>"), its seconds in
/// communication ("comm_s"), and the largest byte total over ranks ("bytes_max_rank"), as JSON.
nlohmann::json comm_delta(const Communicator& world, const CommStats& before);

/// What the 3D and the mini-batch trainers derive alike from the options: the loader's options, the model
/// (in / out from the file) and how its layers run (--overlap, --comm-dtype, --no-fuse).
Load3DOptions load_3d_options(const TrainOptions& options);
ModelConfig model_config(const TrainOptions& options, const GraphMeta& meta);
Model3DOptions model_3d_options(const TrainOptions& options);

/// Collective over the replica: a full-graph evaluation forward of the 3D model; sets r's train, valid and
/// test accuracy and returns the logits block.
Matrix<float> evaluate_3d(GcnModel3D& model, const LayerComms& out_comms, const Graph3D& g, int64_t epoch,
                          EpochRecord& r);

/// The 3D trainer (trainer3d.cpp), the 4D mini-batch trainer (trainer_minibatch.cpp) and the
/// partition-parallel sampled trainer (trainer_sampled.cpp).
TrainResult train_3d(const TrainOptions& options, const Communicator& world);
TrainResult train_minibatch(const TrainOptions& options, const Communicator& world);
TrainResult train_sampled(const TrainOptions& options, const Communicator& world);

}  // namespace tessera
