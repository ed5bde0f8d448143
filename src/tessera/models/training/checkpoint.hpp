// SPDX-License-Identifier: BSD-3-Clause
// Training checkpoints (parallel HDF5) in global layout: every parameter and both Adam moments as the full,
// unpadded matrix, BatchNorm running statistics as full vectors, the best-validation epoch's parameters and
// statistics, plus the epoch reached, the optimizer step, the best-validation record and the evaluations
// since it (patience), and the run's identity: the options that change the result and the graph file's
// fingerprint, so a resume with other settings or another graph is refused with the differences listed.
// Random numbers are keyed by (seed, epoch), so those are the whole generator state. Each rank writes and
// reads only its own block, so a checkpoint written on one grid resumes on any other grid or on one rank.
// Written to a temporary name and renamed: a crash mid-write leaves the previous checkpoint intact.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/models/nn/optimizer.hpp"
#include "tessera/models/nn/sequential.hpp"

namespace tessera {

/// Where training stands: what a checkpoint records besides the arrays.
struct TrainingProgress {
  int64_t epochs_done = 0;             ///< epochs finished
  int64_t best_epoch = -1;             ///< best-validation epoch so far (-1: none evaluated)
  double best_valid = -1.0;            ///< its validation accuracy
  double test_at_best = 0.0;           ///< its test accuracy
  int64_t evaluations_since_best = 0;  ///< evaluations without progress (early stopping's patience)
  double max_valid = -1.0;  ///< the highest validation accuracy so far (Selection::AccuracyAndLoss)
  double min_valid_loss = std::numeric_limits<double>::infinity();  ///< the lowest validation loss so far
};

/// What a checkpoint holds, with where each rank's piece sits in the global arrays.
struct CheckpointState {
  std::string model;                 ///< Model::describe(): a resume must build the same model
  uint64_t seed = 0;                 ///< the run's seed: a resume must use the same
  std::vector<ParameterRef> params;  ///< every parameter (value, Adam moments)
  Adam* optimizer = nullptr;         ///< its moments are parallel to params
  std::vector<BufferRef> buffers;    ///< non-trainable state
  /// The best-validation epoch's parameter values then buffers, parallel to params and buffers (local
  /// blocks); empty while there is none. Saved, and filled by a load when the checkpoint holds them.
  std::vector<Vector<float>>* best = nullptr;
  /// What makes the run what it is besides the model and seed (training options, the graph's fingerprint):
  /// a flat object of values, saved, and compared key by key on load.
  nlohmann::json run = nlohmann::json::object();
  /// On load: continue although `run` differs from the checkpoint's (said in the log) instead of refusing.
  bool accept_run_differences = false;
};

/// The state of a model and its optimizer.
CheckpointState checkpoint_state(Model& model, Adam& optimizer, uint64_t seed);

/// Arrays shaped like the parameters' local values then the buffers: what CheckpointState::best holds.
std::vector<Vector<float>> arrays_like(const std::vector<ParameterRef>& params,
                                       const std::vector<BufferRef>& buffers);

/// "lr 0.1 (checkpoint: 0.01)" for every key whose value differs between `saved` and `now` (a key one of
/// them lacks counts as differing), in key order.
std::vector<std::string> run_differences(const nlohmann::json& saved, const nlohmann::json& now);

/// Collective over comm (all ranks holding a piece of the model).
void save_checkpoint(const std::string& path, const CheckpointState& state, const TrainingProgress& progress,
                     const Communicator& comm);

/// Collective: checks that the file was written for the same model and seed, and for the same run
/// (state.run; differences refused unless state.accept_run_differences), then every rank reads its blocks.
/// Throws CollectiveError naming the file and the mismatch.
TrainingProgress load_checkpoint(const std::string& path, const CheckpointState& state,
                                 const Communicator& comm);

/// What a checkpoint says of itself, for inference (tessera predict).
struct CheckpointInfo {
  std::string model;          ///< Model::describe() of the model that wrote it
  uint64_t seed = 0;          ///< the run's seed
  TrainingProgress progress;  ///< epochs done and the best-validation record
  nlohmann::json run;         ///< the run identity (mode, options that change the result, graph fingerprint)
  bool has_best = false;      ///< it holds the best-validation epoch's parameters
  int64_t parameter_values = 0;  ///< entries of every /param dataset (from the shapes; nothing read)
};

/// Collective: a checkpoint's attributes, checked as load_checkpoint checks them. Throws CollectiveError
/// naming the file on a missing, foreign, other-version or corrupt file.
CheckpointInfo read_checkpoint_info(const std::string& path, const Communicator& comm);

/// Collective: the parameter values and buffers of the best-validation epoch (`best`; the checkpoint must
/// hold them) or of the last epoch into `model`, which must be the model that wrote the checkpoint (its
/// description and every array's shape are checked), on any grid. The optimizer's moments are not read.
void load_model_state(const std::string& path, Model& model, bool best, const Communicator& comm);

/// Collective, before a run loads anything: throws CollectiveError listing every difference between the
/// checkpoint's run identity and `run` (and on a missing, foreign or other-version file).
void check_checkpoint_run(const std::string& path, const nlohmann::json& run, const Communicator& comm);

}  // namespace tessera
