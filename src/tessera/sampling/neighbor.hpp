// SPDX-License-Identifier: BSD-3-Clause
// Neighbour sampling for partition-parallel training (docs/architecture.md §6, GraphSAGE / DistDGL): from a
// step's seed nodes, each layer (output side first) keeps at most `fanout` distinct in-neighbours of every
// frontier node, and the sampled nodes become the next frontier. A node's sample is a pure function of (seed,
// epoch, step, layer, node), so the rank that owns the node draws exactly what a rank holding the whole graph
// would: frontier nodes owned elsewhere are sent to their owners in one all-to-all per layer and sampled
// there. The result is a message-flow block per layer.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/comm/simulated_network.hpp"
#include "tessera/core/flat_id_map.hpp"
#include "tessera/core/random.hpp"
#include "tessera/graph/partitioned.hpp"

namespace tessera {

namespace detail {
class SourceIndex;
struct RemoteLists;
struct LocalIndex;
}  // namespace detail

/// What a neighbour sample is a function of, besides the layer and the node.
struct NeighborKey {
  uint64_t seed = 0;  ///< the run's seed
  int64_t epoch = 0;  ///< epoch index
  int64_t step = 0;   ///< step within the epoch
};

/// One layer's bipartite block: rows are its destination nodes (the first num_dst entries of `src`, so a
/// node's own row is at the same index on both sides), columns index `src`; row i lists the local indices
/// of dst i's sampled in-neighbours (column order = the neighbour list's order).
struct SampledBlock {
  int64_t num_dst = 0;           ///< destination nodes (rows)
  std::vector<int64_t> src;      ///< global (renumbered) ids: dst nodes first, then new nodes by first use
  std::vector<int64_t> row_ptr;  ///< num_dst + 1 offsets into col
  std::vector<int64_t> col;      ///< index into src of each sampled in-neighbour
  std::vector<int64_t>
      src_degree;  ///< in-degree of each src node (NeighborSampler fills it; build_blocks not)
};

/// The generator of one layer's neighbour draws, the same for the host and device samplers.
KOKKOS_INLINE_FUNCTION CounterRng neighbor_rng(const NeighborKey& key, int layer) {
  return CounterRng(key.seed, splitmix64(uint64_t(key.epoch) * 0x9E3779B97F4A7C15ull ^
                                         splitmix64(uint64_t(key.step) * 64 + uint64_t(layer))));
}

/// How many of a node's `degree` in-neighbours a layer of fanout `fanout` keeps (negative: all of them).
/// Fewer than `degree` means they are drawn; every sampler asks this one rule.
KOKKOS_INLINE_FUNCTION int64_t kept_neighbors(int64_t degree, int64_t fanout) {
  return fanout < 0 || degree <= fanout ? degree : fanout;
}

/// One draw of Floyd's algorithm: position j's candidate t (uniform in [0, j]) joins out[0, m), or j
/// itself when t is already there.
KOKKOS_INLINE_FUNCTION void floyd_step(int64_t t, int64_t j, int64_t* out, int64_t& m) {
  bool taken = false;
  for (int64_t q = 0; q < m; ++q) taken = taken || out[q] == t;
  out[m++] = taken ? j : t;
}

/// Insertion sort of a fanout's few positions.
KOKKOS_INLINE_FUNCTION void sort_positions(int64_t* out, int64_t m) {
  for (int64_t q = 1; q < m; ++q) {
    const int64_t x = out[q];
    int64_t r = q;
    for (; r > 0 && out[r - 1] > x; --r) out[r] = out[r - 1];
    out[r] = x;
  }
}

/// Floyd's algorithm: `fanout` distinct positions of [0, degree) (0 < fanout < degree), each draw keyed by
/// (node, j), written to out[0, fanout) in increasing order. Quadratic in the fanout, which is small; a
/// device thread runs it in the output it fills, so no sampler allocates per node.
KOKKOS_INLINE_FUNCTION void draw_positions(const CounterRng& rng, int64_t node, int64_t degree,
                                           int64_t fanout, int64_t* out) {
  int64_t m = 0;
  for (int64_t j = degree - fanout; j < degree; ++j)
    floyd_step(int64_t(rng.below(uint64_t(node), uint64_t(j), uint64_t(j + 1))), j, out, m);
  sort_positions(out, m);
}

/// draw_positions from the draws' random words made beforehand (CounterRng::below_words of counters
/// (node, j) for j = degree - fanout, ..., degree - 1, in that order): the same positions, without a
/// data-dependent branch (a sampler's mispredicted branches cost more than its arithmetic). A list of up to
/// 64 neighbours keeps the positions drawn as the bits of one word (a test and a set per draw, read out in
/// order), a longer one compares each draw with those before. `drawn` holds fanout entries of scratch.
inline void draw_positions_from(const uint64_t* words, int64_t degree, int64_t fanout, int64_t* drawn,
                                int64_t* out) {
  if (degree <= 64) {  // most lists: the positions drawn as bits of one word, read out in increasing order
    uint64_t chosen = 0;
    for (int64_t q = 0; q < fanout; ++q) {
      const int64_t j = degree - fanout + q;
      const uint64_t t = uint64_t(1) << mul_high64(words[q], uint64_t(j + 1));
      chosen |= (chosen & t) != 0 ? uint64_t(1) << j : t;
    }
    for (int64_t q = 0; q < fanout; ++q, chosen &= chosen - 1) out[q] = int64_t(__builtin_ctzll(chosen));
    return;
  }
  for (int64_t q = 0; q < fanout; ++q) {
    const int64_t j = degree - fanout + q;
    const int64_t t = int64_t(mul_high64(words[q], uint64_t(j + 1)));
    int64_t taken = 0;
    for (int64_t p = 0; p < q; ++p) taken |= int64_t(drawn[p] == t);
    drawn[q] = taken ? j : t;  // a conditional move
  }
  for (int64_t q = 0; q < fanout; ++q) {  // distinct: each goes where the count of smaller ones says
    int64_t rank = 0;
    for (int64_t p = 0; p < fanout; ++p) rank += int64_t(drawn[p] < drawn[q]);
    out[rank] = drawn[q];
  }
}

/// Appends the sampled neighbours of a node (neighbour list nbrs[0, degree)) to `out`: all of them when
/// fanout < 0 or degree <= fanout, else `fanout` distinct ones (Floyd's algorithm keyed by (key, layer,
/// node)), kept in list order.
void sample_neighbors(const int64_t* nbrs, int64_t degree, int fanout, const NeighborKey& key, int layer,
                      int64_t node, std::vector<int64_t>& out);

/// Blocks from per-layer neighbour lists: a plain serial builder (the reference and the one-rank path).
/// sample(layer, node, out) appends node's sampled neighbours; prepare(layer, frontier) runs before a
/// layer's frontier is sampled (the distributed sampler fetches remote lists there). Returns blocks[0] =
/// the input layer.
template <class SampleFn, class PrepareFn>
std::vector<SampledBlock> build_blocks(const std::vector<int64_t>& seeds, int layers, SampleFn&& sample,
                                       PrepareFn&& prepare);
template <class SampleFn>
std::vector<SampledBlock> build_blocks(const std::vector<int64_t>& seeds, int layers, SampleFn&& sample);

/// The distributed neighbour sampler: each rank samples the frontier nodes it owns.
class NeighborSampler {
 public:
  /// Collective use only: every rank calls sample() once per step, with its own (possibly empty) seeds.
  NeighborSampler(const Communicator& comm, const PartitionedGraph& graph, std::vector<int> fanouts,
                  uint64_t seed, SimulatedNetwork network = {});
  /// A sampler of the same graph, fanouts, seed and network on another communicator (`same`'s indices
  /// shared, not rebuilt). `same` may be destroyed first.
  NeighborSampler(const Communicator& comm, const NeighborSampler& same);
  ~NeighborSampler();

