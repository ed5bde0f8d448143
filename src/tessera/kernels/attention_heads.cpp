// SPDX-License-Identifier: BSD-3-Clause
// The node-level kernels of graph attention (attention.hpp): the score terms and their gradients, and the
// combination of the heads with its activation. One op per row on both paths (impl::for_each_row); a row's
// columns are walked head by head so that the host loops over a head's features without a division per
// column.
#include <cmath>

#include "impl/cpu_clones.hpp"
#include "impl/fast_math.hpp"
#include "impl/head_segments.hpp"
#include "impl/rows.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/scratch.hpp"
#include "tessera/kernels/attention.hpp"

namespace tessera {

void attention_node_scores(const Matrix<const float>& z, const Matrix<const float>& att_src,
                           const Matrix<const float>& att_dst, const Matrix<float>& src,
                           const Matrix<float>& dst, KernelPath path) {
  const int64_t heads = int64_t(att_src.extent(0)), width = int64_t(att_src.extent(1));
  require(int64_t(z.extent(1)) == heads * width && src.extent(0) == z.extent(0) &&
              dst.extent(0) == z.extent(0) && int64_t(src.extent(1)) == heads &&
              int64_t(dst.extent(1)) == heads,
          "attention_node_scores: shapes do not match");
  impl::for_each_row(
      path, "tessera::attention_node_scores", int64_t(z.extent(0)), heads,
      KOKKOS_LAMBDA(int64_t n, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          float s = 0.0f, d = 0.0f;
          for (int64_t f = 0; f < width; ++f) {
            s += z(n, h * width + f) * att_src(h, f);
            d += z(n, h * width + f) * att_dst(h, f);
          }
          src(n, h) = s;
          dst(n, h) = d;
        }
      });
}

void attention_node_score_gradients(const Matrix<const float>& z, const Matrix<const float>& att_src,
                                    const Matrix<const float>& att_dst, const Matrix<const float>& g_src,
                                    const Matrix<const float>& g_dst, const Matrix<float>& g_z,
                                    const Matrix<float>& g_att_src, const Matrix<float>& g_att_dst,
                                    KernelPath path) {
  const int64_t heads = int64_t(att_src.extent(0)), width = int64_t(att_src.extent(1));
  const int64_t rows = int64_t(z.extent(0)), cols = heads * width;
  require(int64_t(z.extent(1)) == cols && g_z.extent(0) == z.extent(0) && g_z.extent(1) == z.extent(1) &&
              g_src.extent(0) == z.extent(0) && g_dst.extent(0) == z.extent(0),
          "attention_node_score_gradients: shapes do not match");
  impl::for_each_row(
      path, "tessera::attention_score_terms_backward", rows, cols,
      KOKKOS_LAMBDA(int64_t n, int64_t c0, int64_t c1) {
        impl::for_head_segments(c0, c1, width, [&](int64_t h, int64_t begin, int64_t end) {
          const float gs = g_src(n, h), gd = g_dst(n, h);
          for (int64_t c = begin; c < end; ++c)
            g_z(n, c) += gs * att_src(h, c - h * width) + gd * att_dst(h, c - h * width);
        });
      });
  // Column sums in the fixed blocks of impl::reduce_columns: [src terms | dst terms], 2 H F columns, on
  // scratch rather than an allocation per layer and step.
  const Vector<float> sums = scratch_vector<float>("attention.g_att", size_t(2 * cols));
  impl::reduce_columns<float>(
      path, "tessera::attention_att_gradients", rows, 2 * cols, sums,
      KOKKOS_LAMBDA(int64_t n, int64_t c0, int64_t c1, float* acc) {
        // Columns [0, cols) take the source terms, [cols, 2 cols) the destination terms.
        impl::for_head_segments(c0, c1, width, [&](int64_t g, int64_t begin, int64_t end) {
          const int64_t shift = g < heads ? 0 : cols;
          const float term = g < heads ? g_src(n, g) : g_dst(n, g - heads);
          for (int64_t c = begin; c < end; ++c) acc[c - c0] += term * z(n, c - shift);
        });
      });
  const Matrix<float> src_sums(sums.data(), size_t(heads), size_t(width));
  const Matrix<float> dst_sums(sums.data() + cols, size_t(heads), size_t(width));
  Kokkos::deep_copy(g_att_src, src_sums);
  Kokkos::deep_copy(g_att_dst, dst_sums);
}

