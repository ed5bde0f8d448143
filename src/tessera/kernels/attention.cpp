// SPDX-License-Identifier: BSD-3-Clause
// The edge kernels of graph attention (attention.hpp; the node-level ones are in attention_heads.cpp). Each
// is an op(i, j0, j1) over the columns [j0, j1) of row i (heads or features), launched on the host path (a
// row per task) or the team path (an entry per thread) by impl::for_each_row, or one op per path
// (impl::for_each_row_split) where the host keeps a row's per-head values in local arrays. Sums over a
// row's entries run in storage order on both paths, so the two give the same bits.
#include "tessera/kernels/attention.hpp"

#include <cmath>
#include <type_traits>

#include "impl/attention_rows.hpp"
#include "impl/fast_math.hpp"
#include "impl/head_segments.hpp"
#include "impl/host_loops.hpp"
#include "impl/rows.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

using impl::for_head_tiles;
using impl::kHeadTile;
using impl::leaky_relu;
using impl::leaky_relu_slope;
using impl::weighted_row_sum;

namespace {

void check_heads(const AttentionBlock& a, const Matrix<const float>& terms, int64_t rows, const char* what) {
  require(int64_t(terms.extent(0)) >= rows && int64_t(terms.extent(1)) == a.heads, "attention: ", what,
          " is ", terms.extent(0), "x", terms.extent(1), ", expected at least ", rows, "x", a.heads);
}

void check_edges(const AttentionBlock& a, const Matrix<const float>& edges, const char* what) {
  require(int64_t(edges.extent(0)) == a.forward.nnz() && int64_t(edges.extent(1)) == a.heads,
          "attention: ", what, " is ", edges.extent(0), "x", edges.extent(1), ", expected ", a.forward.nnz(),
          "x", a.heads);
}

}  // namespace

Vector<int64_t> transpose_positions(const EdgePattern& forward, const EdgePattern& transpose,
                                    KernelPath path) {
  require(transpose.num_rows == forward.num_cols && transpose.num_cols == forward.num_rows &&
              transpose.nnz() == forward.nnz(),
          "attention: a ", transpose.num_rows, "x", transpose.num_cols, " transpose with ", transpose.nnz(),
          " entries does not match a ", forward.num_rows, "x", forward.num_cols, " block with ",
          forward.nnz());
  const Vector<int64_t> where("attention.where", size_t(forward.nnz()));
  Kokkos::deep_copy(where, int64_t(-1));
  const Vector<int> misses("attention.misses", 1);
  const auto rp = forward.row_ptr;
  const auto ci = forward.col_idx;
  const auto trp = transpose.row_ptr;
  const auto tci = transpose.col_idx;
  impl::for_each_row(
      path, "tessera::attention_where", forward.num_rows, 1, KOKKOS_LAMBDA(int64_t i, int64_t, int64_t) {
        for (int64_t e = rp(i); e < rp(i + 1); ++e) {
          const int64_t j = ci(e);
          // A repeated edge (adjacent in a sorted row) is the repeat-th of its equal entries.
          int64_t repeat = 0;
          while (e - repeat > rp(i) && ci(e - repeat - 1) == j) ++repeat;
          int64_t lo = trp(j), hi = trp(j + 1);
          while (lo < hi) {
            const int64_t mid = (lo + hi) / 2;
            if (int64_t(tci(mid)) < i)
              lo = mid + 1;
            else
              hi = mid;
          }
          const int64_t at = lo + repeat;
          // Each transpose entry is claimed once: a second claim means the rows were not sorted.
          if (at >= trp(j + 1) || int64_t(tci(at)) != i ||
              Kokkos::atomic_compare_exchange(&where(at), int64_t(-1), e) != int64_t(-1))
            Kokkos::atomic_add(&misses(0), 1);
        }
      });
  int missed = 0;
  Kokkos::deep_copy(missed, Kokkos::subview(misses, 0));
  require(
      missed == 0, "attention: ", missed, " of the block's ", forward.nnz(),
      " edges have no entry of their own in its transpose (the rows must list their columns in increasing "
      "order, a repeated edge next to its repeats)");
  return where;
}

