// SPDX-License-Identifier: BSD-3-Clause
// Not installed: run_training's choice of a full-graph run's grid and its memory check before the load.
#pragma once

#include "tessera/models/train.hpp"

namespace tessera {

/// The permutation the load uses: on one rank without a grid, the file's order (a permutation balances
/// blocks that do not exist).
PermuteMode load_permutation(const TrainOptions& options);

/// What the 3D loader needs of a run: graph layers, permutation, seed, the model's normalization, feature
/// normalization (the rest — transposes, progress, exchange budget — is the caller's).
Graph3DOptions graph3d_options(const TrainOptions& options);

/// Collective: the grid of a full-graph run (the one given, or the performance model's choice), checked
/// against each rank's memory before the load. Under MemoryPolicy::Auto a run predicted not to fit that
/// fits with the aggregation recomputed gets options.recompute_aggregation set (said in the log); a run
/// that still does not fit is refused (CollectiveError) with every way out the model predicts.
GridShape choose_full_grid(TrainOptions& options, const GraphMeta& meta, const Communicator& world);

}  // namespace tessera
