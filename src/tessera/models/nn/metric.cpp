// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/metric.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

void AccuracyMetric::add(const LossInput& in) {
  const auto [hits, count] = count_correct_3d(in.layout, in.logits, in.labels, in.mask);
  hits_ += hits;
  count_ += count;
}

double AccuracyMetric::value(const LogitsLayout&, const Communicator& over) {
  // add() already summed over the layout's axes; the batches of other ranks of `over` held other rows.
  int64_t totals[2] = {hits_, count_};
  all_reduce(over, totals, 2, ReduceOp::Sum, "eval");
  hits_ = count_ = 0;
  return totals[1] > 0 ? double(totals[0]) / double(totals[1]) : 0.0;
}

void RocAucMetric::add(const LossInput& in) {
  require(in.layout.classes_total == 1, "roc_auc: the logits must be one column (the score of class 1), not ",
          in.layout.classes_total);
  if (in.real_columns() == 0) return;  // another rank of the classes' axis holds the column
  const auto z = Kokkos::create_mirror_view_and_copy(HostSpace(), in.logits);
  const auto y = Kokkos::create_mirror_view_and_copy(HostSpace(), in.labels);
  const auto mask = Kokkos::create_mirror_view_and_copy(HostSpace(), in.mask);
  for (size_t i = 0; i < z.extent(0); ++i) {
    if (mask(i) == 0 || y(i) < 0) continue;
    if (y(i) > 1) bad_label_ = y(i);
    scores_.push_back(z(i, 0));
    positive_.push_back(y(i) == 1);
  }
}

namespace {

// Every rank's values of `comm`, in rank order.
template <class T>
std::vector<T> gathered(const Communicator& comm, const std::vector<T>& mine) {
  if (comm.size() == 1) return mine;
  std::vector<int64_t> counts(size_t(comm.size()));
  const int64_t count = int64_t(mine.size());
  all_gather(comm, &count, 1, counts.data(), "eval");
  std::vector<T> all(size_t(std::accumulate(counts.begin(), counts.end(), int64_t(0))));
  all_gather_v(comm, mine.data(), counts, all.data(), "eval");
  return all;
}

}  // namespace

double RocAucMetric::value(const LogitsLayout& layout, const Communicator& over) {
  // Every covered row's score once: the ranks holding the column gather their rows' axis and `over`; the
  // area is then shared over the classes' axis (ranks without the column contribute nothing).
  int64_t bad = bad_label_;
  for (const Communicator* comm : {layout.rows, layout.classes, &over})
    bad = all_reduce_value(*comm, bad, ReduceOp::Max, "eval");
  require(bad < 0, "roc_auc: label ", bad, " on an evaluated node; a two-class task has labels 0 and 1");
  std::vector<float> scores = gathered(over, gathered(*layout.rows, scores_));
  std::vector<uint8_t> positive = gathered(over, gathered(*layout.rows, positive_));
  double area = scores.empty() ? -1.0 : roc_auc(scores, positive);
  area = all_reduce_value(*layout.classes, area, ReduceOp::Max, "eval");
  scores_.clear(), positive_.clear();
  return std::max(area, 0.0);
}

namespace {

// Indices of `scores`, lowest first; a NaN score (a diverged model) ranks below every number, so the order
// stays strict.
std::vector<size_t> ascending_order(const std::vector<float>& scores) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const float x = scores[a], y = scores[b];
    return x < y || (std::isnan(x) && !std::isnan(y));
  });
  return order;
}

}  // namespace

double roc_auc(const std::vector<float>& scores, const std::vector<uint8_t>& positive) {
  const size_t n = scores.size();
  const std::vector<size_t> order = ascending_order(scores);
  // Mann-Whitney: the positives' ranks (1-based, ties given their mean rank) less the smallest possible sum.
  double rank_sum = 0;
  int64_t positives = 0;
  for (size_t begin = 0; begin < n;) {
    size_t end = begin;
    int64_t tied_positives = 0;
    while (end < n && scores[order[end]] == scores[order[begin]]) tied_positives += positive[order[end++]];
    rank_sum += double(tied_positives) * (double(begin + 1) + double(end)) / 2;
    positives += tied_positives;
    begin = end;
  }
  const int64_t negatives = int64_t(n) - positives;
  if (positives == 0 || negatives == 0) return 0.0;
  return (rank_sum - double(positives) * double(positives + 1) / 2) / (double(positives) * double(negatives));
}

double average_precision(const std::vector<float>& scores, const std::vector<uint8_t>& positive) {
  const size_t n = scores.size();
  std::vector<size_t> order = ascending_order(scores);
  std::reverse(order.begin(), order.end());  // highest first, NaN scores last
  const int64_t positives = std::count(positive.begin(), positive.end(), uint8_t(1));
  if (positives == 0 || positives == int64_t(n)) return 0.0;
  double area = 0;
  int64_t true_positives = 0;
  for (size_t begin = 0; begin < n;) {  // one threshold per distinct score: ties enter together
    size_t end = begin;
    int64_t tied_positives = 0;
    while (end < n && (scores[order[end]] == scores[order[begin]] ||
                       (std::isnan(scores[order[end]]) && std::isnan(scores[order[begin]]))))
      tied_positives += positive[order[end++]];
    true_positives += tied_positives;
    area += double(tied_positives) / double(positives) * double(true_positives) / double(end);
    begin = end;
  }
  return area;
}

double hits_at_k(const std::vector<float>& positive, const std::vector<float>& negative, int64_t k) {
  require(k >= 1, "Hits@K needs K >= 1, not ", k);
  if (int64_t(negative.size()) < k) return 1.0;  // OGB's rule: fewer negatives than K, every positive hits
  if (positive.empty()) return 0.0;
  std::vector<float> top(negative);
  std::nth_element(top.begin(), top.begin() + (k - 1), top.end(), std::greater<float>());
  const float kth = top[size_t(k - 1)];
  const auto hits = std::count_if(positive.begin(), positive.end(), [kth](float s) { return s > kth; });
  return double(hits) / double(positive.size());
}

double mean_reciprocal_rank(const std::vector<float>& positive, const std::vector<float>& negative,
                            int64_t per_edge) {
  require(per_edge >= 1 && negative.size() == positive.size() * size_t(per_edge), "MRR: ", negative.size(),
          " negative scores for ", positive.size(), " positives of ", per_edge, " negatives each");
  if (positive.empty()) return 0.0;
  double sum = 0;
  for (size_t e = 0; e < positive.size(); ++e) {
    const float* row = negative.data() + e * size_t(per_edge);
    int64_t above = 0, tied = 0;
    for (int64_t j = 0; j < per_edge; ++j) above += row[j] > positive[e], tied += row[j] == positive[e];
    sum += 1.0 / (1.0 + double(above) + 0.5 * double(tied));  // OGB: the mean of its two ranks
  }
  return sum / double(positive.size());
}

}  // namespace tessera
