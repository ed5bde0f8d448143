// SPDX-License-Identifier: BSD-3-Clause
// Feature rows of a step's input nodes on a partitioned graph: owned rows are copied, cached halo rows are
// read from the FeatureCache, and everything else — the misses, plus on an eviction step the cache's
// refill — travels in one all-to-all request / reply pair to the owners (docs/architecture.md §6).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/comm/simulated_network.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/prefetch/feature_cache.hpp"

namespace tessera {

/// What one fetch did.
struct FetchStats {
  int64_t remote_rows = 0;    ///< non-owned input rows the step needs
  int64_t hits = 0;           ///< of them, served by the cache
  int64_t fetched_rows = 0;   ///< rows received: misses and refills
  int64_t fetched_bytes = 0;  ///< feature bytes received
  int64_t evictions = 0;      ///< cache slots refilled this step
  double seconds = 0;         ///< the exchange's wall time (with any simulated network delay)
};

/// Rows of a table over a partitioned graph's owned nodes: `width` values per owned node, row-major
/// (owned node first + i at row i), fp32 or bf16. The graph's features are one; a layer's output is another.
struct OwnedRows {
  const float* data = nullptr;     ///< graph.count x width, fp32 (or null)
  int64_t width = 0;               ///< values per row
  const uint16_t* bf16 = nullptr;  ///< graph.count x width, bf16, where `data` is null
  /// Which of the two holds the rows (and how they travel): set, not inferred, as a rank that owns no node
  /// has neither pointer and must still exchange what its peers do.
  StorageDtype dtype = StorageDtype::F32;
};
/// A partitioned graph's owned feature rows, in the dtype it holds them.
OwnedRows feature_rows(const PartitionedGraph& graph);

/// Feature rows of any nodes of a partitioned graph, through the cache.
class RemoteFeatures {
 public:
  /// Exchanges over `comm` (one rank per part) the rows of the graph's features. Rows travel and are cached
  /// in the dtype the table holds them (bf16: half the bytes and twice the rows per cache byte); gather()
  /// widens them to fp32.
  RemoteFeatures(const Communicator& comm, const PartitionedGraph& graph, SimulatedNetwork network = {});
  /// ... or of another table over the owned nodes (each rank its own, of one width); must outlive it.
  RemoteFeatures(const Communicator& comm, const PartitionedGraph& graph, OwnedRows table,
                 SimulatedNetwork network = {});

  /// Collective: the cache's initial fill, in rounds in which all ranks together ask for at most
  /// `round_bytes` of rows (every rank enters the same rounds, whatever its cache holds).
  void fill(FeatureCache& cache, FetchStats& stats, int64_t round_bytes = kFillRoundBytes) const;
  /// The default bound on a fill round: the degree-ordered fill asks every rank's hubs, which on a skewed
  /// graph a few ranks own, and one bulk round made each of them hold every rank's share of its rows twice
  /// (its replies and their packed copy: 250 MB more than the rest of the load on rank 0 of 8 for a 2^21-node
  /// R-MAT graph).
  static constexpr int64_t kFillRoundBytes = int64_t(32) << 20;

  /// Collective: rows of `nodes` (nodes.size() x width, in order). Without a cache every remote row
  /// is fetched; with one, hits are read from it and, when `evict`, its eviction plan's rows ride in the
  /// same request and are installed. Ends the cache's step.
  std::vector<float> gather(const std::vector<int64_t>& nodes, FeatureCache* cache, bool evict,
                            FetchStats& stats) const;
  /// The same into `rows` (resized; its capacity is kept, so a caller gathering every step can hand the
  /// same buffers back).
  void gather(const std::vector<int64_t>& nodes, FeatureCache* cache, bool evict, FetchStats& stats,
              std::vector<float>& rows) const;

 private:
  /// Rows of `want` (remote nodes, any order, each once) from their owners: put(i, row) for each i, with
  /// `row` the table's Value (float or bf16 bits).
  template <class Value, class Put>
  void fetch(const std::vector<int64_t>& want, FetchStats& stats, Put&& put) const;
  template <class Value>
  void fill_rows(FeatureCache& cache, FetchStats& stats, int64_t round_bytes) const;
  template <class Value>
  void gather_rows(const std::vector<int64_t>& nodes, FeatureCache* cache, bool evict, FetchStats& stats,
                   std::vector<float>& rows) const;
  template <class Value>
  const Value* owned_row(int64_t node) const;
  const Communicator& comm_;
  const PartitionedGraph& graph_;
  OwnedRows table_;
  SimulatedNetwork network_;
  // The fetch's reply and receive buffers, kept between calls (a RemoteFeatures serves one thread).
  mutable std::vector<float> reply_, received_;
  mutable std::vector<uint16_t> reply_bf16_, received_bf16_;
  template <class Value>
  std::vector<Value>& reply_buffer() const;
  template <class Value>
  std::vector<Value>& received_buffer() const;
};

}  // namespace tessera
