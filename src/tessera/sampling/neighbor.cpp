// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/sampling/neighbor.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>

#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"

namespace tessera {

void sample_neighbors(const int64_t* nbrs, int64_t degree, int fanout, const NeighborKey& key, int layer,
                      int64_t node, std::vector<int64_t>& out) {
  const int64_t keep = kept_neighbors(degree, fanout);
  if (keep == degree) {
    out.insert(out.end(), nbrs, nbrs + degree);
    return;
  }
  const size_t at = out.size();
  out.resize(at + size_t(keep));
  draw_positions(neighbor_rng(key, layer), node, degree, keep, out.data() + at);
  for (size_t q = at; q < out.size(); ++q) out[q] = nbrs[out[q]];
}

namespace detail {

// Sources looked ahead of the one whose degree is read: far enough for a miss to land first.
constexpr size_t kDegreeAhead = 16;

/// A rank's local index of a node (owned ones first: id - first, then the halo's: count + k for halo[k])
/// back to its id: a subtraction or one load from the halo list (small, unlike the graph's column array).
struct LocalNames {
  int64_t first = 0, count = 0;
  const int64_t* halo = nullptr;

  int64_t id_of(int64_t local) const { return local < count ? first + local : halo[local - count]; }
};

/// A block's source list as it grows, with the index from node to position: a dense array over the
/// rank's local nodes (owned, then halo: most of a METIS partition's frontier; one load from a table that
/// fits in L2 per sampled edge, and no branch on whether the node is new) and a hash map for nodes two hops
/// away. Each source is kept with its local index (-1: none) and in-degree; a local source's id is written
/// when the block is finished (from its local index), not per sampled edge. Reused for every layer.
class SourceIndex {
 public:
  SourceIndex(size_t local_nodes, LocalNames names) : dense_(local_nodes, -1), names_(names) {}

  /// Starts a block whose first sources are `frontier`, each at its own position even where a node repeats
  /// (as build_blocks numbers them; the index keeps the first).
  void start(const std::vector<int64_t>& frontier, const std::vector<int64_t>& local,
             const std::vector<int64_t>& degree) {
    size_ = 0;
    reserve(frontier.size());
    for (size_t i = 0; i < frontier.size(); ++i) {
      add(frontier[i], local[i], degree[i]);
      size_ = i + 1;
    }
  }

  /// Room for `more` sources.
  void reserve(size_t more) {
    require(size_ + more < size_t(INT32_MAX), "neighbour sampling: a block of over 2^31 source nodes");
    if (size_ + more + 1 <= ids_.size()) return;
    ids_.resize(2 * (size_ + more + 1));
    local_.resize(ids_.size());
    degree_.resize(ids_.size());
  }

  /// The position of `id` (local index `local`, or -1) among the sources, after adding it if it is new.
  int64_t add(int64_t id, int64_t local, int64_t degree) {
    if (uint64_t(local) < dense_.size()) return add_local(int32_t(local), degree);
    ids_[size_] = id;  // kept only if id is new
    local_[size_] = local;
    degree_[size_] = degree;
    const auto [position, inserted] = far_.try_emplace(id, int64_t(size_));
    size_ += size_t(inserted);
    return position;
  }

  /// add() for a node of local index `local` (>= 0): its id is named at finish().
  int64_t add_local(int32_t local, int64_t degree) {
    local_[size_] = local;  // kept only if the node is new
    degree_[size_] = degree;
    const int32_t slot = dense_[size_t(local)];
    const int32_t position = slot >= 0 ? slot : int32_t(size_);
    dense_[size_t(local)] = position;
    size_ += size_t(slot < 0);
    return position;
  }

  /// Asks for the line add_local(local, ...) reads (a hint: a chunk's locals before they are added).
  void prefetch_local(int32_t local) const { __builtin_prefetch(dense_.data() + local); }

  /// The sources so far: local indices, degrees.
  size_t size() const { return size_; }
  const int64_t* locals() const { return local_.data(); }
  int64_t* degrees() { return degree_.data(); }

