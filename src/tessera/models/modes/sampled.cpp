// SPDX-License-Identifier: BSD-3-Clause
// The pieces of a sampled step: a rank's seeds and each block's aggregation weights.
#include <algorithm>
#include <cmath>

#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"
#include "tessera/models/modes/sampled.hpp"

namespace tessera {

HostCsr block_operator(const SampledBlock& b, Normalization normalization) {
  require(b.src_degree.size() == b.src.size(), "block_operator: ", b.src_degree.size(), " degrees for ",
          b.src.size(), " source nodes");
  const std::vector<int64_t>& degree = b.src_degree;  // by index into src
  HostCsr a;
  a.num_rows = b.num_dst;
  a.num_cols = int64_t(b.src.size());
  const bool gcn = normalization == Normalization::Symmetric;
  a.col_idx.reserve(b.col.size() + (gcn ? size_t(a.num_rows) : 0));
  a.values.reserve(a.col_idx.capacity());
  for (int64_t i = 0; i < a.num_rows; ++i) {
    const int64_t begin = b.row_ptr[size_t(i)], end = b.row_ptr[size_t(i + 1)], k = end - begin;
    const double d = double(degree[size_t(i)]);
    if (gcn) {
      a.col_idx.push_back(i);  // the node itself: destination i is source i
      a.values.push_back(sampled_self_weight(d));
    }
    for (int64_t e = begin; e < end; ++e) {
      const int64_t j = b.col[size_t(e)];
      a.col_idx.push_back(j);
      a.values.push_back(sampled_edge_weight(normalization, d, double(degree[size_t(j)]), double(k)));
    }
    a.row_ptr.push_back(int64_t(a.col_idx.size()));
  }
  return a;
}

namespace {

// The labeled training nodes in the epoch's order.
std::vector<int64_t> epoch_order(const std::vector<int64_t>& train, const std::vector<int64_t>& labels,
                                 int64_t first, uint64_t seed, int64_t epoch) {
  std::vector<std::pair<uint64_t, int64_t>> keyed;
  const uint64_t epoch_key = splitmix64(seed ^ splitmix64(uint64_t(epoch) + 0x5EEDull));
  for (int64_t v : train)
    if (labels[size_t(v - first)] >= 0) keyed.push_back({splitmix64(epoch_key ^ uint64_t(v)), v});
  std::sort(keyed.begin(), keyed.end());
  std::vector<int64_t> order;
  order.reserve(keyed.size());
  for (const auto& entry : keyed) order.push_back(entry.second);
  return order;
}

std::vector<int64_t> step_piece(const std::vector<int64_t>& order, int64_t step, int64_t steps) {
  const int64_t n = int64_t(order.size());
  return std::vector<int64_t>(order.begin() + n * step / steps, order.begin() + n * (step + 1) / steps);
}

}  // namespace

std::vector<int64_t> step_seeds(const std::vector<int64_t>& train, const std::vector<int64_t>& labels,
                                int64_t first, uint64_t seed, int64_t epoch, int64_t step, int64_t steps) {
  return step_piece(epoch_order(train, labels, first, seed, epoch), step, steps);
}

std::vector<int64_t> EpochSeeds::seeds(int64_t epoch, int64_t step, int64_t steps) {
  if (epoch != epoch_) {
    order_ = epoch_order(train_, labels_, first_, seed_, epoch);
    epoch_ = epoch;
  }
  return step_piece(order_, step, steps);
}

bool uses_step_thread(StepThread asked, int node_ranks, int node_cpus, int node_threads,
                      std::string* reason) {
  const bool spare = node_threads + node_ranks <= node_cpus;
  const bool single = node_threads <= node_ranks;  // one compute thread per rank
  const bool on = asked == StepThread::On || (asked == StepThread::Auto && (spare || !single));
  if (!reason) return on;
  const std::string ranks = std::to_string(node_ranks) + (node_ranks == 1 ? " rank's " : " ranks' ") +
                            std::to_string(node_threads) + (node_threads == 1 ? " thread" : " threads");
  const std::string cpus = std::to_string(node_cpus) + (node_cpus == 1 ? " CPU" : " CPUs");
  if (asked != StepThread::Auto)
    *reason = "as asked";
  else if (spare)
    *reason = "auto: " + ranks + " leave a CPU per rank free of the node's " + cpus;
  else if (!single)
    *reason = "auto: " + ranks + " on the node's " + cpus + ", more than one a rank";
  else
    *reason = "auto: " + ranks + " fill the node's " + cpus + ", one a rank";
  return on;
}

HostCsr leading_identity(int64_t dst, int64_t src) {
  HostCsr a;
  a.num_rows = dst;
  a.num_cols = src;
  for (int64_t i = 0; i < dst; ++i) a.col_idx.push_back(i), a.row_ptr.push_back(i + 1);
  return a;
}

}  // namespace tessera
