// SPDX-License-Identifier: BSD-3-Clause
// What a loss or a metric sees of one batch's logits on this rank: the block, where it sits on the grid, the
// rows' labels and the mask of rows covered. Shared by metric.hpp and loss.hpp (which includes metric.hpp:
// a loss names the metric its task is judged by).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/parallel3d/loss3d.hpp"

namespace tessera {

/// A step's node pairs as rows of its logits, where the batch source chose them (sampled link training):
/// pair i scores rows source[i] and target[i], label[i] 1 for an edge and 0 for a negative.
struct RowPairs {
  std::vector<int64_t> source;  ///< the first row of each pair
  std::vector<int64_t> target;  ///< the second row
  std::vector<uint8_t> label;   ///< 1: an edge; 0: a negative
  /// Pairs held.
  int64_t size() const { return int64_t(source.size()); }
};

/// What a loss or metric sees of one batch on this rank.
struct LossInput {
  LogitsLayout layout;           ///< the axes that split the logits' rows and classes; the first class
  Matrix<const float> logits;    ///< this rank's block: rows x local columns (padding past the classes)
  Vector<const int64_t> labels;  ///< every row's class (-1: unlabeled or padding)
  Vector<const uint8_t> mask;    ///< the rows the loss covers (a row counts where mask != 0 and label >= 0)
  /// Multi-label tasks: rows x every task (1, 0, -1 unobserved); local column j is task col_begin + j.
  /// Empty for a single-label task.
  Matrix<const int8_t> targets;
  /// The node of every row (-1: padding), for tasks that look rows up by node (link prediction); empty
  /// where the batch source does not give it.
  Vector<const int64_t> nodes{};
  /// Keys the step's random draws (the step's pass key; 0 in evaluation).
  int64_t step_key = 0;
  /// The step's node pairs where the batch source chose them (null: the loss draws its own).
  const RowPairs* pairs = nullptr;
  /// Local columns that are real classes: columns [0, real_columns()) of the block; the rest are padding.
  int64_t real_columns() const;
};

}  // namespace tessera
