// SPDX-License-Identifier: BSD-3-Clause
// What run_training hands its drivers (private to models/): the run's context, known before the load, and
// the two drivers (run_modes.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "tessera/models/nn/link_loss.hpp"
#include "tessera/models/train.hpp"
#include "tessera/models/training/checkpoint_lock.hpp"

namespace tessera {

struct GraphIdentity;  // graph/fingerprint.hpp (not included: it pulls in <hdf5.h>)

/// What run_training learned of the graph before the load: its identity, for checkpoints and the split
/// check, and what the run adds to the loop.
struct RunContext {
  std::shared_ptr<const GraphIdentity> graph;       // the graph's identity, read once
  bool link = false;                                // a link task (TaskKind resolved)
  nlohmann::json run;                               // the run identity a checkpoint stores
  bool best_is_last = false;                        // no validation nodes
  std::shared_ptr<CheckpointLock> checkpoint_lock;  // held from before the load to the end of the run
  std::vector<std::unique_ptr<TrainerHook>> hooks;  // added after the library's, in this order
  std::unique_ptr<LinkLoss> link_loss;              // a link task's loss, made before the load
};

/// The multi-label loss's weight per task: none, one for every task, or one per task (throws Error on
/// another count).
std::vector<float> task_weights(const TaskOptions& task, int64_t tasks);

/// The full-graph and mini-batch modes: the graph on the 3D (4D) grid, the loop on it.
TrainResult run_on_grid(TrainOptions o, const Communicator& world, RunContext& context);
/// The sampled mode: the partitioned graph, one replica per rank.
TrainResult run_sampled(const TrainOptions& o, const Communicator& world, RunContext& context);

}  // namespace tessera
