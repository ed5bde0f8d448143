// SPDX-License-Identifier: BSD-3-Clause
// Not installed: what the attention kernels' host ops share (attention.cpp, attention_fused.cpp): LeakyReLU
// and its slope, the walk over a row's heads in tiles of kHeadTile, and the weighted sum of gathered rows.
// The host ops keep a row's per-head running values in local arrays of kHeadTile heads and walk the row's
// entries once per tile, edges outer and heads inner (the team ops: one head, entries in order). Per head
// and per column the sums run over the entries in the same order on both. A whole tile's head count is a
// compile-time constant: with a run-time count GCC took the loops' scalar versions.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <type_traits>

#include "host_loops.hpp"

namespace tessera::impl {

/// max(x, 0) + slope min(x, 0).
KOKKOS_INLINE_FUNCTION float leaky_relu(float x, float slope) {
  return x > 0.0f ? x : slope * x;
}

/// d leaky_relu / dx.
KOKKOS_INLINE_FUNCTION float leaky_relu_slope(float x, float slope) {
  return x > 0.0f ? 1.0f : slope;
}

/// Heads a host op keeps running values for at once.
constexpr int64_t kHeadTile = 8;
/// A whole tile's head count, as a type.
using WholeTile = std::integral_constant<int64_t, kHeadTile>;

// body(t, n) for the tiles [t, t + n) of heads [h0, h1): n is WholeTile but for a last, partial tile.
template <class Body>
void for_head_tiles(int64_t h0, int64_t h1, const Body& body) {
  int64_t t = h0;
  for (; t + kHeadTile <= h1; t += kHeadTile) body(t, WholeTile());
  if (t < h1) body(t, h1 - t);
}

// f(w) with w the head width as a compile-time constant where it is one of the common ones.
template <class F>
void with_head_width(int64_t width, const F& f) {
  switch (width) {
    case 4:
      return f(std::integral_constant<int64_t, 4>());
    case 8:
      return f(std::integral_constant<int64_t, 8>());
    case 16:
      return f(std::integral_constant<int64_t, 16>());
    case 32:
      return f(std::integral_constant<int64_t, 32>());
    default:
      return f(width);
  }
}

// The host's weighted sum of one row: out[c] = the sum over entries p in [p0, p1) of weight(p, node(p), h)
// row(node(p))[c], for every column c of H heads of `width` (out has H width columns); the sums in entry
// order in a local tile of heads; the rows of the entry impl::kPrefetchAhead ahead requested early (up to
// p_end, the block's entry count: into the next rows), and whatever its weight reads (weight_ahead): the
// gathers are what the loop waits for.
constexpr int64_t kAccFloats = 256;

template <class Node, class Weight, class Row, class Ahead>
void weighted_row_sum(int64_t heads, int64_t width, int64_t p0, int64_t p1, int64_t p_end, float* out,
                      const Node& node, const Weight& weight, const Row& row, const Ahead& weight_ahead) {
  // Column tiles of at most kAccFloats: whole heads where a head fits, else pieces of one head.
  const int64_t tile_heads = width <= kAccFloats ? kAccFloats / width : 1;
  const int64_t piece = width <= kAccFloats ? width : kAccFloats;
  with_head_width(piece, [&](auto f_count) {
    for (int64_t h0 = 0; h0 < heads; h0 += tile_heads) {
      const int64_t h1 = heads - h0 < tile_heads ? heads : h0 + tile_heads;
      for (int64_t f0 = 0; f0 < width; f0 += f_count) {
        const int64_t f1 = width - f0 < f_count ? width : f0 + f_count;  // < f0 + f_count: a last piece
        const int64_t n = f1 - f0;
        float acc[kAccFloats];
        for (int64_t c = 0; c < (h1 - h0) * f_count; ++c) acc[c] = 0.0f;
        for (int64_t p = p0; p < p1; ++p) {
          if (p + impl::kPrefetchAhead < p_end) {
            impl::prefetch_bytes(row(node(p + impl::kPrefetchAhead)) + h0 * width,
                                 (h1 - h0) * width * int64_t(sizeof(float)));
            weight_ahead(p + impl::kPrefetchAhead);
          }
          const int64_t j = node(p);
          const float* r = row(j);
          for (int64_t h = h0; h < h1; ++h) {
            const float w = weight(p, j, h);
            float* acc_h = acc + (h - h0) * f_count;
            const float* x = r + h * width + f0;
            if (n == f_count)
              for (int64_t f = 0; f < f_count; ++f) acc_h[f] += w * x[f];
            else
              for (int64_t f = 0; f < n; ++f) acc_h[f] += w * x[f];
          }
        }
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t f = 0; f < n; ++f) out[h * width + f0 + f] = acc[(h - h0) * f_count + f];
      }
    }
  });
}

