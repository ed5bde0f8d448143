// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/elementwise.hpp"

#include "impl/rows.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

// DropoutMask kernels visit each row in groups of the 8 columns that share one random block, so one Philox
// evaluation serves 8 entries; the row is addressed through a raw pointer with everything else in locals,
// which lets the compiler keep the loop in registers (3x faster than per-entry View access here). On the
// team path a lane takes those 8 columns only while dropout is on; otherwise lanes take neighbouring
// entries, which coalesces (8 columns per lane made bias_relu_dropout 5x slower than memory on an H100).

namespace {
// y = dropout(relu?(y + bias)) with the bias's presence a compile-time constant and the bias a plain
// pointer: written as `has_bias ? bias(j) : 0` over the View, the host compiler kept the loop scalar (the
// read behind a runtime condition, the pointer in memory the row's stores might change), 2.4x the memory
// time of the pass on the arxiv-shaped step. Without a bias it still adds +0 (-0 becomes +0 either way).
template <bool HasBias, class Scalar>
void bias_relu_dropout_rows(const Matrix<Scalar>& y, const Scalar* bias, bool relu,
                            const DropoutMask& dropout, KernelPath path) {
  impl::for_each_row(
      path, HasBias ? "tessera::bias_relu_dropout" : "tessera::relu_dropout", int64_t(y.extent(0)),
      int64_t(y.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        Scalar* KOKKOS_RESTRICT row = &y(i, 0);
        const Scalar* KOKKOS_RESTRICT b = bias;
        relu_dropout_row(row, i, j0, j1, relu, dropout,
                         [=](int64_t j) { return row[j] + (HasBias ? b[j] : Scalar(0)); });
      },
      impl::dropout_chunk(dropout));
}
}  // namespace

template <class Scalar>
void bias_relu_dropout_forward(const Matrix<Scalar>& y, const Vector<const Scalar>& bias, bool relu,
                               const DropoutMask& dropout, KernelPath path) {
  if (bias.extent(0) > 0)
    bias_relu_dropout_rows<true>(y, bias.data(), relu, dropout, path);
  else
    bias_relu_dropout_rows<false>(y, static_cast<const Scalar*>(nullptr), relu, dropout, path);
}

template <class Scalar>
void bias_relu_dropout_backward(const Matrix<Scalar>& grad, const Matrix<const Scalar>& out, bool relu,
                                const DropoutMask& dropout, KernelPath path) {
  impl::for_each_row(
      path, "tessera::bias_relu_dropout_backward", int64_t(grad.extent(0)), int64_t(grad.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        relu_dropout_row_backward(&grad(i, 0), &out(i, 0), i, j0, j1, relu, dropout);
      },
      impl::dropout_chunk(dropout));
}

template <class Scalar>
void column_sums(const Matrix<const Scalar>& x, const Vector<Scalar>& sums, const Vector<Scalar>& sums_sq,
                 KernelPath path) {
  const int64_t rows = int64_t(x.extent(0)), cols = int64_t(x.extent(1));
  impl::reduce_columns(
      path, "tessera::column_sums", rows, cols, sums,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, Scalar * acc) {
        const Scalar* row = &x(i, 0);
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += row[j];
      });
  if (sums_sq.extent(0) > 0)
    impl::reduce_columns(
        path, "tessera::column_sums_sq", rows, cols, sums_sq,
        KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, Scalar * acc) {
          const Scalar* row = &x(i, 0);
          for (int64_t j = j0; j < j1; ++j) acc[j - j0] += row[j] * row[j];
        });
}

template <class Scalar>
void column_centered_sums_sq(const Matrix<const Scalar>& x, const Vector<const Scalar>& mean,
                             const Vector<Scalar>& sums_sq, KernelPath path) {
  impl::reduce_columns(
      path, "tessera::column_centered_sums_sq", int64_t(x.extent(0)), int64_t(x.extent(1)), sums_sq,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, Scalar * acc) {
        const Scalar* row = &x(i, 0);
        for (int64_t j = j0; j < j1; ++j) {
          const Scalar d = row[j] - mean(j);
          acc[j - j0] += d * d;
        }
      });
}

template <class Scalar>
void relu_dropout_backward_column_sums(const Matrix<Scalar>& grad, const Matrix<const Scalar>& out, bool relu,
                                       const DropoutMask& dropout, const Vector<Scalar>& sums,
                                       KernelPath path) {
  // The column reduction visits every entry exactly once, so the row can be rewritten where it is summed.
  impl::reduce_columns(
      path, "tessera::relu_dropout_backward_column_sums", int64_t(grad.extent(0)), int64_t(grad.extent(1)),
      sums,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, Scalar * acc) {
        Scalar* g = &grad(i, 0);
        relu_dropout_row_backward(g, &out(i, 0), i, j0, j1, relu, dropout);
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += g[j];
      },
      impl::dropout_chunk(dropout));
}

template <class Scalar>
void column_dot(const Matrix<const Scalar>& a, const Matrix<const Scalar>& b, const Vector<Scalar>& sums,
                KernelPath path) {
  impl::reduce_columns(
      path, "tessera::column_dot", int64_t(a.extent(0)), int64_t(a.extent(1)), sums,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, Scalar * acc) {
        const Scalar* ra = &a(i, 0);
        const Scalar* rb = &b(i, 0);
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += ra[j] * rb[j];
      });
}

template <class Scalar>
void row_sums_sq(const Matrix<const Scalar>& x, const Vector<Scalar>& sums_sq, KernelPath path) {
  impl::reduce_rows(
      path, "tessera::row_sums_sq", int64_t(x.extent(0)), int64_t(x.extent(1)), sums_sq,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        Scalar q = 0;
        for (int64_t j = j0; j < j1; ++j) q += x(i, j) * x(i, j);
        return q;
      });
}

