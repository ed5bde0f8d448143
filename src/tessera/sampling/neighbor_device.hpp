// SPDX-License-Identifier: BSD-3-Clause
// Neighbour sampling with kernels on the execution space: the blocks NeighborSampler builds, bit for bit,
// for a rank that owns every node (one rank), with nothing copied to or from the host but each layer's
// sizes. Each frontier node draws its neighbours in one thread (the same Floyd draws as the host, written
// into the block's own column array); a node's place among the block's sources is the first entry that
// names it, found with an atomic minimum over a per-node position array, and a scan over those first uses
// numbers the new sources in the host's order.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/views.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/sampling/neighbor.hpp"

namespace tessera {

/// SampledBlock in the execution space's memory.
struct DeviceSampledBlock {
  int64_t num_dst = 0;         ///< destination nodes (rows)
  Vector<int64_t> src;         ///< global ids: dst nodes first, then new nodes by first use
  Vector<int64_t> row_ptr;     ///< num_dst + 1 offsets into col
  Vector<int64_t> col;         ///< index into src of each sampled in-neighbour
  Vector<int64_t> src_degree;  ///< in-degree of each src node

  /// Source nodes (columns).
  int64_t num_src() const { return int64_t(src.extent(0)); }
  /// Sampled edges.
  int64_t nnz() const { return int64_t(col.extent(0)); }
};

/// The neighbour sampler of a rank that owns the whole graph, in kernels.
class DeviceNeighborSampler {
 public:
  /// Keeps the graph's neighbour lists in the execution space's memory (a view of the graph's own arrays on
  /// host builds) and one position per node. Throws Error unless this rank owns every node of `graph`,
  /// which must outlive the sampler.
  DeviceNeighborSampler(const PartitionedGraph& graph, std::vector<int> fanouts, uint64_t seed);

  /// NeighborSampler::sample's blocks for these seeds (global ids), in kernels: blocks[l] feeds layer l.
  std::vector<DeviceSampledBlock> sample(const Vector<const int64_t>& seeds, int64_t epoch, int64_t step);
  /// Per layer (input layer first): neighbours kept per node, -1 for all.
  const std::vector<int>& fanouts() const { return fanouts_; }

 private:
  Vector<const int64_t> row_ptr_, col_;
  Vector<int64_t> position_;   // per node: its place in the block being built, or unplaced
  Vector<int64_t> first_use_;  // per sampled edge: new sources named by an earlier edge (grown as needed)
  int64_t first_ = 0;
  std::vector<int> fanouts_;
  uint64_t seed_ = 0;
};

}  // namespace tessera
