// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/prefetch/remote_features.hpp"

#include <algorithm>
#include <type_traits>
#include <unordered_map>

#include "tessera/core/error.hpp"
#include "tessera/core/prefetch_hint.hpp"
#include "tessera/core/timer.hpp"

namespace tessera {

OwnedRows feature_rows(const PartitionedGraph& graph) {
  if (graph.feature_dtype == StorageDtype::Bf16)
    return OwnedRows{nullptr, graph.num_features, graph.features_bf16.data(), StorageDtype::Bf16};
  return OwnedRows{graph.features.data(), graph.num_features};
}

RemoteFeatures::RemoteFeatures(const Communicator& comm, const PartitionedGraph& graph,
                               SimulatedNetwork network)
    : RemoteFeatures(comm, graph, feature_rows(graph), network) {}

RemoteFeatures::RemoteFeatures(const Communicator& comm, const PartitionedGraph& graph, OwnedRows table,
                               SimulatedNetwork network)
    : comm_(comm), graph_(graph), table_(table), network_(network) {}

template <class Value>
std::vector<Value>& RemoteFeatures::reply_buffer() const {
  if constexpr (std::is_same_v<Value, float>)
    return reply_;
  else
    return reply_bf16_;
}
template <class Value>
std::vector<Value>& RemoteFeatures::received_buffer() const {
  if constexpr (std::is_same_v<Value, float>)
    return received_;
  else
    return received_bf16_;
}
template <class Value>
const Value* RemoteFeatures::owned_row(int64_t node) const {
  const size_t at = size_t(node - graph_.first) * size_t(table_.width);
  if constexpr (std::is_same_v<Value, float>)
    return table_.data + at;
  else
    return table_.bf16 + at;
}

namespace {

// Rows are read in a sample's order, each at a random place in the table or the cache: the loops below
// ask for the row this many entries ahead before copying one, so the misses overlap the copies.
constexpr size_t kRowsAhead = 8;

// A stored row as the fp32 values a step reads.
void widen_row(const float* row, size_t width, float* out) {
  std::copy(row, row + width, out);
}
void widen_row(const uint16_t* row, size_t width, float* out) {
  widen_bf16(row, out, width);
}

// The cache's row of a slot, in the dtype `Value` (the table's).
template <class Value>
const Value* cached_row(const FeatureCache& cache, int64_t slot) {
  if constexpr (std::is_same_v<Value, float>)
    return cache.row(slot);
  else
    return cache.row_bf16(slot);
}

}  // namespace

template <class Value, class Put>
void RemoteFeatures::fetch(const std::vector<int64_t>& want, FetchStats& stats, Put&& put) const {
  Stopwatch watch;
  const int ranks = comm_.size();
  const size_t f = size_t(table_.width);
  std::vector<std::vector<int64_t>> ask(static_cast<size_t>(ranks));
  std::vector<std::vector<size_t>> asked_for(static_cast<size_t>(ranks));  // the index in `want` of each ask
  for (size_t i = 0; i < want.size(); ++i) {
    const int owner = graph_.owner(want[i]);
    ask[size_t(owner)].push_back(want[i]);
    asked_for[size_t(owner)].push_back(i);
  }
  std::vector<int64_t> asked_counts;
  const std::vector<int64_t> asked =
      exchange_buckets_on(comm_, ask, "feature requests", network_, &asked_counts);
  // The replies in the order asked (grouped by the asking rank), in one buffer: an owner of hubs answers
  // most of every rank's misses, and per-rank buckets and their packed copy held its replies twice.
  std::vector<Value>& reply = reply_buffer<Value>();
  reply.resize(asked.size() * f);
  for (size_t k = 0; k < asked.size(); ++k) {
    require(graph_.owns(asked[k]), "feature fetch: rank ", comm_.rank(), " asked for node ", asked[k],
            " it does not own");
    if (k + kRowsAhead < asked.size() && graph_.owns(asked[k + kRowsAhead]))
      prefetch_bytes(owned_row<Value>(asked[k + kRowsAhead]), int64_t(f * sizeof(Value)));
    const Value* row = owned_row<Value>(asked[k]);
    std::copy(row, row + f, reply.begin() + std::ptrdiff_t(k * f));
  }
  std::vector<int64_t> reply_counts(asked_counts);
  for (int64_t& c : reply_counts) c *= int64_t(f);
  std::vector<Value>& got = received_buffer<Value>();
  exchange_grouped_into_on(comm_, reply, reply_counts, "feature replies", got, network_);
  // Replies arrive grouped by owner, in request order: each goes straight where the caller wants it (a
  // reordered copy of them all was one more buffer the size of the misses).
  size_t k = 0;
  for (int r = 0; r < ranks; ++r)
    for (size_t i : asked_for[size_t(r)]) put(i, got.data() + (k++) * f);
  stats.fetched_rows += int64_t(want.size());
  stats.fetched_bytes += int64_t(got.size() * sizeof(Value));
  stats.seconds += watch.seconds();
}

void RemoteFeatures::fill(FeatureCache& cache, FetchStats& stats, int64_t round_bytes) const {
  require(cache.dtype() == table_.dtype && cache.feature_dim() == table_.width, "feature cache: rows of ",
          cache.feature_dim(), " ", storage_dtype_name(cache.dtype()), " values for a table of ",
          table_.width, " ", storage_dtype_name(table_.dtype), " values");
  if (table_.dtype == StorageDtype::Bf16)
    fill_rows<uint16_t>(cache, stats, round_bytes);
  else
    fill_rows<float>(cache, stats, round_bytes);
}

template <class Value>
void RemoteFeatures::fill_rows(FeatureCache& cache, FetchStats& stats, int64_t round_bytes) const {
  const std::vector<int64_t>& nodes = cache.slot_nodes();
  const int64_t row_bytes = std::max<int64_t>(1, int64_t(sizeof(Value)) * table_.width);
  const int64_t per_rank = std::max<int64_t>(1, round_bytes / (row_bytes * comm_.size()));
  const int64_t mine = (int64_t(nodes.size()) + per_rank - 1) / per_rank;
  const int64_t rounds = all_reduce_value(comm_, mine, ReduceOp::Max, "cache fill");
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t lo = std::min(int64_t(nodes.size()), round * per_rank);
    const int64_t hi = std::min(int64_t(nodes.size()), lo + per_rank);
    const std::vector<int64_t> piece(nodes.begin() + lo, nodes.begin() + hi);
    std::vector<Value> rows(piece.size() * size_t(table_.width));
    fetch<Value>(piece, stats, [&](size_t i, const Value* row) {
      std::copy(row, row + table_.width, rows.begin() + std::ptrdiff_t(i * size_t(table_.width)));
    });
    cache.install_initial(rows, lo);
  }
}

