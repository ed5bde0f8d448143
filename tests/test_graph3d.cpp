// SPDX-License-Identifier: BSD-3-Clause
// The loader of the 3D grid (build_graph_3d) against a dense double reference: on every factorization of
// 1, 2, 4 and 8 ranks, each rank's block of every layout holds exactly the normalized adjacency's entries
// for its rows and columns (through both permutations), padding stays empty, and the transpose is the
// block's transpose (and a forward-only load holds the same blocks). Tiny graphs make blocks of one row and
// copies that build no rows at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/parallel3d/graph3d.hpp"

using namespace tessera;

namespace {

// Node v's in-neighbours: two pseudo-random ones, itself when v % 3 == 0, and a repeated edge when
// v % 4 == 1 (duplicates add; with `symmetric`, a self loop is listed twice and still counts once). `symmetric`: the graph plus its reverse (A + A^T).
std::vector<int64_t> in_neighbours(int64_t v, int64_t n, bool symmetric = false) {
  std::vector<int64_t> u;
  for (const int64_t w : {(3 * v + 1) % n, (5 * v + 2) % n})
    if (w != v) u.push_back(w);  // the self loop only where asked for, once
  if (v % 3 == 0) u.push_back(v);
  if (v % 4 == 1 && !u.empty() && u[0] != v) u.push_back(u[0]);
  if (symmetric)
    for (int64_t w = 0; w < n; ++w)
      for (const int64_t x : in_neighbours(w, n))
        if (x == v) u.push_back(w);
  return u;
}

// This rank's contiguous share of the tiny graph's rows.
GraphRows tiny_rows(int64_t n, const Communicator& world, bool symmetric = false) {
  GraphRows rows;
  rows.name = "tiny graph";
  rows.num_nodes = n;
  rows.num_features = 1;
  rows.num_classes = 2;
  rows.first_row = n * world.rank() / world.size();
  const int64_t end = n * (world.rank() + 1) / world.size();
  for (int64_t v = rows.first_row; v < end; ++v) {
    for (int64_t u : in_neighbours(v, n, symmetric)) rows.indices.push_back(u);
    rows.indptr.push_back(int64_t(rows.indices.size()));
    rows.features.push_back(float(v));
    rows.labels.push_back(v % 2);
    rows.splits.push_back(GraphRows::kTrain);
  }
  return rows;
}

// Dense normalized adjacency, row v = in-edges of v, in double, from the definitions in graph3d.hpp.
std::vector<std::vector<double>> dense_reference(int64_t n, Normalization normalization,
                                                 bool symmetric = false) {
  std::vector<std::vector<double>> a(size_t(n), std::vector<double>(size_t(n), 0.0));
  for (int64_t v = 0; v < n; ++v)
    for (int64_t u : in_neighbours(v, n, symmetric)) a[size_t(v)][size_t(u)] += 1;
  if (normalization == Normalization::Symmetric) {
    for (int64_t v = 0; v < n; ++v) a[size_t(v)][size_t(v)] = 1;  // one self loop, however often listed
    std::vector<double> degree(size_t(n), 0.0);
    for (int64_t v = 0; v < n; ++v)
      for (int64_t u = 0; u < n; ++u) degree[size_t(v)] += a[size_t(v)][size_t(u)];
    for (int64_t v = 0; v < n; ++v)
      for (int64_t u = 0; u < n; ++u)
        a[size_t(v)][size_t(u)] /= std::sqrt(degree[size_t(v)] * degree[size_t(u)]);
  } else {  // Mean: over the in-neighbours other than v
    for (int64_t v = 0; v < n; ++v) {
      a[size_t(v)][size_t(v)] = 0;
      double count = 0;
      for (int64_t u = 0; u < n; ++u) count += a[size_t(v)][size_t(u)];
      for (int64_t u = 0; u < n; ++u)
        if (count > 0) a[size_t(v)][size_t(u)] /= count;
    }
  }
  return a;
}

// A block as a dense float matrix (duplicates summed), checking the CSR's invariants on the way. Its
// weights are what the kernels multiply by (values, or the degree scales' products).
std::vector<std::vector<float>> dense_block(const CsrSpmm<float>& block) {
  const CsrMatrix<float, DeviceSpace, SpmmColumn>& device = block.matrix();
  const auto row_ptr = Kokkos::create_mirror_view_and_copy(HostSpace(), device.row_ptr);
  const auto col_idx = Kokkos::create_mirror_view_and_copy(HostSpace(), device.col_idx);
  const auto values = block.host_weights();
  std::vector<std::vector<float>> out(size_t(device.num_rows),
                                      std::vector<float>(size_t(device.num_cols), 0));
  EXPECT_EQ(row_ptr(0), 0);
  EXPECT_EQ(row_ptr(device.num_rows), device.nnz());
  for (int64_t i = 0; i < device.num_rows; ++i)
    for (int64_t k = row_ptr(i); k < row_ptr(i + 1); ++k) {
      EXPECT_TRUE(k == row_ptr(i) || col_idx(k - 1) <= col_idx(k)) << "row " << i << " is not sorted";
      out[size_t(i)][size_t(col_idx(k))] += values(k);
    }
  return out;
}

// A device matrix's entries in row-major order, on the host.
std::vector<float> host_values(const Matrix<float>& m) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), m);
  std::vector<float> out;
  for (size_t i = 0; i < host.extent(0); ++i)
    for (size_t j = 0; j < host.extent(1); ++j) out.push_back(host(i, j));
  return out;
}

