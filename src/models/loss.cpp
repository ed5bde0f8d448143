// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/loss.hpp"

#include <algorithm>

#include "tessera/comm/collectives.hpp"

namespace tessera {

int64_t LossInput::real_columns() const {
  return std::max<int64_t>(
      0, std::min<int64_t>(int64_t(logits.extent(1)), layout.classes_total - layout.col_begin));
}

LossSum SoftmaxCrossEntropy::sum_and_gradient(const LossInput& in, const Matrix<float>& grad) {
  const auto [sum, count] = softmax_cross_entropy_3d(in.layout, in.logits, in.labels, in.mask, 1.0f, grad);
  return {sum, count};
}

LossSum sum_over_grid(const LogitsLayout& layout, double partial, int64_t rows) {
  // Entered by every rank of the replica alike, whatever its share (an empty block sends zeros).
  if (layout.classes->size() > 1)
    partial = all_reduce_value(*layout.classes, partial, ReduceOp::Sum, "loss allreduce a");
  double totals[2] = {partial, double(rows)};
  if (layout.rows->size() > 1) all_reduce(*layout.rows, totals, 2, ReduceOp::Sum, "loss allreduce c");
  return {totals[0], int64_t(totals[1])};
}

}  // namespace tessera
