// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/sampling/neighbor.hpp"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"

namespace tessera {

void sample_neighbors(const int64_t* nbrs, int64_t degree, int fanout, const NeighborKey& key, int layer,
                      int64_t node, std::vector<int64_t>& out) {
  if (fanout < 0 || degree <= fanout) {
    out.insert(out.end(), nbrs, nbrs + degree);
    return;
  }
  const size_t at = out.size();
  out.resize(at + size_t(fanout));
  draw_positions(neighbor_rng(key, layer), node, degree, fanout, out.data() + at);
  for (size_t q = at; q < out.size(); ++q) out[q] = nbrs[out[q]];
}

NeighborSampler::NeighborSampler(const Communicator& comm, const PartitionedGraph& graph,
                                 std::vector<int> fanouts, uint64_t seed, SimulatedNetwork network)
    : comm_(comm), graph_(graph), fanouts_(std::move(fanouts)), seed_(seed), network_(network) {}

std::vector<SampledBlock> NeighborSampler::sample(const std::vector<int64_t>& seeds, int64_t epoch,
                                                  int64_t step) const {
  const NeighborKey key{seed_, epoch, step};
  const int ranks = comm_.size();
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> remote;  // node -> (offset, count) in lists
  std::unordered_map<int64_t, int64_t> far_degree;  // degrees the owners sent of nodes this rank cannot see
  std::vector<int64_t> lists;
  auto sample_owned = [&](int layer, int64_t v, std::vector<int64_t>& out) {
    const int64_t i = v - graph_.first;
    const int64_t begin = graph_.row_ptr[size_t(i)], end = graph_.row_ptr[size_t(i + 1)];
    sample_neighbors(graph_.col.data() + begin, end - begin, fanouts_[size_t(layer)], key, layer, v, out);
  };
  // Before each layer: send the frontier's remote nodes to their owners, who sample them and answer with
  // [count, neighbours..., their degrees...] per node, in request order (a neighbour of a remote node may be
  // two hops from every node of this rank: its degree, for the GCN weights, comes with it).
  auto prepare = [&](int layer, const std::vector<int64_t>& frontier) {
    std::vector<std::vector<int64_t>> ask(static_cast<size_t>(ranks));
    for (int64_t v : frontier)
      if (!graph_.owns(v)) ask[size_t(graph_.owner(v))].push_back(v);
    std::vector<int64_t> asked_counts;
    const std::vector<int64_t> asked =
        exchange_buckets_on(comm_, ask, "sample requests", network_, &asked_counts);
    std::vector<std::vector<int64_t>> answer(static_cast<size_t>(ranks));
    size_t k = 0;
    for (int r = 0; r < ranks; ++r)
      for (int64_t j = 0; j < asked_counts[size_t(r)]; ++j, ++k) {
        std::vector<int64_t>& out = answer[size_t(r)];
        const size_t header = out.size();
        out.push_back(0);
        require(graph_.owns(asked[k]), "neighbour sampling: rank ", comm_.rank(), " asked for node ",
                asked[k], " it does not own");
        sample_owned(layer, asked[k], out);
        const int64_t count = int64_t(out.size() - header - 1);
        out[header] = count;
        for (int64_t e = 0; e < count; ++e) out.push_back(graph_.degree_of(out[header + 1 + size_t(e)]));
      }
    lists = exchange_buckets_on(comm_, answer, "sample answers", network_);
    remote.clear();
    size_t at = 0;
    for (int r = 0; r < ranks; ++r)
      for (int64_t v : ask[size_t(r)]) {
        const int64_t count = lists[at];
        remote[v] = {int64_t(at + 1), count};
        for (int64_t e = 0; e < count; ++e)
          if (!graph_.owns(lists[at + 1 + size_t(e)]))
            far_degree[lists[at + 1 + size_t(e)]] = lists[at + 1 + size_t(count + e)];
        at += size_t(1 + 2 * count);
      }
  };
  auto sample = [&](int layer, int64_t v, std::vector<int64_t>& out) {
    if (graph_.owns(v)) return sample_owned(layer, v, out);
    const auto [offset, count] = remote.at(v);
    out.insert(out.end(), lists.begin() + offset, lists.begin() + offset + count);
  };
  std::vector<SampledBlock> blocks = build_blocks(seeds, int(fanouts_.size()), sample, prepare);
  for (SampledBlock& b : blocks) {
    b.src_degree.reserve(b.src.size());
    for (int64_t v : b.src) {
      const auto far = far_degree.find(v);
      b.src_degree.push_back(far != far_degree.end() ? far->second : graph_.degree_of(v));
    }
  }
  return blocks;
}

}  // namespace tessera
