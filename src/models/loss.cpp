// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/loss.hpp"

#include "tessera/comm/collectives.hpp"

namespace tessera {

int64_t LossInput::real_columns() const {
  return real_classes(layout, int64_t(logits.extent(1)));
}

LossSum SoftmaxCrossEntropy::sum_and_gradient(const LossInput& in, const Matrix<float>& grad) {
  const auto [sum, count] = softmax_cross_entropy_3d(in.layout, in.logits, in.labels, in.mask, 1.0f, grad);
  return {sum, count};
}

LossSum sum_over_grid(const LogitsLayout& layout, double partial, int64_t rows) {
  // Entered by every rank of the replica alike, whatever its share (an empty block sends zeros).
  if (layout.classes->size() > 1)
    partial = all_reduce_value(*layout.classes, partial, ReduceOp::Sum, "loss allreduce a");
  const auto [sum, count] = summed_over_rows(layout, partial, rows);
  return {sum, count};
}

}  // namespace tessera