std::vector<float> RemoteFeatures::gather(const std::vector<int64_t>& nodes, FeatureCache* cache, bool evict,
                                          FetchStats& stats) const {
  std::vector<float> rows;
  gather(nodes, cache, evict, stats, rows);
  return rows;
}

void RemoteFeatures::gather(const std::vector<int64_t>& nodes, FeatureCache* cache, bool evict,
                            FetchStats& stats, std::vector<float>& rows) const {
  require(!cache || (cache->dtype() == table_.dtype && cache->feature_dim() == table_.width),
          "feature cache: rows of another dtype or width than the table's");
  if (table_.dtype == StorageDtype::Bf16)
    gather_rows<uint16_t>(nodes, cache, evict, stats, rows);
  else
    gather_rows<float>(nodes, cache, evict, stats, rows);
}

template <class Value>
void RemoteFeatures::gather_rows(const std::vector<int64_t>& nodes, FeatureCache* cache, bool evict,
                                 FetchStats& stats, std::vector<float>& rows) const {
  const size_t f = size_t(table_.width);
  rows.resize(nodes.size() * f);
  std::vector<int64_t> remote;
  std::vector<size_t> remote_at;
  const auto row_bytes = int64_t(f * sizeof(Value));
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i + kRowsAhead < nodes.size() && graph_.owns(nodes[i + kRowsAhead]))
      prefetch_bytes(owned_row<Value>(nodes[i + kRowsAhead]), row_bytes);
    if (graph_.owns(nodes[i])) {
      widen_row(owned_row<Value>(nodes[i]), f, rows.data() + i * f);
    } else {
      remote.push_back(nodes[i]);
      remote_at.push_back(i);
    }
  }
  stats.remote_rows += int64_t(remote.size());
  std::vector<int64_t> missed;
  std::vector<size_t> missed_at;
  FeatureCache::Replacement plan;
  if (cache) {
    const std::vector<int64_t> slots = cache->lookup(remote);
    for (size_t k = 0; k < remote.size(); ++k) {
      if (k + kRowsAhead < remote.size() && slots[k + kRowsAhead] >= 0)
        prefetch_bytes(cached_row<Value>(*cache, slots[k + kRowsAhead]), row_bytes);
      if (slots[k] >= 0) {
        widen_row(cached_row<Value>(*cache, slots[k]), f, rows.data() + remote_at[k] * f);
        ++stats.hits;
      } else {
        missed.push_back(remote[k]);
        missed_at.push_back(remote_at[k]);
      }
    }
    if (evict) plan = cache->plan_eviction();
  } else {
    missed = remote;
    missed_at = remote_at;
  }
  const std::vector<int64_t> want = cache ? FeatureCache::request(missed, plan) : missed;
  // Where each fetched row goes: a miss into `rows` (request() lists the misses first, in order), a node of
  // the eviction plan into the refill (a node can be both).
  std::vector<int64_t> refill_at(want.size(), -1);
  if (!plan.nodes.empty()) {
    std::unordered_map<int64_t, size_t> position;
    for (size_t k = 0; k < want.size(); ++k) position.emplace(want[k], k);
    for (size_t k = 0; k < plan.nodes.size(); ++k) refill_at[position.at(plan.nodes[k])] = int64_t(k);
  }
  std::vector<Value> refill(plan.nodes.size() * f);
  fetch<Value>(want, stats, [&](size_t i, const Value* row) {
    if (i < missed.size()) widen_row(row, f, rows.data() + missed_at[i] * f);
    if (refill_at[i] >= 0) std::copy(row, row + f, refill.begin() + std::ptrdiff_t(size_t(refill_at[i]) * f));
  });
  if (cache) {
    if (!plan.nodes.empty()) {
      cache->install(plan, refill);
      stats.evictions += int64_t(plan.nodes.size());
    }
    cache->end_step();
  }
}

}  // namespace tessera