void expect_blocks_match(const Graph3D& g, int64_t n, const std::vector<std::vector<double>>& reference) {
  const GridShape& shape = g.layout.shape();
  for (int t = 0; t < int(g.adjacency.size()); ++t) {
    SCOPED_TRACE("layout " + std::to_string(t));
    const AxisRoles roles = roles_for_layer(t);
    const int64_t row_block = g.layout.padded_nodes() / shape.extent(roles.c);
    const int64_t col_block = g.layout.padded_nodes() / shape.extent(roles.a);
    const int64_t first_row = g.coords.get(roles.c) * row_block,
                  first_col = g.coords.get(roles.a) * col_block;
    const auto forward = dense_block(g.adjacency[size_t(t)].forward);
    const auto transpose = dense_block(g.adjacency[size_t(t)].transpose);
    ASSERT_EQ(int64_t(forward.size()), row_block);
    ASSERT_EQ(int64_t(transpose.size()), col_block);
    for (int64_t i = 0; i < row_block; ++i)
      for (int64_t j = 0; j < col_block; ++j) {
        const int64_t row = first_row + i, col = first_col + j;
        const double want =
            row < n && col < n
                ? reference[size_t(g.layout.row_order(t)(row))][size_t(g.layout.col_order(t)(col))]
                : 0.0;  // padding
        EXPECT_NEAR(forward[size_t(i)][size_t(j)], want, 1e-6 * std::max(1.0, std::abs(want)))
            << "entry (" << i << ", " << j << ")";
        EXPECT_EQ(transpose[size_t(j)][size_t(i)], forward[size_t(i)][size_t(j)]);
      }
  }
}

// Every layout's block and transpose, and the features, bit for bit.
void expect_same_graph(const Graph3D& got, const Graph3D& want) {
  for (int t = 0; t < want.layers; ++t) {
    EXPECT_EQ(dense_block(got.adjacency[size_t(t)].forward), dense_block(want.adjacency[size_t(t)].forward));
    EXPECT_EQ(dense_block(got.adjacency[size_t(t)].transpose),
              dense_block(want.adjacency[size_t(t)].transpose));
  }
  EXPECT_EQ(host_values(got.features), host_values(want.features));
}

}  // namespace

