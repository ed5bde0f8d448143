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

MultiLabelBinaryCrossEntropy::MultiLabelBinaryCrossEntropy(std::vector<float> positive_weight,
                                                           MetricKind metric)
    : positive_weight_(std::move(positive_weight)), metric_(metric) {
  make_metric(metric_, true);  // refuses accuracy here, not at the first evaluation
  for (size_t t = 0; t < positive_weight_.size(); ++t)
    require(std::isfinite(positive_weight_[t]) && positive_weight_[t] > 0, "`pos-weight`: task ", t,
            " has weight ", positive_weight_[t], " (a positive number)");
}

LossSum MultiLabelBinaryCrossEntropy::sum_and_gradient(const LossInput& in, const Matrix<float>& grad) {
  const int64_t tasks = int64_t(in.targets.extent(1));
  require(in.targets.extent(0) == in.logits.extent(0) && tasks == in.layout.classes_total,
          "multi_label_binary_cross_entropy: ", in.targets.extent(0), " x ", tasks, " targets for ",
          in.logits.extent(0), " rows of ", in.layout.classes_total, " tasks (a multi-label graph's labels)");
  require(positive_weight_.empty() || int64_t(positive_weight_.size()) == tasks,
          "`pos-weight`: ", positive_weight_.size(), " weights for ", tasks, " tasks");
  if (int64_t(weight_view_.extent(0)) != tasks) {
    weight_view_ = Vector<float>("positive_weight", size_t(tasks));
    auto host = Kokkos::create_mirror_view(weight_view_);
    for (int64_t t = 0; t < tasks; ++t)
      host(t) = positive_weight_.empty() ? 1.0f : positive_weight_[size_t(t)];
    Kokkos::deep_copy(weight_view_, host);
  }
  const auto z = in.logits;
  const auto y = in.targets;
  const auto mask = in.mask;
  const auto weight = weight_view_;
  const int64_t cols = int64_t(z.extent(1)), real = in.real_columns(), first = in.layout.col_begin;
  double partial = 0;
  int64_t entries = 0;
  Kokkos::parallel_reduce(
      "tessera::multi_label_binary_cross_entropy", Kokkos::RangePolicy<ExecSpace>(0, int64_t(z.extent(0))),
      KOKKOS_LAMBDA(int64_t i, double& sum, int64_t& n) {
        for (int64_t j = 0; j < cols; ++j) {
          const int target = j < real ? int(y(i, first + j)) : -1;
          double g = 0;
          if (mask(i) != 0 && target >= 0) {
            const double x = z(i, j), p = weight(first + j);
            // softplus(-x) and softplus(x) without overflow: log(1 + e^-|x|) plus the positive part.
            const double tail = ::log1p(::exp(x > 0 ? -x : x));
            const double above = (x > 0 ? 0.0 : -x) + tail, below = (x > 0 ? x : 0.0) + tail;
            const double s = 1.0 / (1.0 + ::exp(-x));
            sum += target == 1 ? p * above : below;
            g = target == 1 ? p * (s - 1.0) : s;
            ++n;
          }
          grad(i, j) = float(g);
        }
      },
      partial, entries);
  // The entries of a row are spread over the classes' axis: both sums go over it, then over the rows' axis.
  if (in.layout.classes->size() > 1) {
    double both[2] = {partial, double(entries)};
    all_reduce(*in.layout.classes, both, 2, ReduceOp::Sum, "loss allreduce a");
    partial = both[0], entries = int64_t(both[1]);
  }
  const auto [sum, count] = summed_over_rows(in.layout, partial, entries);
  return {sum, count};
}

std::unique_ptr<Metric> MultiLabelBinaryCrossEntropy::metric() const {
  return make_metric(metric_, true);
}

LossSum sum_over_grid(const LogitsLayout& layout, double partial, int64_t rows) {
  // Entered by every rank of the replica alike, whatever its share (an empty block sends zeros).
  if (layout.classes->size() > 1)
    partial = all_reduce_value(*layout.classes, partial, ReduceOp::Sum, "loss allreduce a");
  const auto [sum, count] = summed_over_rows(layout, partial, rows);
  return {sum, count};
}

}  // namespace tessera