void attention_row_max(const AttentionBlock& a, const Matrix<const float>& dst,
                       const Matrix<const float>& src, const Matrix<float>& row_max, KernelPath path) {
  check_heads(a, dst, a.forward.num_rows, "dst");
  check_heads(a, src, a.forward.num_cols, "src");
  const auto rp = a.forward.row_ptr;
  const int64_t nnz = a.forward.nnz();  // the prefetches' bound (impl::kPrefetchAhead)
  const auto ci = a.forward.col_idx;
  const float slope = a.negative_slope;
  impl::for_each_sparse_row(
      path, "tessera::attention_row_max", a.forward.num_rows, a.heads,
      [=](int64_t i, int64_t h0, int64_t h1) {
        for_head_tiles(h0, h1, [&](int64_t t, auto n) {
          float m[kHeadTile], d[kHeadTile];
          for (int64_t k = 0; k < n; ++k) m[k] = -INFINITY, d[k] = dst(i, t + k);
          for (int64_t e = rp(i); e < rp(i + 1); ++e) {
            if (e + impl::kPrefetchAhead < nnz) __builtin_prefetch(&src(ci(e + impl::kPrefetchAhead), t));
            const float* s = &src(ci(e), t);
            TESSERA_SIMD
            for (int64_t k = 0; k < n; ++k) {
              const float v = leaky_relu(d[k] + s[k], slope);
              m[k] = v > m[k] ? v : m[k];
            }
          }
          for (int64_t k = 0; k < n; ++k) row_max(i, t + k) = m[k];
        });
      },
      KOKKOS_LAMBDA(int64_t i, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          float m = -INFINITY;
          for (int64_t e = rp(i); e < rp(i + 1); ++e) {
            const float s = leaky_relu(dst(i, h) + src(ci(e), h), slope);
            m = s > m ? s : m;
          }
          row_max(i, h) = m;
        }
      });
}

void attention_exponentials(const AttentionBlock& a, const Matrix<const float>& dst,
                            const Matrix<const float>& src, const Matrix<const float>& row_max,
                            const Matrix<float>& alpha, const Matrix<float>& row_sum, KernelPath path) {
  check_edges(a, alpha, "alpha");
  const auto rp = a.forward.row_ptr;
  const int64_t nnz = a.forward.nnz();  // the prefetches' bound (impl::kPrefetchAhead)
  const auto ci = a.forward.col_idx;
  const float slope = a.negative_slope;
  impl::for_each_sparse_row(
      path, "tessera::attention_exponentials", a.forward.num_rows, a.heads,
      [=](int64_t i, int64_t h0, int64_t h1) {
        for_head_tiles(h0, h1, [&](int64_t t, auto n) {
          float sum[kHeadTile], d[kHeadTile], m[kHeadTile];
          for (int64_t k = 0; k < n; ++k) sum[k] = 0.0f, d[k] = dst(i, t + k), m[k] = row_max(i, t + k);
          for (int64_t e = rp(i); e < rp(i + 1); ++e) {
            if (e + impl::kPrefetchAhead < nnz) __builtin_prefetch(&src(ci(e + impl::kPrefetchAhead), t));
            const float* s = &src(ci(e), t);
            float* out = &alpha(e, t);
            TESSERA_SIMD
            for (int64_t k = 0; k < n; ++k) {
              const float x = impl::exp_approx(leaky_relu(d[k] + s[k], slope) - m[k]);
              out[k] = x;
              sum[k] += x;
            }
          }
          for (int64_t k = 0; k < n; ++k) row_sum(i, t + k) = sum[k];
        });
      },
      KOKKOS_LAMBDA(int64_t i, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          float sum = 0.0f;
          for (int64_t e = rp(i); e < rp(i + 1); ++e) {
            const float x = impl::exp_approx(leaky_relu(dst(i, h) + src(ci(e), h), slope) - row_max(i, h));
            alpha(e, h) = x;
            sum += x;
          }
          row_sum(i, h) = sum;
        }
      });
}

void attention_normalize(const AttentionBlock& a, const Matrix<const float>& row_sum,
                         const Matrix<float>& alpha, KernelPath path) {
  check_edges(a, alpha, "alpha");
  const auto rp = a.forward.row_ptr;
  impl::for_each_sparse_row(
      path, "tessera::attention_normalize", a.forward.num_rows, a.heads,
      [=](int64_t i, int64_t h0, int64_t h1) {
        for_head_tiles(h0, h1, [&](int64_t t, auto n) {
          float inverse[kHeadTile];
          for (int64_t k = 0; k < n; ++k) inverse[k] = 1.0f / row_sum(i, t + k);
          for (int64_t e = rp(i); e < rp(i + 1); ++e) {
            float* out = &alpha(e, t);
            for (int64_t k = 0; k < n; ++k) out[k] *= inverse[k];
          }
        });
      },
      KOKKOS_LAMBDA(int64_t i, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          const float inverse = 1.0f / row_sum(i, h);
          for (int64_t e = rp(i); e < rp(i + 1); ++e) alpha(e, h) *= inverse;
        }
      });
}