TEST(Graph3D, EveryBlockHoldsTheNormalizedAdjacency) {
  const Communicator world = Communicator::world();
  for (const int64_t n : {int64_t(world.size()), int64_t(13), int64_t(40)})
    for (const Normalization normalization : {Normalization::Symmetric, Normalization::Mean})
      for (const PermuteMode permute : {PermuteMode::None, PermuteMode::Double}) {
        const auto reference = dense_reference(n, normalization);
        const GraphRows rows = tiny_rows(n, world);
        for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
          SCOPED_TRACE(std::to_string(n) + " nodes, " + normalization_name(normalization) + ", grid " +
                       shape.str() + ", permute " + permute_mode_name(permute));
          const ProcessGrid grid(world, shape);
          Graph3DOptions options;
          options.layers = 3;  // three layouts: every rotation of the roles and both permutation orders
          options.permute = permute;
          options.seed = 7;
          options.normalization = normalization;
          const Graph3D g = build_graph_3d(rows, grid, options);
          expect_blocks_match(g, n, reference);
          // From rows it may consume (load_graph_3d's): the same graph, and the rows keep labels and splits.
          GraphRows consumed = rows;
          const Graph3D from_consumed = build_graph_3d(std::move(consumed), grid, options);
          EXPECT_TRUE(consumed.indices.empty() && consumed.features.empty());
          EXPECT_EQ(consumed.rows(), rows.rows());
          expect_same_graph(from_consumed, g);
          // An exchange budget of one byte sends every row in a round of its own: as many rounds as the
          // rank with most rows has rows, and the same blocks and features bit for bit.
          Graph3DOptions one_row_rounds = options;
          one_row_rounds.exchange_budget = 1;
          const Graph3D in_rounds = build_graph_3d(rows, grid, one_row_rounds);
          int64_t most_rows = 0;
          for (int r = 0; r < world.size(); ++r)
            most_rows = std::max(most_rows, n * (r + 1) / world.size() - n * r / world.size());
          for (const LoadPhase& phase : in_rounds.load_phases) {
            if (phase.name.rfind("adjacency", 0) == 0 || phase.name == "features") {
              const bool shared = phase.name.find(" as ") != std::string::npos;  // built by no exchange
              EXPECT_EQ(phase.rounds, shared ? 0 : most_rows) << phase.name;
            }
          }
          expect_same_graph(in_rounds, g);
          // Forward only (mini-batch mode): the same blocks, bit for bit, and no transposes.
          options.transposes = false;
          const Graph3D forward_only = build_graph_3d(rows, grid, options);
          for (int t = 0; t < options.layers; ++t) {
            const AdjacencyBlock& block = forward_only.adjacency[size_t(t)];
            EXPECT_FALSE(block.has_transpose);
            EXPECT_EQ(block.transpose.matrix().num_rows, 0);
            EXPECT_EQ(block.nnz, g.adjacency[size_t(t)].nnz);
            EXPECT_EQ(dense_block(block.forward), dense_block(g.adjacency[size_t(t)].forward))
                << "layout " << t;
          }
        }
      }
}

// Replicas of one rank (a one-rank run, mini-batch's D x 1 x 1 x 1): layouts in the same row and column
// orders are one block, and where the normalized adjacency is symmetric, layouts in swapped orders are each
// other's transposes (A2 = A1^T) and share their arrays. Every block still holds the reference's entries.
TEST(Graph3D, OneRankReplicasShareLayouts) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{world.size(), 1, 1, 1});
  const int64_t n = 13;
  const auto same_arrays = [](const CsrSpmm<float>& a, const CsrSpmm<float>& b) {
    return a.matrix().col_idx.data() == b.matrix().col_idx.data();
  };
  for (const bool symmetric : {false, true})
    for (const Normalization normalization : {Normalization::Symmetric, Normalization::Mean})
      for (const PermuteMode permute : {PermuteMode::None, PermuteMode::Double}) {
        SCOPED_TRACE(std::string(symmetric ? "symmetric" : "directed") + " graph, " +
                     normalization_name(normalization) + ", permute " + permute_mode_name(permute));
        Graph3DOptions options;
        options.layers = 4;
        options.permute = permute;
        options.seed = 3;
        options.normalization = normalization;
        const Graph3D g = build_graph_3d(tiny_rows(n, grid.replica(), symmetric), grid, options);
        expect_blocks_match(g, n, dense_reference(n, normalization, symmetric));
        for (int t = 1; t < options.layers; ++t) {
          const int twin = permute == PermuteMode::None ? 0 : t % 2;  // the first layout in t's orders
          if (twin != t)
            EXPECT_TRUE(same_arrays(g.adjacency[size_t(t)].forward, g.adjacency[size_t(twin)].forward)) << t;
          else
            EXPECT_FALSE(same_arrays(g.adjacency[size_t(t)].forward, g.adjacency[0].forward)) << t;
        }
        // Only GCN's normalization of a symmetric graph is symmetric (the mean's D^-1 A is not).
        const bool transposes_shared = symmetric && normalization == Normalization::Symmetric;
        if (permute == PermuteMode::None)
          EXPECT_EQ(same_arrays(g.adjacency[0].transpose, g.adjacency[0].forward), transposes_shared);
        else
          EXPECT_EQ(same_arrays(g.adjacency[1].forward, g.adjacency[0].transpose), transposes_shared);
      }
}
