// SPDX-License-Identifier: BSD-3-Clause
// The attention kernels (kernels/attention.hpp) on the host path against the team path: the host's per-head
// tiles, fixed head widths and early gathers against the team's one-entry-at-a-time formulas, which
// GatConv's tests hold against the dense double reference (test_attention.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "reference/dense.hpp"
#include "support/random_graph.hpp"
#include "tessera/comm/communicator.hpp"
#include "tessera/kernels/attention.hpp"
#include "tessera/kernels/spmm.hpp"

using namespace tessera;
using namespace tessera::reference;

namespace {

// A random undirected graph's in-edge lists (no self loops; the last node isolated).
std::vector<std::set<int64_t>> random_graph(int64_t n, int64_t edges, uint64_t seed) {
  return fixtures::random_in_edges(n, edges, seed, 1);
}

}  // namespace

namespace {

// A host CSR pattern of `in` plus self loops (the last node left without entries), on the device.
AttentionBlock attention_block_of(const std::vector<std::set<int64_t>>& in, int64_t heads) {
  const int64_t n = int64_t(in.size());
  std::vector<int64_t> ptr{0};
  std::vector<SpmmColumn> col;
  for (int64_t v = 0; v < n; ++v) {
    std::set<int64_t> row = in[size_t(v)];
    if (v + 1 < n) row.insert(v);
    col.insert(col.end(), row.begin(), row.end());
    ptr.push_back(int64_t(col.size()));
  }
  CsrMatrix<float, HostSpace, SpmmColumn> host;
  host.num_rows = host.num_cols = n;
  host.row_ptr = Vector<int64_t, HostSpace>("ptr", ptr.size());
  host.col_idx = Vector<SpmmColumn, HostSpace>("col", col.size());
  for (size_t k = 0; k < ptr.size(); ++k) host.row_ptr(k) = ptr[k];
  for (size_t k = 0; k < col.size(); ++k) host.col_idx(k) = col[k];
  const auto on_device = [](const CsrMatrix<float, HostSpace, SpmmColumn>& h) {
    EdgePattern d;
    d.num_rows = h.num_rows, d.num_cols = h.num_cols;
    d.row_ptr = Kokkos::create_mirror_view_and_copy(DeviceSpace(), h.row_ptr);
    d.col_idx = Kokkos::create_mirror_view_and_copy(DeviceSpace(), h.col_idx);
    return d;
  };
  AttentionBlock a;
  a.forward = on_device(host);
  a.transpose = on_device(csr_transpose(host));
  a.where = transpose_positions(a.forward, a.transpose);
  a.heads = heads;
  return a;
}

Matrix<float> random_matrix(int64_t rows, int64_t cols, std::mt19937_64& gen) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const Matrix<float> m(std::string("random"), size_t(rows), size_t(cols));
  const auto h = Kokkos::create_mirror_view(m);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) h(i, j) = u(gen);
  Kokkos::deep_copy(m, h);
  return m;
}

// Global ids 1, 4, 7, ... for local rows and columns (a layout whose ids are not the local indices).
Vector<int64_t> node_ids(int64_t n) {
  const Vector<int64_t> ids("ids", size_t(n));
  const auto h = Kokkos::create_mirror_view(ids);
  for (int64_t k = 0; k < n; ++k) h(k) = 3 * k + 1;
  Kokkos::deep_copy(ids, h);
  return ids;
}

// The largest difference between two matrices over the largest magnitude of the second.
double relative_gap(const Matrix<const float>& got, const Matrix<const float>& want) {
  const Dense g = from_view(got), w = from_view(want);
  double gap = 0, top = 1e-30;
  for (size_t k = 0; k < w.a.size(); ++k) {
    gap = std::max(gap, std::abs(g.a[k] - w.a[k]));
    top = std::max(top, std::abs(w.a[k]));
  }
  return gap / top;
}

// Two formulations that sum in the same order agree to the bit, within round-off where the compiler may
// fuse multiply-adds differently in the two.
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
constexpr double kSameSums = 1e-6;
#else
constexpr double kSameSums = 0.0;
#endif