  /// Copies the sources out (ids, local indices, degrees) and forgets them.
  void finish(std::vector<int64_t>& ids, std::vector<int64_t>& locals, std::vector<int64_t>& degrees) {
    const auto end = std::ptrdiff_t(size_);
    ids.assign(ids_.begin(), ids_.begin() + end);
    locals.assign(local_.begin(), local_.begin() + end);
    degrees.assign(degree_.begin(), degree_.begin() + end);
    for (size_t k = 0; k < size_; ++k)
      if (locals[k] >= 0) {
        ids[k] = names_.id_of(locals[k]);
        dense_[size_t(locals[k])] = -1;
      }
    far_.clear();
    size_ = 0;
  }

 private:
  std::vector<int32_t> dense_;
  LocalNames names_;
  FlatIdMap far_;
  std::vector<int64_t> ids_, local_, degree_;  // the first size_ entries are the sources
  size_t size_ = 0;
};

/// The sampled neighbour lists of a layer's frontier nodes that other ranks own, as their owners sent
/// them: [count, neighbours..., their in-degrees..., its own in-degree] per node; at[i] is frontier node
/// i's offset (-1 when this rank owns it); local[at[i] + 1 + q] is the local index of its q-th neighbour
/// (-1: neither owned nor in the halo; the other entries of `local` are unused).
struct RemoteLists {
  std::vector<int64_t> lists;
  std::vector<int64_t> at;
  std::vector<int64_t> local;
};

LocalNames names_of(const PartitionedGraph& graph) {
  return LocalNames{graph.first, graph.count, graph.halo.data()};
}

/// A rank's nodes as local indices: owned ones first (id - first), then the halo's (count + k for halo[k]).
struct LocalIndex {
  FlatIdMap halo_index;            // halo node -> k
  std::vector<int32_t> local_col;  // each in-neighbour of graph.col as a local index

  LocalIndex(const PartitionedGraph& graph, int rank) : halo_index(graph.halo.size()) {
    require(graph.count + int64_t(graph.halo.size()) < INT32_MAX, graph.path,
            ": neighbour sampling indexes a rank's owned and halo nodes in 32 bits, and rank ", rank, " has ",
            graph.count + int64_t(graph.halo.size()));
    for (size_t k = 0; k < graph.halo.size(); ++k) halo_index.try_emplace(graph.halo[k], int64_t(k));
    local_col.resize(graph.col.size());
    for (size_t e = 0; e < graph.col.size(); ++e) {
      const int64_t u = graph.col[e];
      const int64_t local = graph.owns(u) ? u - graph.first : graph.count + halo_index.find(u);
      require(local >= graph.count || graph.owns(u), graph.path, ": in-neighbour ", u, " of rank ", rank,
              "'s nodes is neither owned nor in its halo");
      local_col[e] = int32_t(local);
    }
  }
};

/// Samples owned nodes a chunk at a time, drawing what sample_neighbors draws one node at a time: the
/// Philox words of every draw in the chunk made in one vectorized pass, then Floyd's selection node by
/// node, then the chosen neighbours' local indices read in one loop of independent loads (the caller asks
/// for the next chunk's lists meanwhile, prefetch_list). Their ids are not read: a local index names its
/// node (LocalNames), and the graph's column array would be a second miss per sampled edge.
class ChunkSampler {
 public:
  static constexpr size_t kChunk = 64;

  ChunkSampler(const PartitionedGraph& graph, const int32_t* local_col, int fanout, const CounterRng& rng)
      : graph_(graph), local_col_(local_col), fanout_(fanout), rng_(rng) {
    const size_t draws = kChunk * size_t(std::max(fanout, 0));
    a_.resize(draws);
    b_.resize(draws);
    words_.resize(draws);
    drawn_.resize(size_t(std::max(fanout, 0)));
  }