  /// blocks[l] feeds layer l; blocks.back() has the seeds as destinations. A seed may be any node of the
  /// graph (one owned elsewhere is sampled by its owner, as the frontier's nodes are).
  std::vector<SampledBlock> sample(const std::vector<int64_t>& seeds, int64_t epoch, int64_t step) const;
  /// Per layer (input layer first): neighbours kept per node, -1 for all.
  const std::vector<int>& fanouts() const { return fanouts_; }

 private:
  // A node's local index: owned nodes first, then the halo's (-1 for any other node).
  int64_t local_of(int64_t node) const;
  // The in-degree of a local node; of an owned or halo node (throws for any other).
  int64_t local_degree(int64_t local) const;
  // Ask for the lines an owned node's list offsets, or a local node's degree, will be read from.
  void prefetch_offsets(int64_t node) const;
  void prefetch_degree(int64_t local) const;
  detail::RemoteLists remote_lists(int layer, const NeighborKey& key,
                                   const std::vector<int64_t>& frontier) const;
  void name_locally(detail::RemoteLists& remote) const;
  // How many neighbours a layer keeps of its frontier (in-degrees `degree`, lists sent by their owners).
  size_t kept_edges(int layer, const std::vector<int64_t>& degree, const detail::RemoteLists& remote) const;
  // One layer's block from its destination nodes (ids, local indices, in-degrees) and the remote lists.
  void build_block(int layer, const NeighborKey& key, const std::vector<int64_t>& ids,
                   const std::vector<int64_t>& local, const std::vector<int64_t>& degree,
                   const detail::RemoteLists& remote, detail::SourceIndex& index, SampledBlock& b) const;

  const Communicator& comm_;
  const PartitionedGraph& graph_;
  std::vector<int> fanouts_;
  uint64_t seed_;
  SimulatedNetwork network_;
  std::shared_ptr<const detail::LocalIndex> local_;  // halo ids and graph_.col as local indices
  // The index a sample builds its blocks with, kept for the next (one per concurrent caller: a caller that
  // finds none makes its own, and the last one back is kept).
  std::unique_ptr<detail::SourceIndex> take_index() const;
  void give_back(std::unique_ptr<detail::SourceIndex> index) const;
  mutable std::mutex index_mutex_;
  mutable std::unique_ptr<detail::SourceIndex> spare_index_;
};

}  // namespace tessera

#include "tessera/sampling/neighbor_impl.hpp"