// Every attention kernel's outputs on one path, from the same inputs.
std::vector<Matrix<float>> attention_kernels_on(KernelPath path, const AttentionBlock& a, int64_t width,
                                                const EdgeDropout& drop, uint64_t seed) {
  std::mt19937_64 gen(seed);
  const int64_t n = a.forward.num_rows, e = a.forward.nnz(), heads = a.heads, cols = heads * width;
  const Matrix<float> z = random_matrix(n, cols, gen), g_y = random_matrix(n, cols, gen);
  const Matrix<float> att_src = random_matrix(heads, width, gen), att_dst = random_matrix(heads, width, gen);
  const auto make = [](int64_t r, int64_t c) {
    return Matrix<float>(std::string("out"), size_t(r), size_t(c));
  };
  const Matrix<float> src = make(n, heads), dst = make(n, heads), row_max = make(n, heads),
                      row_sum = make(n, heads), alpha = make(e, heads), y = make(n, cols),
                      g_z = make(n, cols), g_score = make(e, heads), row_dot = make(n, heads),
                      g_dst = make(n, heads), g_src = make(n, heads), g_att_src = make(heads, width),
                      g_att_dst = make(heads, width);
  attention_node_scores(z, att_src, att_dst, src, dst, path);
  attention_row_max(a, dst, src, row_max, path);
  attention_exponentials(a, dst, src, row_max, alpha, row_sum, path);
  attention_normalize(a, row_sum, alpha, path);
  attention_aggregate(a, alpha, drop, z, y, path);
  attention_aggregate_transpose(a, alpha, drop, g_y, g_z, path);
  attention_edge_gradients(a, alpha, drop, g_y, z, g_score, row_dot, path);
  attention_score_gradients(a, alpha, row_dot, dst, src, g_score, g_dst, path);
  attention_source_gradients(a, g_score, g_src, path);
  attention_node_score_gradients(z, att_src, att_dst, g_src, g_dst, g_z, g_att_src, g_att_dst, path);
  // The fused forward of whole rows gives what the four kernels above gave, to the bit.
  const Matrix<float> max2 = make(n, heads), sum2 = make(n, heads), alpha2 = make(e, heads),
                      y2 = make(n, cols);
  attention_forward_whole_rows(a, dst, src, max2, sum2, alpha2, drop, z, y2, path);
  for (const auto& [fused, apart] :
       {std::pair(max2, row_max), std::pair(sum2, row_sum), std::pair(alpha2, alpha), std::pair(y2, y)})
    EXPECT_LE(relative_gap(fused, apart), kSameSums) << kernel_path_name(path);
  // And the fused SDDMM and softmax backward what the two kernels gave.
  const Matrix<float> score2 = make(e, heads), dot2 = make(n, heads), g_dst2 = make(n, heads);
  attention_edge_backward_whole_rows(a, alpha, drop, g_y, z, dst, src, score2, dot2, g_dst2, path);
  for (const auto& [fused, apart] :
       {std::pair(score2, g_score), std::pair(dot2, row_dot), std::pair(g_dst2, g_dst)})
    EXPECT_LE(relative_gap(fused, apart), kSameSums) << kernel_path_name(path);
  return {src,   dst,   row_max,   row_sum,   alpha,  y,  g_z,    g_score, row_dot,
          g_dst, g_src, g_att_src, g_att_dst, alpha2, y2, score2, g_dst2};
}

}  // namespace

// The host path's kernels (per-head tiles, fixed head widths, gathers requested ahead) against the team
// path's one-entry-at-a-time formulas, for head counts below, at and past a tile of 8, widths that are and
// are not a fixed case, a head wider than a tile of columns, with and without attention dropout, on a
// graph with hub rows and an empty row. Both sum in the same order, so they agree to the bit (within
// round-off where the compiler may fuse multiply-adds differently in the two).
TEST(AttentionKernels, HostPathEqualsTeamPathForEveryTileAndWidth) {
  const Communicator world = Communicator::world();
  if (world.size() > 1) GTEST_SKIP() << "one rank";
  if (!kernel_path_available(KernelPath::Host, KernelKind::Elementwise) ||
      !kernel_path_available(KernelPath::Team, KernelKind::Elementwise))
    GTEST_SKIP() << "needs the host and team paths";
  std::vector<std::set<int64_t>> in = random_graph(40, 160, 3);
  for (int64_t v = 0; v < 39; v += 2) in[0].insert(v + 1), in[size_t(v + 1)].insert(0);  // a hub row
  const char* names[] = {"src",       "dst",         "row_max", "row_sum",       "alpha",      "y",
                         "g_z",       "g_score",     "row_dot", "g_dst",         "g_src",      "g_att_src",
                         "g_att_dst", "fused alpha", "fused y", "fused g_score", "fused g_dst"};
  for (const auto& [heads, width] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 40}, {3, 5}, {8, 8}, {11, 4}, {17, 3}, {2, 300}, {9, 16}})
    for (const float rate : {0.0f, 0.4f}) {
      SCOPED_TRACE("heads " + std::to_string(heads) + " width " + std::to_string(width) + " dropout " +
                   std::to_string(rate));
      const AttentionBlock a = attention_block_of(in, heads);
      const Vector<int64_t> ids = node_ids(int64_t(in.size()));
      const EdgeDropout drop = rate > 0 ? EdgeDropout(rate, 5, 2, heads, ids, ids) : EdgeDropout();
      const auto host = attention_kernels_on(KernelPath::Host, a, width, drop, 17);
      const auto team = attention_kernels_on(KernelPath::Team, a, width, drop, 17);
      for (size_t k = 0; k < host.size(); ++k)
        EXPECT_LE(relative_gap(host[k], team[k]), kSameSums) << names[k];
    }
}