namespace {

KOKKOS_INLINE_FUNCTION float activate(float x, Activation activation) {
  if (activation == Activation::Relu) return x > 0.0f ? x : 0.0f;
  if (activation == Activation::Elu) return x > 0.0f ? x : impl::expm1_approx(x);
  return x;
}

KOKKOS_INLINE_FUNCTION float activation_slope(float x, Activation activation) {
  if (activation == Activation::Relu) return x > 0.0f ? 1.0f : 0.0f;
  if (activation == Activation::Elu) return x > 0.0f ? 1.0f : impl::exp_approx(x);
  return 1.0f;
}

// The host op's activation loops are compiled for AVX-512 and AVX2 too (impl/cpu_clones.hpp): at the
// baseline ISA's four lanes ELU's exponential, not memory, bounds the pass. The file is compiled without
// contraction (CMakeLists.txt): every clone gives the baseline one's bits. Device compilers get plain
// functions.

// out[c] = activate(x[c]) for c in [c0, c1): a loop per activation, so that each vectorizes.
TESSERA_CPU_CLONES TESSERA_CPU_FLATTEN void activate_run(const float* x, float* out, int64_t c0, int64_t c1,
                                                         Activation activation) {
  if (activation == Activation::Relu)
    for (int64_t c = c0; c < c1; ++c) out[c] = activate(x[c], Activation::Relu);
  else if (activation == Activation::Elu)
    for (int64_t c = c0; c < c1; ++c) out[c] = activate(x[c], Activation::Elu);
  else
    for (int64_t c = c0; c < c1; ++c) out[c] = x[c];
}

// g[c] *= activation_slope(x[c]) for c in [c0, c1) (the identity's slope, 1, leaves g as it is).
TESSERA_CPU_CLONES TESSERA_CPU_FLATTEN void slope_run(const float* x, float* g, int64_t c0, int64_t c1,
                                                      Activation activation) {
  if (activation == Activation::Relu)
    for (int64_t c = c0; c < c1; ++c) g[c] *= activation_slope(x[c], Activation::Relu);
  else if (activation == Activation::Elu)
    for (int64_t c = c0; c < c1; ++c) g[c] *= activation_slope(x[c], Activation::Elu);
}

}  // namespace