template <class Scalar>
void row_dot(const Matrix<const Scalar>& a, const Matrix<const Scalar>& b, const Vector<Scalar>& sums,
             KernelPath path) {
  impl::reduce_rows(
      path, "tessera::row_dot", int64_t(a.extent(0)), int64_t(a.extent(1)), sums,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        Scalar s = 0;
        for (int64_t j = j0; j < j1; ++j) s += a(i, j) * b(i, j);
        return s;
      });
}

template <class Scalar>
void scale_shift(const Matrix<const Scalar>& x, const Vector<const Scalar>& row_scale,
                 const Vector<const Scalar>& col_scale, const Vector<const Scalar>& col_shift,
                 const Matrix<Scalar>& y, KernelPath path) {
  const bool rs = row_scale.extent(0) > 0, cs = col_scale.extent(0) > 0, sh = col_shift.extent(0) > 0;
  impl::for_each_row(
      path, "tessera::scale_shift", int64_t(x.extent(0)), int64_t(x.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
          Scalar v = x(i, j);
          if (rs) v *= row_scale(i);
          if (cs) v *= col_scale(j);
          if (sh) v += col_shift(j);
          y(i, j) = v;
        }
      });
}

template <class Scalar>
void axpby(Scalar a, const Matrix<const Scalar>& x, Scalar b, const Matrix<Scalar>& y, KernelPath path) {
  impl::for_each_row(
      path, "tessera::axpby", int64_t(x.extent(0)), int64_t(x.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) y(i, j) = a * x(i, j) + (b == Scalar(0) ? Scalar(0) : b * y(i, j));
      });
}

#define TESSERA_INSTANTIATE(S)                                                                               \
  template void bias_relu_dropout_forward<S>(const Matrix<S>&, const Vector<const S>&, bool,                 \
                                             const DropoutMask&, KernelPath);                                \
  template void bias_relu_dropout_backward<S>(const Matrix<S>&, const Matrix<const S>&, bool,                \
                                              const DropoutMask&, KernelPath);                               \
  template void column_sums<S>(const Matrix<const S>&, const Vector<S>&, const Vector<S>&, KernelPath);      \
  template void column_centered_sums_sq<S>(const Matrix<const S>&, const Vector<const S>&, const Vector<S>&, \
                                           KernelPath);                                                      \
  template void relu_dropout_backward_column_sums<S>(const Matrix<S>&, const Matrix<const S>&, bool,         \
                                                     const DropoutMask&, const Vector<S>&, KernelPath);      \
  template void column_dot<S>(const Matrix<const S>&, const Matrix<const S>&, const Vector<S>&, KernelPath); \
  template void row_sums_sq<S>(const Matrix<const S>&, const Vector<S>&, KernelPath);                        \
  template void row_dot<S>(const Matrix<const S>&, const Matrix<const S>&, const Vector<S>&, KernelPath);    \
  template void scale_shift<S>(const Matrix<const S>&, const Vector<const S>&, const Vector<const S>&,       \
                               const Vector<const S>&, const Matrix<S>&, KernelPath);                        \
  template void axpby<S>(S, const Matrix<const S>&, S, const Matrix<S>&, KernelPath);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

void widen_bf16(const Matrix<const uint16_t>& bits, const Matrix<float>& out) {
  require(bits.extent(0) == out.extent(0) && bits.extent(1) == out.extent(1), "widen_bf16: ", bits.extent(0),
          "x", bits.extent(1), " bits into ", out.extent(0), "x", out.extent(1));
  const int64_t width = int64_t(bits.extent(1)), entries = int64_t(bits.extent(0)) * width;
  if (bits.span_is_contiguous() && out.span_is_contiguous()) {
    // One flat pass (a division per entry to find its row kept the host loop from vectorizing: 3x slower).
    const uint16_t* from = bits.data();
    float* to = out.data();
    Kokkos::parallel_for(
        "tessera::widen_bf16", Kokkos::RangePolicy<ExecSpace>(0, entries),
        KOKKOS_LAMBDA(int64_t e) { to[e] = from_bf16(from[e]); });
    return;
  }
  Kokkos::parallel_for(
      "tessera::widen_bf16", Kokkos::RangePolicy<ExecSpace>(0, entries),
      KOKKOS_LAMBDA(int64_t e) { out(e / width, e % width) = from_bf16(bits(e / width, e % width)); });
}

void round_to_bf16(const Matrix<const float>& x, const Matrix<uint16_t>& bits) {
  require(bits.extent(0) == x.extent(0) && bits.extent(1) == x.extent(1), "round_to_bf16: ", x.extent(0), "x",
          x.extent(1), " values into ", bits.extent(0), "x", bits.extent(1));
  const int64_t width = int64_t(x.extent(1)), entries = int64_t(x.extent(0)) * width;
  if (bits.span_is_contiguous() && x.span_is_contiguous()) {
    const float* from = x.data();
    uint16_t* to = bits.data();
    Kokkos::parallel_for(
        "tessera::round_to_bf16", Kokkos::RangePolicy<ExecSpace>(0, entries),
        KOKKOS_LAMBDA(int64_t e) { to[e] = to_bf16(from[e]); });
    return;
  }
  Kokkos::parallel_for(
      "tessera::round_to_bf16", Kokkos::RangePolicy<ExecSpace>(0, entries),
      KOKKOS_LAMBDA(int64_t e) { bits(e / width, e % width) = to_bf16(x(e / width, e % width)); });
}

}  // namespace tessera