void attention_aggregate(const AttentionBlock& a, const Matrix<const float>& alpha,
                         const EdgeDropout& dropout, const Matrix<const float>& z, const Matrix<float>& y,
                         KernelPath path) {
  check_edges(a, alpha, "alpha");
  const int64_t cols = int64_t(z.extent(1)), width = cols / a.heads;
  require(int64_t(y.extent(0)) == a.forward.num_rows && y.extent(1) == z.extent(1) &&
              int64_t(z.extent(0)) >= a.forward.num_cols && width * a.heads == cols,
          "attention_aggregate: shapes do not match");
  const auto rp = a.forward.row_ptr;
  const auto ci = a.forward.col_idx;
  const int64_t heads = a.heads, nnz = a.forward.nnz();
  impl::for_each_sparse_row(
      path, "tessera::attention_aggregate", a.forward.num_rows, cols,
      [=](int64_t i, int64_t, int64_t) {
        weighted_row_sum(
            heads, width, rp(i), rp(i + 1), nnz, &y(i, 0), [&](int64_t e) { return int64_t(ci(e)); },
            [&](int64_t e, int64_t j, int64_t h) { return alpha(e, h) * dropout.factor(i, j, h); },
            [&](int64_t j) { return &z(j, 0); }, [](int64_t) {});
      },
      KOKKOS_LAMBDA(int64_t i, int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) y(i, c) = 0.0f;
        for (int64_t e = rp(i); e < rp(i + 1); ++e) {
          const int64_t j = ci(e);
          impl::for_head_segments(c0, c1, width, [&](int64_t h, int64_t begin, int64_t end) {
            const float w = alpha(e, h) * dropout.factor(i, j, h);
            for (int64_t c = begin; c < end; ++c) y(i, c) += w * z(j, c);
          });
        }
      });
}

void attention_aggregate_transpose(const AttentionBlock& a, const Matrix<const float>& alpha,
                                   const EdgeDropout& dropout, const Matrix<const float>& g_y,
                                   const Matrix<float>& g_z, KernelPath path) {
  check_edges(a, alpha, "alpha");
  const int64_t cols = int64_t(g_y.extent(1)), width = cols / a.heads;
  require(a.transpose.nnz() == a.forward.nnz() && int64_t(a.where.extent(0)) == a.forward.nnz(),
          "attention_aggregate_transpose: the block has no transpose");
  require(int64_t(g_z.extent(0)) == a.transpose.num_rows && g_z.extent(1) == g_y.extent(1) &&
              int64_t(g_y.extent(0)) >= a.forward.num_rows && width * a.heads == cols,
          "attention_aggregate_transpose: shapes do not match");
  const auto rp = a.transpose.row_ptr;
  const auto ci = a.transpose.col_idx;
  const auto where = a.where;
  const int64_t heads = a.heads, nnz = a.forward.nnz();
  impl::for_each_sparse_row(
      path, "tessera::attention_aggregate_transpose", a.transpose.num_rows, cols,
      [=](int64_t j, int64_t, int64_t) {
        weighted_row_sum(
            heads, width, rp(j), rp(j + 1), nnz, &g_z(j, 0), [&](int64_t t) { return int64_t(ci(t)); },
            [&](int64_t t, int64_t i, int64_t h) { return alpha(where(t), h) * dropout.factor(i, j, h); },
            [&](int64_t i) { return &g_y(i, 0); },
            [&](int64_t t) { __builtin_prefetch(&alpha(where(t), 0)); });
      },
      KOKKOS_LAMBDA(int64_t j, int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) g_z(j, c) = 0.0f;
        for (int64_t t = rp(j); t < rp(j + 1); ++t) {
          const int64_t i = ci(t), e = where(t);
          impl::for_head_segments(c0, c1, width, [&](int64_t h, int64_t begin, int64_t end) {
            const float w = alpha(e, h) * dropout.factor(i, j, h);
            for (int64_t c = begin; c < end; ++c) g_z(j, c) += w * g_y(i, c);
          });
        }
      });
}