/// Row i's SDDMM for heads [t, t + n): g_alpha(e, h) = dropout g_y(i, h, :) . z(j, h, :) for its entries
/// e (j = ci(e)), and dot_sum[k] = the sum of alpha(e, t + k) g_alpha(e, t + k) over them.
template <class Offsets, class Cols, class Alpha, class Dropout, class Rows, class Out, class Tile>
void edge_gradient_row(int64_t i, int64_t t, Tile n, const Offsets& rp, const Cols& ci, const Alpha& alpha,
                       const Dropout& dropout, const Rows& g_y, const Rows& z, int64_t width,
                       const Out& g_alpha, float* dot_sum) {
  for (int64_t k = 0; k < n; ++k) dot_sum[k] = 0.0f;
  const int64_t limit = entry_count(rp);
  for (int64_t e = rp(i); e < rp(i + 1); ++e) {
    if (e + kPrefetchAhead < limit)
      prefetch_bytes(&z(ci(e + kPrefetchAhead), t * width), n * width * int64_t(sizeof(float)));
    const int64_t j = ci(e);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t h = t + k;
      const float* gy = &g_y(i, h * width);
      const float* zj = &z(j, h * width);
      float dot = 0.0f;
      for (int64_t f = 0; f < width; ++f) dot += gy[f] * zj[f];
      const float g = dot * dropout.factor(i, j, h);
      g_alpha(e, h) = g;
      dot_sum[k] += alpha(e, h) * g;
    }
  }
}

/// Row i's softmax backward for heads [t, t + n), in place: g_alpha(e, h) becomes alpha (g_alpha - row_dot(i,
/// h)) LeakyReLU'(dst(i, h) + src(j, h)), and sum[k] its sum over the row's entries.
template <class Offsets, class Cols, class Alpha, class Terms, class Out, class Tile>
void score_gradient_row(int64_t i, int64_t t, Tile n, const Offsets& rp, const Cols& ci, const Alpha& alpha,
                        const Terms& row_dot, const Terms& dst, const Terms& src, float slope,
                        const Out& g_alpha, float* sum) {
  float d[kHeadTile], r[kHeadTile];
  for (int64_t k = 0; k < n; ++k) sum[k] = 0.0f, d[k] = dst(i, t + k), r[k] = row_dot(i, t + k);
  const int64_t limit = entry_count(rp);
  for (int64_t e = rp(i); e < rp(i + 1); ++e) {
    if (e + kPrefetchAhead < limit) __builtin_prefetch(&src(ci(e + kPrefetchAhead), t));
    const float* s = &src(ci(e), t);
    const float* al = &alpha(e, t);
    float* g = &g_alpha(e, t);
    TESSERA_SIMD
    for (int64_t k = 0; k < n; ++k) {
      const float v = al[k] * (g[k] - r[k]) * leaky_relu_slope(d[k] + s[k], slope);
      g[k] = v;
      sum[k] += v;
    }
  }
}

}  // namespace tessera::impl
