// SPDX-License-Identifier: BSD-3-Clause
// Multi-label metrics: per-task ranking scores (ROC-AUC, average precision) and F1 over tasks.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/models/nn/metric.hpp"

namespace tessera {

namespace {

// The covered, observed entries of a multi-label batch on the host: calls take(i, j, target) for each, j the
// local column (a real task).
template <class Take>
void for_each_observed(const LossInput& in, const char* metric, Take take) {
  require(in.targets.extent(1) > 0 && int64_t(in.targets.extent(1)) == in.layout.classes_total, metric,
          ": a multi-label metric needs the label matrix of a multi-label graph (", in.targets.extent(1),
          " task columns for ", in.layout.classes_total, " outputs)");
  const auto z = Kokkos::create_mirror_view_and_copy(HostSpace(), in.logits);
  const auto y = Kokkos::create_mirror_view_and_copy(HostSpace(), in.targets);
  const auto mask = Kokkos::create_mirror_view_and_copy(HostSpace(), in.mask);
  const int64_t real = in.real_columns(), first = in.layout.col_begin;
  for (size_t i = 0; i < z.extent(0); ++i) {
    if (mask(i) == 0) continue;
    for (int64_t j = 0; j < real; ++j)
      if (y(i, size_t(first + j)) >= 0) take(i, j, z(i, size_t(j)), int(y(i, size_t(first + j))));
  }
}

// Per-task vectors of every rank of `comm` joined task by task, in rank order: one gather of the counts, one
// of the values. Each input is freed once copied, so at most two copies of the entries coexist.
template <class T>
std::vector<std::vector<T>> gathered_per_task(const Communicator& comm, std::vector<std::vector<T>> mine) {
  if (comm.size() == 1) return mine;
  const size_t tasks = mine.size(), ranks = size_t(comm.size());
  std::vector<int64_t> counts(tasks), all_counts(tasks * ranks);
  std::vector<T> flat;
  for (size_t t = 0; t < tasks; ++t) {
    counts[t] = int64_t(mine[t].size());
    flat.insert(flat.end(), mine[t].begin(), mine[t].end());
    std::vector<T>().swap(mine[t]);
  }
  all_gather(comm, counts.data(), int64_t(tasks), all_counts.data(), "eval");
  std::vector<int64_t> per_rank(ranks, 0);
  for (size_t r = 0; r < ranks; ++r)
    for (size_t t = 0; t < tasks; ++t) per_rank[r] += all_counts[r * tasks + t];
  std::vector<T> all(size_t(std::accumulate(per_rank.begin(), per_rank.end(), int64_t(0))));
  all_gather_v(comm, flat.data(), per_rank, all.data(), "eval");
  std::vector<T>().swap(flat);
  std::vector<std::vector<T>> joined(tasks);
  size_t at = 0;
  for (size_t r = 0; r < ranks; ++r)
    for (size_t t = 0; t < tasks; ++t) {
      const size_t n = size_t(all_counts[r * tasks + t]);
      joined[t].insert(joined[t].end(), all.begin() + long(at), all.begin() + long(at + n));
      at += n;
    }
  return joined;
}

}  // namespace

std::unique_ptr<Metric> make_metric(MetricKind kind, bool multi_label) {
  require(!is_link_metric(kind), "`metric` ", name_of(kMetricKindNames, kind),
          " scores a link task (`task` link); a node task is scored by ",
          multi_label ? "rocauc, ap, f1-micro or f1-macro" : "accuracy");
  if (!multi_label) {
    require(kind == MetricKind::Auto || kind == MetricKind::Accuracy, "`metric` ",
            name_of(kMetricKindNames, kind),
            " scores a multi-label task; a single-label graph is scored by accuracy");
    return std::make_unique<AccuracyMetric>();
  }
  switch (kind) {
    case MetricKind::Auto:
    case MetricKind::RocAuc:
      return std::make_unique<MultiLabelRocAucMetric>();
    case MetricKind::AveragePrecision:
      return std::make_unique<MultiLabelAveragePrecisionMetric>();
    case MetricKind::F1Micro:
      return std::make_unique<MultiLabelF1Metric>(MultiLabelF1Metric::Average::Micro);
    case MetricKind::F1Macro:
      return std::make_unique<MultiLabelF1Metric>(MultiLabelF1Metric::Average::Macro);
    case MetricKind::Accuracy:
    case MetricKind::Hits20:
    case MetricKind::Hits50:
    case MetricKind::Hits100:
    case MetricKind::Mrr:
      break;
  }
  throw Error(
      "`metric` accuracy scores a single-label task; a multi-label graph is scored by rocauc, ap, "
      "f1-micro or f1-macro");
}

void MultiLabelRankMetric::add(const LossInput& in) {
  const size_t real = size_t(std::max<int64_t>(in.real_columns(), 0));
  if (scores_.size() < real) scores_.resize(real), positive_.resize(real);
  for_each_observed(in, name().c_str(), [&](size_t, int64_t j, float z, int target) {
    scores_[size_t(j)].push_back(z);
    positive_[size_t(j)].push_back(uint8_t(target));
  });
}

double MultiLabelRankMetric::value(const LogitsLayout& layout, const Communicator& over) {
  // Every rank of a rows' group (and of `over`) holds the same task columns, but one that evaluated no row
  // has seen none of them: sized alike before the gathers.
  const int64_t columns =
      all_reduce_value(over, all_reduce_value(*layout.rows, int64_t(scores_.size()), ReduceOp::Max, "eval"),
                       ReduceOp::Max, "eval");
  scores_.resize(size_t(columns)), positive_.resize(size_t(columns));
  const auto scores = gathered_per_task(over, gathered_per_task(*layout.rows, std::move(scores_)));
  const auto positive = gathered_per_task(over, gathered_per_task(*layout.rows, std::move(positive_)));
  // Each rank of `over` scores every size-th task; the sums go over `over`, then over the classes' axis
  // (whose ranks hold other tasks). The ranks of a rows' group computed the same sums.
  double sums[2] = {0, 0};  // the scores of tasks with both classes, and those tasks
  for (size_t t = size_t(over.rank()); t < scores.size(); t += size_t(over.size())) {
    const int64_t positives = std::count(positive[t].begin(), positive[t].end(), uint8_t(1));
    if (positives == 0 || positives == int64_t(positive[t].size())) continue;
    sums[0] += score(scores[t], positive[t]);
    sums[1] += 1;
  }
  all_reduce(over, sums, 2, ReduceOp::Sum, "eval");
  all_reduce(*layout.classes, sums, 2, ReduceOp::Sum, "eval");
  scores_.clear(), positive_.clear();
  return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

void MultiLabelF1Metric::add(const LossInput& in) {
  const size_t real = size_t(std::max<int64_t>(in.real_columns(), 0));
  if (counts_.size() < 3 * real) counts_.resize(3 * real, 0);
  for_each_observed(in, name().c_str(), [&](size_t, int64_t j, float z, int target) {
    const bool predicted = z > 0;
    counts_[size_t(3 * j) + (predicted && target == 1 ? 0 : predicted ? 1 : 2)] += predicted || target == 1;
  });
}

double MultiLabelF1Metric::value(const LogitsLayout& layout, const Communicator& over) {
  // Sized alike on every rank that shares task columns: the classes_total's columns this rank holds.
  const int64_t columns = all_reduce_value(*layout.rows, int64_t(counts_.size()), ReduceOp::Max, "eval");
  counts_.resize(size_t(all_reduce_value(over, columns, ReduceOp::Max, "eval")), 0);
  all_reduce(*layout.rows, counts_.data(), int64_t(counts_.size()), ReduceOp::Sum, "eval");
  all_reduce(over, counts_.data(), int64_t(counts_.size()), ReduceOp::Sum, "eval");
  double sums[3] = {0, 0, 0};  // micro: TP, FP, FN; macro: the tasks' F1 in sums[0]
  for (size_t t = 0; 3 * t < counts_.size(); ++t) {
    const double tp = double(counts_[3 * t]), fp = double(counts_[3 * t + 1]),
                 fn = double(counts_[3 * t + 2]);
    if (average_ == Average::Micro) {
      sums[0] += tp, sums[1] += fp, sums[2] += fn;
    } else {
      sums[0] += tp + fp + fn > 0 ? 2 * tp / (2 * tp + fp + fn) : 0.0;
    }
  }
  all_reduce(*layout.classes, sums, 3, ReduceOp::Sum, "eval");
  counts_.clear();
  if (average_ == Average::Macro)
    return layout.classes_total > 0 ? sums[0] / double(layout.classes_total) : 0.0;
  const double denominator = 2 * sums[0] + sums[1] + sums[2];
  return denominator > 0 ? 2 * sums[0] / denominator : 0.0;
}

}  // namespace tessera
