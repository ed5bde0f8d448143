// SPDX-License-Identifier: BSD-3-Clause
// The loss and accuracy on logits spread over a grid: rows split over one axis (the last graph layer's c),
// classes over another (its a). Softmax statistics are all-reduced over the classes' axis, totals over the
// rows' axis, so every rank gets the same loss as one rank computing all of it.
#pragma once

#include <cstdint>
#include <utility>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/views.hpp"

namespace tessera {

/// Where the logits block sits: the axes that split its rows and its classes, and its first class.
struct LogitsLayout {
  const Communicator* rows = nullptr;     ///< ranks holding other rows of the same classes
  const Communicator* classes = nullptr;  ///< ranks holding other classes of the same rows
  int64_t col_begin = 0;                  ///< global class of local column 0
  int64_t classes_total = 0;              ///< real classes (columns past it are padding)
};

/// Local columns of a logits block `cols` wide that are real classes (the rest are padding).
int64_t real_classes(const LogitsLayout& layout, int64_t cols);

/// Collective over the rows' axis: a loss and its row count summed over the ranks holding other rows.
std::pair<double, int64_t> summed_over_rows(const LogitsLayout& layout, double loss, int64_t count);

/// Masked softmax cross-entropy over the grid: the loss summed over selected rows (mask != 0, label >= 0)
/// of the whole grid and their count; grad = grad_scale * (softmax - onehot) on selected rows, 0 elsewhere
/// (when not empty).
std::pair<double, int64_t> softmax_cross_entropy_3d(const LogitsLayout& layout,
                                                    const Matrix<const float>& logits,
                                                    const Vector<const int64_t>& labels,
                                                    const Vector<const uint8_t>& mask, float grad_scale,
                                                    const Matrix<float>& grad);

/// Correct predictions (argmax over the real classes, lowest index on ties) and count, over the grid.
std::pair<int64_t, int64_t> count_correct_3d(const LogitsLayout& layout, const Matrix<const float>& logits,
                                             const Vector<const int64_t>& labels,
                                             const Vector<const uint8_t>& mask);

/// Argmax (global class index) of every local row, agreed over the classes' axis.
Vector<int64_t> argmax_3d(const LogitsLayout& layout, const Matrix<const float>& logits);

/// Rows where pred equals the label, and the rows counted (mask != 0, label >= 0), over the rows' axis.
std::pair<int64_t, int64_t> count_matches_3d(const LogitsLayout& layout, const Vector<const int64_t>& pred,
                                             const Vector<const int64_t>& labels,
                                             const Vector<const uint8_t>& mask);

}  // namespace tessera