void attention_edge_gradients(const AttentionBlock& a, const Matrix<const float>& alpha,
                              const EdgeDropout& dropout, const Matrix<const float>& g_y,
                              const Matrix<const float>& z, const Matrix<float>& g_alpha,
                              const Matrix<float>& row_dot, KernelPath path) {
  check_edges(a, alpha, "alpha");
  check_edges(a, g_alpha, "g_alpha");
  const int64_t width = int64_t(z.extent(1)) / a.heads;
  const auto rp = a.forward.row_ptr;
  const auto ci = a.forward.col_idx;
  impl::for_each_sparse_row(
      path, "tessera::attention_edge_gradients", a.forward.num_rows, a.heads,
      [=](int64_t i, int64_t h0, int64_t h1) {
        for_head_tiles(h0, h1, [&](int64_t t, auto n) {
          float dot_sum[kHeadTile];
          impl::edge_gradient_row(i, t, n, rp, ci, alpha, dropout, g_y, z, width, g_alpha, dot_sum);
          for (int64_t k = 0; k < n; ++k) row_dot(i, t + k) = dot_sum[k];
        });
      },
      KOKKOS_LAMBDA(int64_t i, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          float dot_sum = 0.0f;
          for (int64_t e = rp(i); e < rp(i + 1); ++e) {
            const int64_t j = ci(e);
            float dot = 0.0f;
            for (int64_t f = 0; f < width; ++f) dot += g_y(i, h * width + f) * z(j, h * width + f);
            const float g = dot * dropout.factor(i, j, h);
            g_alpha(e, h) = g;
            dot_sum += alpha(e, h) * g;
          }
          row_dot(i, h) = dot_sum;
        }
      });
}

void attention_score_gradients(const AttentionBlock& a, const Matrix<const float>& alpha,
                               const Matrix<const float>& row_dot, const Matrix<const float>& dst,
                               const Matrix<const float>& src, const Matrix<float>& g_alpha,
                               const Matrix<float>& g_dst, KernelPath path) {
  check_edges(a, g_alpha, "g_alpha");
  const auto rp = a.forward.row_ptr;
  const auto ci = a.forward.col_idx;
  const float slope = a.negative_slope;
  impl::for_each_sparse_row(
      path, "tessera::attention_score_gradients", a.forward.num_rows, a.heads,
      [=](int64_t i, int64_t h0, int64_t h1) {
        for_head_tiles(h0, h1, [&](int64_t t, auto n) {
          float sum[kHeadTile];
          impl::score_gradient_row(i, t, n, rp, ci, alpha, row_dot, dst, src, slope, g_alpha, sum);
          for (int64_t k = 0; k < n; ++k) g_dst(i, t + k) = sum[k];
        });
      },
      KOKKOS_LAMBDA(int64_t i, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          float sum = 0.0f;
          for (int64_t e = rp(i); e < rp(i + 1); ++e) {
            const float g = alpha(e, h) * (g_alpha(e, h) - row_dot(i, h)) *
                            leaky_relu_slope(dst(i, h) + src(ci(e), h), slope);
            g_alpha(e, h) = g;
            sum += g;
          }
          g_dst(i, h) = sum;
        }
      });
}

void attention_source_gradients(const AttentionBlock& a, const Matrix<const float>& g_score,
                                const Matrix<float>& g_src, KernelPath path) {
  check_edges(a, g_score, "g_score");
  require(int64_t(g_src.extent(0)) == a.transpose.num_rows && int64_t(g_src.extent(1)) == a.heads &&
              int64_t(a.where.extent(0)) == a.forward.nnz(),
          "attention_source_gradients: shapes do not match");
  const auto rp = a.transpose.row_ptr;
  const int64_t nnz = a.forward.nnz();  // the prefetches' bound (impl::kPrefetchAhead)
  const auto where = a.where;
  impl::for_each_sparse_row(
      path, "tessera::attention_source_gradients", a.transpose.num_rows, a.heads,
      [=](int64_t j, int64_t h0, int64_t h1) {
        for_head_tiles(h0, h1, [&](int64_t t, auto n) {
          float sum[kHeadTile];
          for (int64_t k = 0; k < n; ++k) sum[k] = 0.0f;
          for (int64_t p = rp(j); p < rp(j + 1); ++p) {
            if (p + impl::kPrefetchAhead < nnz)
              __builtin_prefetch(&g_score(where(p + impl::kPrefetchAhead), t));
            const float* g = &g_score(where(p), t);
            for (int64_t k = 0; k < n; ++k) sum[k] += g[k];
          }
          for (int64_t k = 0; k < n; ++k) g_src(j, t + k) = sum[k];
        });
      },
      KOKKOS_LAMBDA(int64_t j, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          float sum = 0.0f;
          for (int64_t t = rp(j); t < rp(j + 1); ++t) sum += g_score(where(t), h);
          g_src(j, h) = sum;
        }
      });
}

}  // namespace tessera
