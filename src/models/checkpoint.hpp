// SPDX-License-Identifier: BSD-3-Clause
// Training checkpoints (parallel HDF5) in global layout: every parameter and both Adam moments as the full,
// unpadded matrix, BatchNorm running statistics as full vectors, plus the epoch reached, the optimizer step
// and the best-validation record. Random numbers are keyed by (seed, epoch), so those are the whole
// generator state. Each rank writes and reads only its own block, so a checkpoint written on one grid
// resumes on any other grid or on one rank. Written to a temporary name and renamed: a crash mid-write
// leaves the previous checkpoint intact.
#pragma once

#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/models/model.hpp"
#include "tessera/models/model3d.hpp"
#include "tessera/models/optimizer.hpp"

namespace tessera {

struct TrainingProgress {
  int64_t epochs_done = 0;
  int64_t best_epoch = -1;
  double best_valid = -1.0, test_at_best = 0.0;
};

/// What a checkpoint holds, with where each rank's piece sits in the global arrays.
struct CheckpointState {
  std::string model;  // ModelConfig::describe(): a resume must build the same model
  uint64_t seed = 0;
  std::vector<Parameter<float>*> params;
  std::vector<BlockPlacement> param_blocks;  // parallel to params
  Adam* optimizer = nullptr;
  std::vector<std::pair<std::string, Vector<float>*>> buffers;
  std::vector<BlockPlacement> buffer_blocks;  // a buffer is a 1 x n row
};

CheckpointState checkpoint_state(GnnModel<float>& model, Adam& optimizer);
CheckpointState checkpoint_state(GcnModel3D& model, Adam& optimizer);

/// Collective over comm (all ranks holding a piece of the model).
void save_checkpoint(const std::string& path, const CheckpointState& state, const TrainingProgress& progress,
                     const Communicator& comm);

/// Collective: checks that the file was written for the same model and seed, then every rank reads its
/// blocks. Throws CollectiveError naming the file and the mismatch.
TrainingProgress load_checkpoint(const std::string& path, const CheckpointState& state,
                                 const Communicator& comm);

}  // namespace tessera
