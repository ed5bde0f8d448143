// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/sampling/neighbor_device.hpp"

#include <limits>

#include "tessera/core/csr.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

namespace {

using Policy = Kokkos::RangePolicy<ExecSpace>;
constexpr int64_t kUnplaced = std::numeric_limits<int64_t>::max();

struct LocalGraph {
  Vector<const int64_t> row_ptr, col;
  int64_t first = 0;
};

// row_ptr(i) = neighbours kept of frontier nodes before i, for i in [0, n]; returns the block's edges.
int64_t count_kept(const LocalGraph& g, const Vector<const int64_t>& frontier, int fanout,
                   const Vector<int64_t>& row_ptr) {
  return prefix_offsets(
      int64_t(frontier.extent(0)),
      KOKKOS_LAMBDA(int64_t i) {
        const int64_t v = frontier(i) - g.first;
        const int64_t degree = g.row_ptr(v + 1) - g.row_ptr(v);
        return kept_neighbors(degree, fanout);
      },
      row_ptr, "tessera::sample_counts");
}

// nbr(row_ptr(i) ...) = frontier node i's kept in-neighbours (global ids) in list order: Floyd's positions
// are drawn into the row's own slots, then replaced by the neighbours there.
void draw_neighbours(const LocalGraph& g, const Vector<const int64_t>& frontier, const NeighborKey& key,
                     int layer, const Vector<const int64_t>& row_ptr, const Vector<int64_t>& nbr) {
  const CounterRng rng = neighbor_rng(key, layer);
  Kokkos::parallel_for(
      "tessera::sample_draw", Policy(0, int64_t(frontier.extent(0))), KOKKOS_LAMBDA(int64_t i) {
        const int64_t node = frontier(i), v = node - g.first;
        const int64_t begin = g.row_ptr(v), degree = g.row_ptr(v + 1) - begin;
        const int64_t at = row_ptr(i), kept = row_ptr(i + 1) - at;
        if (kept == 0) return;
        int64_t* out = &nbr(at);
        if (kept == degree) {
          for (int64_t q = 0; q < kept; ++q) out[q] = g.col(begin + q);
          return;
        }
        draw_positions(rng, node, degree, kept, out);
        for (int64_t q = 0; q < kept; ++q) out[q] = g.col(begin + out[q]);
      });
}

// The block's sources and columns from its frontier and sampled neighbours (global ids): the frontier
// first, then each node no earlier edge named, in edge order, as the host's FlatIdMap numbers them.
// `position` is all unplaced on entry and on return.
void place_sources(const Vector<const int64_t>& frontier, const Vector<const int64_t>& nbr, int64_t first,
                   const Vector<int64_t>& position, Vector<int64_t>& first_use, DeviceSampledBlock& b) {
  const int64_t n = int64_t(frontier.extent(0)), nnz = int64_t(nbr.extent(0));
  Kokkos::parallel_for(
      "tessera::sample_place_dst", Policy(0, n),
      KOKKOS_LAMBDA(int64_t i) { position(frontier(i) - first) = i - n; });
  Kokkos::parallel_for(
      "tessera::sample_first_edge", Policy(0, nnz),
      KOKKOS_LAMBDA(int64_t e) { Kokkos::atomic_fetch_min(&position(nbr(e) - first), e); });
  reserve_vector(first_use, nnz + 1, "sample.first_use");
  const Vector<int64_t> before = first_use;
  const int64_t fresh = prefix_offsets(
      nnz, KOKKOS_LAMBDA(int64_t e) { return position(nbr(e) - first) == e ? int64_t(1) : int64_t(0); },
      before, "tessera::sample_number_new");
  b.src = Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("sample.src"), size_t(n + fresh));
  b.col = Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("sample.col"), size_t(nnz));
  const Vector<int64_t> src = b.src, col = b.col;
  Kokkos::parallel_for(
      "tessera::sample_dst", Policy(0, n), KOKKOS_LAMBDA(int64_t i) { src(i) = frontier(i); });
  Kokkos::parallel_for(
      "tessera::sample_columns", Policy(0, nnz), KOKKOS_LAMBDA(int64_t e) {
        const int64_t p = position(nbr(e) - first);
        if (p == e) src(n + before(e)) = nbr(e);
        col(e) = p < 0 ? p + n : n + before(p);
      });
  Kokkos::parallel_for(
      "tessera::sample_unplace", Policy(0, n + fresh),
      KOKKOS_LAMBDA(int64_t j) { position(src(j) - first) = kUnplaced; });
}

Vector<int64_t> source_degrees(const LocalGraph& g, const Vector<const int64_t>& src) {
  Vector<int64_t> degree(Kokkos::ViewAllocateWithoutInitializing("sample.src_degree"), src.extent(0));
  Kokkos::parallel_for(
      "tessera::sample_degrees", Policy(0, int64_t(src.extent(0))), KOKKOS_LAMBDA(int64_t j) {
        const int64_t v = src(j) - g.first;
        degree(j) = g.row_ptr(v + 1) - g.row_ptr(v);
      });
  return degree;
}

}  // namespace

DeviceNeighborSampler::DeviceNeighborSampler(const PartitionedGraph& graph, std::vector<int> fanouts,
                                             uint64_t seed)
    : first_(graph.first), fanouts_(std::move(fanouts)), seed_(seed) {
  require(graph.count == graph.num_nodes,
          "neighbour sampling on the device needs the whole graph on one rank; this rank owns ", graph.count,
          " of ", graph.num_nodes, " nodes");
  row_ptr_ = kernel_view(graph.row_ptr, "sample.graph_row_ptr");
  col_ = kernel_view(graph.col, "sample.graph_col");
  position_ =
      Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("sample.position"), size_t(graph.count));
  Kokkos::deep_copy(position_, kUnplaced);
}

std::vector<DeviceSampledBlock> DeviceNeighborSampler::sample(const Vector<const int64_t>& seeds,
                                                              int64_t epoch, int64_t step) {
  const NeighborKey key{seed_, epoch, step};
  const LocalGraph g{row_ptr_, col_, first_};
  const int layers = int(fanouts_.size());
  std::vector<DeviceSampledBlock> blocks(static_cast<size_t>(layers));
  Vector<const int64_t> frontier = seeds;
  for (int l = layers - 1; l >= 0; --l) {
    DeviceSampledBlock& b = blocks[size_t(l)];
    const int fanout = fanouts_[size_t(l)];
    b.num_dst = int64_t(frontier.extent(0));
    b.row_ptr =
        Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("sample.row_ptr"), size_t(b.num_dst + 1));
    const int64_t nnz = count_kept(g, frontier, fanout, b.row_ptr);
    const Vector<int64_t> nbr(Kokkos::ViewAllocateWithoutInitializing("sample.nbr"), size_t(nnz));
    draw_neighbours(g, frontier, key, l, b.row_ptr, nbr);
    place_sources(frontier, nbr, first_, position_, first_use_, b);
    b.src_degree = source_degrees(g, b.src);
    frontier = b.src;
  }
  return blocks;
}

}  // namespace tessera