  /// Samples nodes[0, n), n <= kChunk, all owned by this rank: the draws' words, then each node's
  /// positions in its list, then (one loop of independent loads) the neighbours at those positions.
  void sample(const int64_t* nodes, size_t n) {
    size_t draws = 0, kept = 0;
    for (size_t k = 0; k < n; ++k) {
      const int64_t i = nodes[k] - graph_.first;
      begin_[k] = graph_.row_ptr[size_t(i)];
      degree_[k] = graph_.row_ptr[size_t(i + 1)] - begin_[k];
      const int64_t keep = kept_neighbors(degree_[k], fanout_);
      kept += size_t(keep);
      if (keep == degree_[k]) continue;
      for (int64_t j = degree_[k] - keep; j < degree_[k]; ++j, ++draws) {
        a_[draws] = uint64_t(nodes[k]);
        b_[draws] = uint64_t(j);
      }
    }
    rng_.below_words(a_.data(), b_.data(), draws, words_.data());
    at_.resize(kept);
    draws = kept = 0;
    for (size_t k = 0; k < n; ++k) {
      int64_t* at = at_.data() + kept;
      const int64_t keep = kept_neighbors(degree_[k], fanout_);
      if (keep == degree_[k]) {
        for (int64_t e = 0; e < keep; ++e) at[e] = begin_[k] + e;
      } else {
        draw_positions_from(words_.data() + draws, degree_[k], keep, drawn_.data(), at);
        for (int64_t q = 0; q < keep; ++q) at[q] += begin_[k];
        draws += size_t(keep);
      }
      kept += size_t(keep);
      end_[k] = kept;
    }
    local_.resize(kept);
    for (size_t q = 0; q < kept; ++q) local_[q] = local_col_[at_[q]];
  }

  /// Asks for the lines of an owned node's neighbour list, as local indices (up to a few; a hub's draws
  /// land anywhere).
  void prefetch_list(int64_t node) const {
    const int64_t* offset = graph_.row_ptr.data() + (node - graph_.first);
    const int32_t* list = local_col_ + offset[0];
    const int64_t length = std::min<int64_t>(offset[1] - offset[0], 64);
    for (int64_t e = 0; e < length; e += 16) __builtin_prefetch(list + e);
    if (length > 0) __builtin_prefetch(list + length - 1);
  }

  /// The local indices (as NeighborSampler::local_of gives them) of the chunk's k-th node's sampled
  /// neighbours: [begin(k), end(k)); all the chunk's: [begin(0), end(n - 1)).
  const int32_t* begin(size_t k) const { return local_.data() + (k == 0 ? 0 : end_[k - 1]); }
  const int32_t* end(size_t k) const { return local_.data() + end_[k]; }

