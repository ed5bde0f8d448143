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
#include "tessera/models/optimizer.hpp"
#include "tessera/models/sequential.hpp"

namespace tessera {

/// Where training stands: what a checkpoint records besides the arrays.
struct TrainingProgress {
  int64_t epochs_done = 0;    ///< epochs finished
  int64_t best_epoch = -1;    ///< best-validation epoch so far (-1: none evaluated)
  double best_valid = -1.0;   ///< its validation accuracy
  double test_at_best = 0.0;  ///< its test accuracy
};

/// What a checkpoint holds, with where each rank's piece sits in the global arrays.
struct CheckpointState {
  std::string model;                 ///< Model::describe(): a resume must build the same model
  uint64_t seed = 0;                 ///< the run's seed: a resume must use the same
  std::vector<ParameterRef> params;  ///< every parameter (value, Adam moments)
  Adam* optimizer = nullptr;         ///< its moments are parallel to params
  std::vector<BufferRef> buffers;    ///< non-trainable state
};

/// The state of a model and its optimizer.
CheckpointState checkpoint_state(Model& model, Adam& optimizer, uint64_t seed);

/// Collective over comm (all ranks holding a piece of the model).
void save_checkpoint(const std::string& path, const CheckpointState& state, const TrainingProgress& progress,
                     const Communicator& comm);

/// Collective: checks that the file was written for the same model and seed, then every rank reads its
/// blocks. Throws CollectiveError naming the file and the mismatch.
TrainingProgress load_checkpoint(const std::string& path, const CheckpointState& state,
                                 const Communicator& comm);

}  // namespace tessera
