// SPDX-License-Identifier: BSD-3-Clause
// Each kernel is one op(i, j0, j1) over the columns [j0, j1) of row i (heads or features), launched on the
// host path (a row per task, its columns in one loop) or the team path (an entry per thread) by
// impl::for_each_row. Sums over a row's entries run in storage order inside op on both paths, so the two
// give the same bits.
#include "tessera/kernels/attention.hpp"

#include <cmath>

#include "impl/rows.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/scratch.hpp"

namespace tessera {

namespace {

KOKKOS_INLINE_FUNCTION float leaky_relu(float x, float slope) {
  return x > 0.0f ? x : slope * x;
}

KOKKOS_INLINE_FUNCTION float leaky_relu_slope(float x, float slope) {
  return x > 0.0f ? 1.0f : slope;
}

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

void attention_row_max(const AttentionBlock& a, const Matrix<const float>& dst,
                       const Matrix<const float>& src, const Matrix<float>& row_max, KernelPath path) {
  check_heads(a, dst, a.forward.num_rows, "dst");
  check_heads(a, src, a.forward.num_cols, "src");
  const auto rp = a.forward.row_ptr;
  const auto ci = a.forward.col_idx;
  const float slope = a.negative_slope;
  impl::for_each_row(
      path, "tessera::attention_row_max", a.forward.num_rows, a.heads,
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
  const auto ci = a.forward.col_idx;
  const float slope = a.negative_slope;
  impl::for_each_row(
      path, "tessera::attention_exponentials", a.forward.num_rows, a.heads,
      KOKKOS_LAMBDA(int64_t i, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          float sum = 0.0f;
          for (int64_t e = rp(i); e < rp(i + 1); ++e) {
            const float x = ::expf(leaky_relu(dst(i, h) + src(ci(e), h), slope) - row_max(i, h));
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
  impl::for_each_row(
      path, "tessera::attention_normalize", a.forward.num_rows, a.heads,
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
  impl::for_each_row(
      path, "tessera::attention_aggregate", a.forward.num_rows, cols,
      KOKKOS_LAMBDA(int64_t i, int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) y(i, c) = 0.0f;
        for (int64_t e = rp(i); e < rp(i + 1); ++e) {
          const int64_t j = ci(e);
          for (int64_t c = c0; c < c1; ++c) {
            const int64_t h = c / width;
            y(i, c) += alpha(e, h) * dropout.factor(i, j, h) * z(j, c);
          }
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
  impl::for_each_row(
      path, "tessera::attention_aggregate_transpose", a.transpose.num_rows, cols,
      KOKKOS_LAMBDA(int64_t j, int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) g_z(j, c) = 0.0f;
        for (int64_t t = rp(j); t < rp(j + 1); ++t) {
          const int64_t i = ci(t), e = where(t);
          for (int64_t c = c0; c < c1; ++c) {
            const int64_t h = c / width;
            g_z(j, c) += alpha(e, h) * dropout.factor(i, j, h) * g_y(i, c);
          }
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
  impl::for_each_row(
      path, "tessera::attention_edge_gradients", a.forward.num_rows, a.heads,
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
  impl::for_each_row(
      path, "tessera::attention_score_gradients", a.forward.num_rows, a.heads,
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
  const auto where = a.where;
  impl::for_each_row(
      path, "tessera::attention_source_gradients", a.transpose.num_rows, a.heads,
      KOKKOS_LAMBDA(int64_t j, int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
          float sum = 0.0f;
          for (int64_t t = rp(j); t < rp(j + 1); ++t) sum += g_score(where(t), h);
          g_src(j, h) = sum;
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
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t h = c / width, f = c - h * width;
          g_z(n, c) += g_src(n, h) * att_src(h, f) + g_dst(n, h) * att_dst(h, f);
        }
      });
  // Column sums in the fixed blocks of impl::reduce_columns: [src terms | dst terms], 2 H F columns, on
  // scratch rather than an allocation per layer and step.
  const Vector<float> sums = scratch_vector<float>("attention.g_att", size_t(2 * cols));
  impl::reduce_columns<float>(
      path, "tessera::attention_att_gradients", rows, 2 * cols, sums,
      KOKKOS_LAMBDA(int64_t n, int64_t c0, int64_t c1, float* acc) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t k = c < cols ? c : c - cols, h = k / width;
          acc[c - c0] += (c < cols ? g_src(n, h) : g_dst(n, h)) * z(n, k);
        }
      });
  const Matrix<float> src_sums(sums.data(), size_t(heads), size_t(width));
  const Matrix<float> dst_sums(sums.data() + cols, size_t(heads), size_t(width));
  Kokkos::deep_copy(g_att_src, src_sums);
  Kokkos::deep_copy(g_att_dst, dst_sums);
}

namespace {

KOKKOS_INLINE_FUNCTION float activate(float x, Activation activation) {
  if (activation == Activation::Relu) return x > 0.0f ? x : 0.0f;
  if (activation == Activation::Elu) return x > 0.0f ? x : ::expm1f(x);
  return x;
}

KOKKOS_INLINE_FUNCTION float activation_slope(float x, Activation activation) {
  if (activation == Activation::Relu) return x > 0.0f ? 1.0f : 0.0f;
  if (activation == Activation::Elu) return x > 0.0f ? 1.0f : ::expf(x);
  return 1.0f;
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
  impl::for_each_row(
      path, "tessera::attention_heads_forward", int64_t(y.extent(0)), cols,
      KOKKOS_LAMBDA(int64_t i, int64_t c0, int64_t c1) {
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
          out(i, c) =
              g < total ? activate(v, activation) * (dropout.keep(i, c) ? dropout.scale() : 0.0f) : 0.0f;
        }
      },
      impl::dropout_chunk(dropout));
}

void attention_heads_output_backward(const Matrix<float>& grad, const Matrix<const float>& pre,
                                     const HeadsOutput& o, KernelPath path) {
  require(grad.extent(0) == pre.extent(0) && grad.extent(1) == pre.extent(1),
          "attention_heads_output_backward: shapes do not match");
  const Activation activation = o.activation;
  const DropoutMask dropout = o.dropout;
  const int64_t first = o.col_begin, total = o.width;
  impl::for_each_row(
      path, "tessera::attention_heads_output_backward", int64_t(grad.extent(0)), int64_t(grad.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c)
          grad(i, c) = first + c < total ? grad(i, c) * (dropout.keep(i, c) ? dropout.scale() : 0.0f) *
                                               activation_slope(pre(i, c), activation)
                                         : 0.0f;
      },
      impl::dropout_chunk(dropout));
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