 private:
  const PartitionedGraph& graph_;
  const int32_t* local_col_;
  int fanout_;
  CounterRng rng_;
  std::array<int64_t, kChunk> begin_{}, degree_{};
  std::array<size_t, kChunk> end_{};
  std::vector<uint64_t> a_, b_, words_;
  std::vector<int64_t> drawn_, at_;  // Floyd's scratch; each kept edge's offset in col
  std::vector<int32_t> local_;       // and its neighbour's local index
};

}  // namespace detail

using detail::ChunkSampler;
using detail::kDegreeAhead;
using detail::LocalIndex;
using detail::LocalNames;
using detail::names_of;
using detail::RemoteLists;
using detail::SourceIndex;

NeighborSampler::NeighborSampler(const Communicator& comm, const PartitionedGraph& graph,
                                 std::vector<int> fanouts, uint64_t seed, SimulatedNetwork network)
    : comm_(comm),
      graph_(graph),
      fanouts_(std::move(fanouts)),
      seed_(seed),
      network_(network),
      local_(std::make_shared<const LocalIndex>(graph, comm.rank())) {}

NeighborSampler::NeighborSampler(const Communicator& comm, const NeighborSampler& same)
    : comm_(comm),
      graph_(same.graph_),
      fanouts_(same.fanouts_),
      seed_(same.seed_),
      network_(same.network_),
      local_(same.local_) {}

NeighborSampler::~NeighborSampler() = default;

std::unique_ptr<SourceIndex> NeighborSampler::take_index() const {
  const std::lock_guard<std::mutex> lock(index_mutex_);
  if (spare_index_) return std::move(spare_index_);
  return std::make_unique<SourceIndex>(size_t(graph_.count) + graph_.halo.size(), names_of(graph_));
}

void NeighborSampler::give_back(std::unique_ptr<SourceIndex> index) const {
  const std::lock_guard<std::mutex> lock(index_mutex_);
  spare_index_ = std::move(index);
}

int64_t NeighborSampler::local_of(int64_t node) const {
  if (graph_.owns(node)) return node - graph_.first;
  const int64_t k = local_->halo_index.find(node);
  return k >= 0 ? graph_.count + k : -1;
}

int64_t NeighborSampler::local_degree(int64_t local) const {
  if (local < graph_.count) return graph_.row_ptr[size_t(local + 1)] - graph_.row_ptr[size_t(local)];
  return graph_.halo_degree[size_t(local - graph_.count)];
}

void NeighborSampler::prefetch_offsets(int64_t node) const {
  if (graph_.owns(node)) __builtin_prefetch(graph_.row_ptr.data() + (node - graph_.first));
}

void NeighborSampler::prefetch_degree(int64_t local) const {
  if (local < graph_.count)
    __builtin_prefetch(graph_.row_ptr.data() + local);
  else
    __builtin_prefetch(graph_.halo_degree.data() + (local - graph_.count));
}

// Sends the frontier's nodes owned elsewhere to their owners, who sample them and answer with their lists
// in request order (a neighbour of a remote node may be two hops from every node of this rank: its degree,
// for the GCN weights, comes with it). Collective: every rank enters it once per layer.
RemoteLists NeighborSampler::remote_lists(int layer, const NeighborKey& key,
                                          const std::vector<int64_t>& frontier) const {
  const int ranks = comm_.size();
  std::vector<std::vector<int64_t>> ask(static_cast<size_t>(ranks));
  RemoteLists remote;
  remote.at.assign(frontier.size(), -1);
  std::vector<int> owner_of(frontier.size(), -1);
  for (size_t i = 0; i < frontier.size(); ++i)
    if (!graph_.owns(frontier[i])) {
      owner_of[i] = graph_.owner(frontier[i]);
      ask[size_t(owner_of[i])].push_back(frontier[i]);
    }
  std::vector<int64_t> asked_counts;
  const std::vector<int64_t> asked =
      exchange_buckets_on(comm_, ask, "sample requests", network_, &asked_counts);
  std::vector<std::vector<int64_t>> answer(static_cast<size_t>(ranks));
  ChunkSampler draws(graph_, local_->local_col.data(), fanouts_[size_t(layer)], neighbor_rng(key, layer));
  const LocalNames names = names_of(graph_);
  size_t k = 0;
  for (int r = 0; r < ranks; ++r)
    for (const size_t end = k + size_t(asked_counts[size_t(r)]); k < end;) {
      const size_t n = std::min(ChunkSampler::kChunk, end - k);
      for (size_t q = k; q < k + n; ++q)
        require(graph_.owns(asked[q]), "neighbour sampling: rank ", comm_.rank(), " asked for node ",
                asked[q], " it does not own");
      draws.sample(asked.data() + k, n);
      std::vector<int64_t>& answers = answer[size_t(r)];
      size_t at = answers.size();  // the chunk's answers: a count, 2 per neighbour and a degree per node
      answers.resize(at + 2 * n + 2 * size_t(draws.end(n - 1) - draws.begin(0)));
      for (size_t q = 0; q < n; ++q) {
        const int64_t count = draws.end(q) - draws.begin(q);
        int64_t* out = answers.data() + at;
        out[0] = count;
        for (int64_t e = 0; e < count; ++e) out[1 + e] = names.id_of(draws.begin(q)[e]);
        for (int64_t e = 0; e < count; ++e) out[1 + count + e] = local_degree(draws.begin(q)[e]);
        out[1 + 2 * count] = local_degree(asked[k + q] - graph_.first);  // its own: a seed's weights need it
        at += size_t(2 + 2 * count);
      }
      k += n;
    }
  remote.lists = exchange_buckets_on(comm_, answer, "sample answers", network_);
  // Each rank's answers arrive in the order this rank asked: the offset of the n-th node asked of rank r.
  std::vector<std::vector<int64_t>> offset(static_cast<size_t>(ranks));
  size_t at = 0;
  for (int r = 0; r < ranks; ++r)
    for (size_t n = 0; n < ask[size_t(r)].size(); ++n) {
      offset[size_t(r)].push_back(int64_t(at));
      at += size_t(2 + 2 * remote.lists[at]);
    }
  std::vector<size_t> next(static_cast<size_t>(ranks), 0);
  for (size_t i = 0; i < frontier.size(); ++i)
    if (owner_of[i] >= 0) remote.at[i] = offset[size_t(owner_of[i])][next[size_t(owner_of[i])]++];
  name_locally(remote);
  return remote;
}

// The local index of every neighbour in the remote lists, in one pass with the halo map's lines of the
// lists two ahead asked for first (looked up one at a time as the block is built, each was a miss).
void NeighborSampler::name_locally(RemoteLists& remote) const {
  constexpr int kListsAhead = 2;
  const std::vector<int64_t>& lists = remote.lists;
  const auto next = [&](size_t at) { return at + size_t(2 + 2 * lists[at]); };
  const auto prefetch_list = [&](size_t at) {
    for (int64_t q = 1; q <= lists[at]; ++q)
      if (!graph_.owns(lists[at + size_t(q)])) local_->halo_index.prefetch(lists[at + size_t(q)]);
  };
  remote.local.assign(lists.size(), -1);
  size_t ahead = 0;
  for (int n = 0; n < kListsAhead && ahead < lists.size(); ++n, ahead = next(ahead)) prefetch_list(ahead);
  for (size_t at = 0; at < lists.size(); at = next(at)) {
    if (ahead < lists.size()) prefetch_list(ahead), ahead = next(ahead);
    for (int64_t q = 1; q <= lists[at]; ++q) remote.local[at + size_t(q)] = local_of(lists[at + size_t(q)]);
  }
}

// How many neighbours a layer keeps of its frontier's nodes (in-degrees `degree`): room for the block's
// columns made once, not grown a chunk at a time (each growth a copy of all before it).
size_t NeighborSampler::kept_edges(int layer, const std::vector<int64_t>& degree,
                                   const RemoteLists& remote) const {
  const int64_t fanout = fanouts_[size_t(layer)];
  size_t edges = 0;
  for (size_t i = 0; i < degree.size(); ++i)
    edges +=
        size_t(remote.at[i] >= 0 ? remote.lists[size_t(remote.at[i])] : kept_neighbors(degree[i], fanout));
  return edges;
}

// One layer's block: the frontier's nodes first, then each new neighbour by first use, as build_blocks
// numbers them; each source's in-degree recorded as it enters.
void NeighborSampler::build_block(int layer, const NeighborKey& key, const std::vector<int64_t>& ids,
                                  const std::vector<int64_t>& local, const std::vector<int64_t>& degree,
                                  const RemoteLists& remote, SourceIndex& index, SampledBlock& b) const {
  constexpr size_t kChunk = ChunkSampler::kChunk;
  // A new source's degree: sent with a remote list, or looked up below, all at once (kUnknown until then).
  constexpr int64_t kUnknown = -1;
  const size_t n = ids.size();
  b.num_dst = int64_t(n);
  index.start(ids, local, degree);
  b.row_ptr.assign(n + 1, 0);
  b.col.clear();
  b.col.reserve(kept_edges(layer, degree, remote));
  ChunkSampler draws(graph_, local_->local_col.data(), fanouts_[size_t(layer)], neighbor_rng(key, layer));
  std::array<int64_t, kChunk> owned;
  for (size_t c = 0; c < n; c += kChunk) {
    // Two chunks ahead: the offsets; one ahead (their offsets likely cached by now): the lists.
    const size_t end = std::min(n, c + kChunk);
    for (size_t i = end + kChunk; i < std::min(n, end + 2 * kChunk); ++i) prefetch_offsets(ids[i]);
    for (size_t i = end; i < std::min(n, end + kChunk); ++i)
      if (graph_.owns(ids[i])) draws.prefetch_list(ids[i]);
    size_t m = 0, edges = 0;
    for (size_t i = c; i < end; ++i)
      if (remote.at[i] < 0)
        owned[m++] = ids[i];
      else
        edges += size_t(remote.lists[size_t(remote.at[i])]);
    draws.sample(owned.data(), m);
    if (m > 0) {
      for (const int32_t* u = draws.begin(0); u != draws.end(m - 1); ++u) index.prefetch_local(*u);
      edges += size_t(draws.end(m - 1) - draws.begin(0));
    }
    index.reserve(edges);
    size_t e = b.col.size();
    b.col.resize(e + edges);
    for (size_t i = c, k = 0; i < end; ++i) {
      if (remote.at[i] < 0) {
        for (const int32_t* u = draws.begin(k); u != draws.end(k); ++u)
          b.col[e++] = index.add_local(*u, kUnknown);
        ++k;
      } else {
        const int64_t* list = remote.lists.data() + remote.at[i];
        const int64_t* local = remote.local.data() + remote.at[i];
        for (int64_t q = 0; q < list[0]; ++q)
          b.col[e++] = index.add(list[1 + q], local[1 + q], list[1 + list[0] + q]);
      }
      b.row_ptr[i + 1] = int64_t(e);
    }
  }
  const int64_t* source_local = index.locals();
  int64_t* source_degree = index.degrees();
  for (size_t k = n; k < index.size(); ++k) {
    if (k + kDegreeAhead < index.size() && source_degree[k + kDegreeAhead] == kUnknown)
      prefetch_degree(source_local[k + kDegreeAhead]);
    if (source_degree[k] == kUnknown) source_degree[k] = local_degree(source_local[k]);
  }
}

std::vector<SampledBlock> NeighborSampler::sample(const std::vector<int64_t>& seeds, int64_t epoch,
                                                  int64_t step) const {
  const NeighborKey key{seed_, epoch, step};
  std::vector<SampledBlock> blocks(fanouts_.size());
  std::unique_ptr<SourceIndex> index = take_index();
  // A layer's destination nodes are the seeds, then the block before's sources (its ids and degrees).
  // A seed may be any node (a link's endpoints): one neither owned nor in the halo has its degree sent
  // with its list by its owner.
  const std::vector<int64_t>* ids = &seeds;
  std::vector<int64_t> local, seed_degree;
  for (const int64_t v : seeds) {
    local.push_back(local_of(v));
    seed_degree.push_back(local.back() >= 0 ? local_degree(local.back()) : -1);
  }
  const std::vector<int64_t>* degree = &seed_degree;
  for (int l = int(fanouts_.size()) - 1; l >= 0; --l) {
    SampledBlock& b = blocks[size_t(l)];
    const RemoteLists remote = remote_lists(l, key, *ids);
    if (ids == &seeds)
      for (size_t i = 0; i < seeds.size(); ++i)
        if (seed_degree[i] < 0) {
          const int64_t* list = remote.lists.data() + remote.at[i];
          seed_degree[i] = list[1 + 2 * list[0]];
        }
    build_block(l, key, *ids, local, *degree, remote, *index, b);
    index->finish(b.src, local, b.src_degree);
    ids = &b.src;
    degree = &b.src_degree;
  }
  give_back(std::move(index));
  return blocks;
}

}  // namespace tessera
