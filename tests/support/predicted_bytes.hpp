// SPDX-License-Identifier: BSD-3-Clause
// The performance model's bytes per epoch held against a training run's: the busiest rank's bytes of the
// second of two epochs (the first carries one-time work such as a cached layer 0's aggregation).
#pragma once

#include <gtest/gtest.h>

#include "tessera/graph/graph_file.hpp"
#include "tessera/models/train.hpp"
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera::fixtures {

/// Trains `o` for two epochs on `shape` (no evaluation) and expects the second epoch's bytes_max_rank to
/// be what predict_epoch counts, plus at most the epoch reports' own two 8-byte sums. Collective.
inline void expect_predicted_epoch_bytes(TrainOptions o, const GridShape& shape, bool recompute,
                                         const Communicator& world) {
  o.trainer.epochs = 2;
  o.trainer.eval_every = 0;
  o.trainer.keep_last_step = false;
  o.grid.shape = shape;
  o.compute.recompute_aggregation = recompute;
  const TrainResult r = run_training(o, world);
  ASSERT_EQ(r.history.size(), 2u);
  const double measured = r.history[1].metrics.value("bytes_max_rank", 0.0);
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const ProblemSize problem = problem_size(GraphFileReader(self, o.data).meta(), o.model, recompute);
  const double predicted = predict_epoch(problem, shape, builtin_machine("local")).comm_bytes;
  EXPECT_GE(measured, predicted);
  EXPECT_LE(measured, predicted + 16);
}

}  // namespace tessera::fixtures