void attention_heads_forward(const Matrix<const float>& y, const Vector<const float>& bias,
                             const HeadsOutput& o, const Matrix<float>& pre, const Matrix<float>& out,
                             KernelPath path) {
  const int64_t cols = int64_t(pre.extent(1)), heads = o.heads, zw = int64_t(y.extent(1));
  const int64_t width = o.concat ? zw : zw / heads;
  require(pre.extent(0) == y.extent(0) && out.extent(0) == y.extent(0) && out.extent(1) == pre.extent(1) &&
              o.width == (o.concat ? zw : width) && (bias.extent(0) == 0 || int64_t(bias.extent(0)) == cols),
          "attention_heads_forward: shapes do not match");
  const bool concat = o.concat, has_bias = bias.extent(0) > 0;
  const int64_t first = o.col_begin, total = o.width;
  const Activation activation = o.activation;
  const DropoutMask dropout = o.dropout;
  const float inverse_heads = 1.0f / float(heads);
  // The team op: one column at a time, the formula as written.
  const auto team_op = KOKKOS_LAMBDA(int64_t i, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t g = first + c;
      float v = 0.0f;
      if (g < total) {
        if (concat) {
          v = y(i, g);
        } else {
          for (int64_t h = 0; h < heads; ++h) v += y(i, h * width + g);
          v *= inverse_heads;
        }
        if (has_bias) v += bias(c);
      }
      pre(i, c) = v;
      out(i, c) = g < total ? activate(v, activation) * (dropout.keep(i, c) ? dropout.scale() : 0.0f) : 0.0f;
    }
  };
  // The host op: the same sums in the same order, a loop per stage so that each vectorizes.
  const auto host_op = [=](int64_t i, int64_t c0, int64_t c1) {
    float* p = &pre(i, 0);
    float* q = &out(i, 0);
    const int64_t last = total - first < c1 ? (total - first > c0 ? total - first : c0) : c1;
    if (concat) {
      for (int64_t c = c0; c < last; ++c) p[c] = y(i, first + c);
    } else {
      for (int64_t c = c0; c < last; ++c) p[c] = 0.0f;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t c = c0; c < last; ++c) p[c] += y(i, h * width + first + c);
      for (int64_t c = c0; c < last; ++c) p[c] *= inverse_heads;
    }
    if (has_bias)
      for (int64_t c = c0; c < last; ++c) p[c] += bias(c);
    activate_run(p, q, c0, last, activation);
    if (dropout.active()) dropout_row(q, i, c0, last, dropout);
    for (int64_t c = last; c < c1; ++c) p[c] = 0.0f, q[c] = 0.0f;
  };
  impl::for_each_row_split(path, "tessera::attention_heads_forward", int64_t(y.extent(0)), cols, host_op,
                           team_op, impl::dropout_chunk(dropout));
}

void attention_heads_output_backward(const Matrix<float>& grad, const Matrix<const float>& pre,
                                     const HeadsOutput& o, KernelPath path) {
  require(grad.extent(0) == pre.extent(0) && grad.extent(1) == pre.extent(1),
          "attention_heads_output_backward: shapes do not match");
  const Activation activation = o.activation;
  const DropoutMask dropout = o.dropout;
  const int64_t first = o.col_begin, total = o.width;
  const auto team_op = KOKKOS_LAMBDA(int64_t i, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      grad(i, c) = first + c < total ? grad(i, c) * (dropout.keep(i, c) ? dropout.scale() : 0.0f) *
                                           activation_slope(pre(i, c), activation)
                                     : 0.0f;
  };
  const auto host_op = [=](int64_t i, int64_t c0, int64_t c1) {
    float* g = &grad(i, 0);
    const int64_t last = total - first < c1 ? (total - first > c0 ? total - first : c0) : c1;
    // g * factor * slope, in that order; an inactive mask's factor is 1 (exact).
    if (dropout.active()) dropout_row(g, i, c0, last, dropout);
    slope_run(&pre(i, 0), g, c0, last, activation);
    for (int64_t c = last; c < c1; ++c) g[c] = 0.0f;
  };
  impl::for_each_row_split(path, "tessera::attention_heads_output_backward", int64_t(grad.extent(0)),
                           int64_t(grad.extent(1)), host_op, team_op, impl::dropout_chunk(dropout));
}

void attention_heads_backward(const Matrix<const float>& g_out, const HeadsOutput& o,
                              const Matrix<float>& g_y, KernelPath path) {
  const int64_t zw = int64_t(g_y.extent(1)), heads = o.heads, width = o.concat ? zw : zw / heads;
  require(g_out.extent(0) == g_y.extent(0) && int64_t(g_out.extent(1)) >= (o.concat ? zw : width),
          "attention_heads_backward: shapes do not match");
  const bool concat = o.concat;
  const float inverse_heads = 1.0f / float(heads);
  impl::for_each_row(
      path, "tessera::attention_heads_backward", int64_t(g_y.extent(0)), zw,
      KOKKOS_LAMBDA(int64_t i, int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c)
          g_y(i, c) = concat ? g_out(i, c) : g_out(i, c % width) * inverse_heads;
      });
}

}  // namespace tessera
