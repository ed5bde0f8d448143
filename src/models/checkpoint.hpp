// SPDX-License-Identifier: BSD-3-Clause
// Training checkpoints (HDF5): every parameter, the optimizer's moments and step count, BatchNorm running
// statistics, the epoch reached and the best-validation record. Random numbers are keyed by (seed, epoch),
// so seed and epoch are the whole generator state. Written to a temporary name and renamed, so a crash
// mid-write leaves the previous checkpoint intact.
#pragma once

#include <string>

#include "tessera/comm/communicator.hpp"
#include "tessera/models/model.hpp"
#include "tessera/models/optimizer.hpp"

namespace tessera {

struct TrainingProgress {
  int64_t epochs_done = 0;
  int64_t best_epoch = -1;
  double best_valid = -1.0, test_at_best = 0.0;
};

/// Rank 0 writes `path` (collective over comm: every rank learns whether it worked).
void save_checkpoint(const std::string& path, GnnModel<float>& model, Adam& optimizer,
                     const TrainingProgress& progress, const Communicator& comm);

/// Collective: rank 0 reads, checks that the file was written for the same model shape, and every rank
/// receives the values. Throws CollectiveError naming the file and the mismatch.
TrainingProgress load_checkpoint(const std::string& path, GnnModel<float>& model, Adam& optimizer,
                                 const Communicator& comm);

}  // namespace tessera
