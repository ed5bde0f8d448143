// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/loss.hpp"

#include <cmath>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/models/nn/metric.hpp"

namespace tessera {

int64_t LossInput::real_columns() const {
  return real_classes(layout, int64_t(logits.extent(1)));
}

LossSum SoftmaxCrossEntropy::sum_and_gradient(const LossInput& in, const Matrix<float>& grad) {
  const auto [sum, count] = softmax_cross_entropy_3d(in.layout, in.logits, in.labels, in.mask, 1.0f, grad);
  return {sum, count};
}

std::unique_ptr<Metric> Loss::metric() const {
  return std::make_unique<AccuracyMetric>();
}

LossSum BinaryCrossEntropy::sum_and_gradient(const LossInput& in, const Matrix<float>& grad) {
  require(in.layout.classes_total == 1, "binary_cross_entropy: the model's output must be one column (the ",
          "logit of class 1), not ", in.layout.classes_total);
  const auto z = in.logits;
  const auto labels = in.labels;
  const auto mask = in.mask;
  const int64_t cols = int64_t(z.extent(1)), real = in.real_columns();
  double partial = 0;
  int64_t rows = 0, bad = 0;
  Kokkos::parallel_reduce(
      "tessera::binary_cross_entropy", Kokkos::RangePolicy<ExecSpace>(0, int64_t(z.extent(0))),
      KOKKOS_LAMBDA(int64_t i, double& sum, int64_t& n, int64_t& past_one) {
        const int64_t y = labels(i);
        const bool covered = mask(i) != 0 && y >= 0;
        for (int64_t j = 0; j < cols; ++j) {
          double g = 0;
          if (covered && j < real) {
            const double x = z(i, j);
            // log(1 + e^x) - y x without overflow: max(x, 0) - y x + log(1 + e^-|x|).
            sum += (x > 0 ? x : 0.0) - double(y) * x + ::log1p(::exp(x > 0 ? -x : x));
            g = 1.0 / (1.0 + ::exp(-x)) - double(y);
          }
          grad(i, j) = float(g);
        }
        n += covered ? 1 : 0;
        past_one += covered && y > 1 ? 1 : 0;
      },
      partial, rows, bad);
  // Every rank of the replica learns of a bad label before any rank throws (the classes' axis holds copies
  // of the same rows).
  bad = all_reduce_value(*in.layout.rows, bad, ReduceOp::Sum, "loss");
  bad = all_reduce_value(*in.layout.classes, bad, ReduceOp::Max, "loss");
  require(bad == 0, "binary_cross_entropy: ", bad,
          " covered nodes have a label other than 0 or 1 (a two-class ", "task)");
  return sum_over_grid(in.layout, partial, rows);
}

std::unique_ptr<Metric> BinaryCrossEntropy::metric() const {
  return std::make_unique<RocAucMetric>();
}

LossSum sum_over_grid(const LogitsLayout& layout, double partial, int64_t rows) {
  // Entered by every rank of the replica alike, whatever its share (an empty block sends zeros).
  if (layout.classes->size() > 1)
    partial = all_reduce_value(*layout.classes, partial, ReduceOp::Sum, "loss allreduce a");
  const auto [sum, count] = summed_over_rows(layout, partial, rows);
  return {sum, count};
}

}  // namespace tessera
