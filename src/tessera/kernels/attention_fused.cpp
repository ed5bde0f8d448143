// SPDX-License-Identifier: BSD-3-Clause
// The attention passes of a block that holds its rows whole, fused on the host path (attention.hpp). The
// forward, per row: the scores and their maximum (the source terms gathered once, the scores parked in
// alpha), the exponentials and their sum over the parked scores, the normalization, then the weighted sum of
// z's rows: the row's alpha stays in cache between the passes instead of going to memory and back three
// times. Each value is formed by the same operations in the same order as the separate kernels form it. The
// backward, per row: the SDDMM and the softmax's backward, the row's g_alpha kept in cache between them.
#include <cmath>
#include <type_traits>

#include "impl/attention_rows.hpp"
#include "impl/fast_math.hpp"
#include "impl/rows.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/attention.hpp"

namespace tessera {

namespace {

// Row i's scores into alpha and their maximum per head (heads [t, t + n)).
template <class Src, class Cols, class Offsets, class Tile>
void scores_and_maximum(int64_t i, int64_t t, Tile n, const Offsets& rp, const Cols& ci, const Src& src,
                        const Matrix<const float>& dst, float slope, const Matrix<float>& alpha, float* m) {
  float d[impl::kHeadTile];
  for (int64_t k = 0; k < n; ++k) m[k] = -INFINITY, d[k] = dst(i, t + k);
  const int64_t limit = impl::entry_count(rp);
  for (int64_t e = rp(i); e < rp(i + 1); ++e) {
    if (e + impl::kPrefetchAhead < limit) __builtin_prefetch(&src(ci(e + impl::kPrefetchAhead), t));
    const float* s = &src(ci(e), t);
    float* score = &alpha(e, t);
    TESSERA_SIMD
    for (int64_t k = 0; k < n; ++k) {
      const float v = impl::leaky_relu(d[k] + s[k], slope);
      score[k] = v;
      m[k] = v > m[k] ? v : m[k];
    }
  }
}

// The parked scores of row i become exp(score - m), then are divided by their sum (heads [t, t + n)).
template <class Offsets, class Tile>
void softmax_in_place(int64_t i, int64_t t, Tile n, const Offsets& rp, const float* m,
                      const Matrix<float>& alpha, float* sum) {
  for (int64_t k = 0; k < n; ++k) sum[k] = 0.0f;
  for (int64_t e = rp(i); e < rp(i + 1); ++e) {
    float* x = &alpha(e, t);
    TESSERA_SIMD
    for (int64_t k = 0; k < n; ++k) {
      x[k] = impl::exp_approx(x[k] - m[k]);
      sum[k] += x[k];
    }
  }
  float inverse[impl::kHeadTile];
  for (int64_t k = 0; k < n; ++k) inverse[k] = 1.0f / sum[k];
  for (int64_t e = rp(i); e < rp(i + 1); ++e) {
    float* x = &alpha(e, t);
    for (int64_t k = 0; k < n; ++k) x[k] *= inverse[k];
  }
}

// The host path: each row through all four steps. A template so that a device build, whose host path runs
// its row loops on the device, never instantiates it.
template <class Space>
void fused_on_host(const AttentionBlock& a, const Matrix<const float>& dst, const Matrix<const float>& src,
                   const Matrix<float>& row_max, const Matrix<float>& row_sum, const Matrix<float>& alpha,
                   const EdgeDropout& dropout, const Matrix<const float>& z, const Matrix<float>& y) {
  const int64_t heads = a.heads, cols = int64_t(z.extent(1)), width = cols / heads;
  require(int64_t(dst.extent(0)) >= a.forward.num_rows && int64_t(src.extent(0)) >= a.forward.num_cols &&
              int64_t(dst.extent(1)) == heads && int64_t(src.extent(1)) == heads &&
              int64_t(alpha.extent(0)) == a.forward.nnz() && int64_t(alpha.extent(1)) == heads &&
              int64_t(y.extent(0)) == a.forward.num_rows && y.extent(1) == z.extent(1) &&
              int64_t(z.extent(0)) >= a.forward.num_cols && width * heads == cols,
          "attention_forward_whole_rows: shapes do not match");
  const auto rp = a.forward.row_ptr;
  const auto ci = a.forward.col_idx;
  const float slope = a.negative_slope;
  const int64_t nnz = a.forward.nnz();
  impl::for_each_uneven_row_host(
      "tessera::attention_forward_whole_rows", a.forward.num_rows, heads,
      [=](int64_t i, int64_t h0, int64_t h1) {
        impl::for_head_tiles(h0, h1, [&](int64_t t, auto n) {
          float m[impl::kHeadTile], sum[impl::kHeadTile];
          scores_and_maximum(i, t, n, rp, ci, src, dst, slope, alpha, m);
          softmax_in_place(i, t, n, rp, m, alpha, sum);
          for (int64_t k = 0; k < n; ++k) row_max(i, t + k) = m[k], row_sum(i, t + k) = sum[k];
        });
        impl::weighted_row_sum(
            heads, width, rp(i), rp(i + 1), nnz, &y(i, 0), [&](int64_t e) { return int64_t(ci(e)); },
            [&](int64_t e, int64_t j, int64_t h) { return alpha(e, h) * dropout.factor(i, j, h); },
            [&](int64_t j) { return &z(j, 0); }, [](int64_t) {});
      });
}

// The four kernels in turn where the host op cannot run (the team path; any path of a device build).
template <class Space>
void forward_whole_rows(const AttentionBlock& a, const Matrix<const float>& dst,
                        const Matrix<const float>& src, const Matrix<float>& row_max,
                        const Matrix<float>& row_sum, const Matrix<float>& alpha, const EdgeDropout& dropout,
                        const Matrix<const float>& z, const Matrix<float>& y, KernelPath path) {
  if constexpr (std::is_same<Space, HostSpace>::value) {
    if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Host)
      return fused_on_host<Space>(a, dst, src, row_max, row_sum, alpha, dropout, z, y);
  }
  attention_row_max(a, dst, src, row_max, path);
  attention_exponentials(a, dst, src, row_max, alpha, row_sum, path);
  attention_normalize(a, row_sum, alpha, path);
  attention_aggregate(a, alpha, dropout, z, y, path);
}

// The backward's host path: each row's SDDMM and softmax backward in one pass.
template <class Space>
void edge_backward_on_host(const AttentionBlock& a, const Matrix<const float>& alpha,
                           const EdgeDropout& dropout, const Matrix<const float>& g_y,
                           const Matrix<const float>& z, const Matrix<const float>& dst,
                           const Matrix<const float>& src, const Matrix<float>& g_score,
                           const Matrix<float>& row_dot, const Matrix<float>& g_dst) {
  const int64_t heads = a.heads, width = int64_t(z.extent(1)) / heads;
  require(int64_t(alpha.extent(0)) == a.forward.nnz() && g_score.extent(0) == alpha.extent(0) &&
              int64_t(alpha.extent(1)) == heads && g_score.extent(1) == alpha.extent(1) &&
              int64_t(row_dot.extent(0)) >= a.forward.num_rows &&
              int64_t(g_dst.extent(0)) >= a.forward.num_rows && width * heads == int64_t(z.extent(1)),
          "attention_edge_backward_whole_rows: shapes do not match");
  const auto rp = a.forward.row_ptr;
  const auto ci = a.forward.col_idx;
  const float slope = a.negative_slope;
  const Matrix<const float> dots = row_dot;
  impl::for_each_uneven_row_host(
      "tessera::attention_edge_backward_whole_rows", a.forward.num_rows, heads,
      [=](int64_t i, int64_t h0, int64_t h1) {
        impl::for_head_tiles(h0, h1, [&](int64_t t, auto n) {
          float dot_sum[impl::kHeadTile], sum[impl::kHeadTile];
          impl::edge_gradient_row(i, t, n, rp, ci, alpha, dropout, g_y, z, width, g_score, dot_sum);
          for (int64_t k = 0; k < n; ++k) row_dot(i, t + k) = dot_sum[k];
          impl::score_gradient_row(i, t, n, rp, ci, alpha, dots, dst, src, slope, g_score, sum);
          for (int64_t k = 0; k < n; ++k) g_dst(i, t + k) = sum[k];
        });
      });
}

template <class Space>
void edge_backward_whole_rows(const AttentionBlock& a, const Matrix<const float>& alpha,
                              const EdgeDropout& dropout, const Matrix<const float>& g_y,
                              const Matrix<const float>& z, const Matrix<const float>& dst,
                              const Matrix<const float>& src, const Matrix<float>& g_score,
                              const Matrix<float>& row_dot, const Matrix<float>& g_dst, KernelPath path) {
  if constexpr (std::is_same<Space, HostSpace>::value) {
    if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Host)
      return edge_backward_on_host<Space>(a, alpha, dropout, g_y, z, dst, src, g_score, row_dot, g_dst);
  }
  attention_edge_gradients(a, alpha, dropout, g_y, z, g_score, row_dot, path);
  attention_score_gradients(a, alpha, row_dot, dst, src, g_score, g_dst, path);
}

}  // namespace

void attention_edge_backward_whole_rows(const AttentionBlock& a, const Matrix<const float>& alpha,
                                        const EdgeDropout& dropout, const Matrix<const float>& g_y,
                                        const Matrix<const float>& z, const Matrix<const float>& dst,
                                        const Matrix<const float>& src, const Matrix<float>& g_score,
                                        const Matrix<float>& row_dot, const Matrix<float>& g_dst,
                                        KernelPath path) {
  edge_backward_whole_rows<DeviceSpace>(a, alpha, dropout, g_y, z, dst, src, g_score, row_dot, g_dst, path);
}

void attention_forward_whole_rows(const AttentionBlock& a, const Matrix<const float>& dst,
                                  const Matrix<const float>& src, const Matrix<float>& row_max,
                                  const Matrix<float>& row_sum, const Matrix<float>& alpha,
                                  const EdgeDropout& dropout, const Matrix<const float>& z,
                                  const Matrix<float>& y, KernelPath path) {
  forward_whole_rows<DeviceSpace>(a, dst, src, row_max, row_sum, alpha, dropout, z, y, path);
}

}  // namespace tessera
