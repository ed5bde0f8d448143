// SPDX-License-Identifier: BSD-3-Clause
// Fused element-wise steps of a layer and the column/row reductions that norms and bias gradients need,
// on the host or team path (impl/rows_host.hpp, impl/rows_team.hpp).
// Dropout masks are never stored: keep(i, j) is recomputed from the counter-based generator at the
// global coordinates (row_offset + i, col_offset + j), so every grid shape drops the same entries. A
// backward through ReLU then dropout draws no mask: the forward output says which entries were kept.
#pragma once

#include <cmath>
#include <cstdint>

#include "tessera/core/random.hpp"
#include "tessera/core/views.hpp"
#include "tessera/kernels/kernel_path.hpp"

namespace tessera {

/// Which entries of a block dropout keeps, recomputed on demand from global coordinates (a value
/// type captured by kernels; it owns no memory).
class DropoutMask {
 public:
  /// No dropout.
  DropoutMask() = default;
  /// Drops with probability `rate` under key (seed, stream); local (0, 0) is global (row_offset, col_offset).
  DropoutMask(float rate, uint64_t seed, uint64_t stream, int64_t row_offset = 0, int64_t col_offset = 0)
      : rate_(rate),
        rng_(seed, stream),
        threshold_(uint32_t(rate * 65536.0f)),
        row_offset_(row_offset),
        col_offset_(col_offset) {}

  /// Rows are not contiguous (a permuted layout): global row of local row i is row_ids(i).
  DropoutMask with_row_ids(Vector<const int64_t> row_ids) const {
    DropoutMask d = *this;
    d.row_ids_ = row_ids;
    return d;
  }

  /// Whether any entry can be dropped (rate > 0).
  KOKKOS_INLINE_FUNCTION bool active() const { return rate_ > 0.0f; }
  /// Global row of local row i.
  KOKKOS_INLINE_FUNCTION int64_t global_row(int64_t i) const {
    return row_ids_.extent(0) > 0 ? row_ids_(i) : row_offset_ + i;
  }
  /// Global row of local row 0 (contiguous layouts).
  KOKKOS_INLINE_FUNCTION int64_t row_offset() const { return row_offset_; }
  /// Global column of local column 0.
  KOKKOS_INLINE_FUNCTION int64_t col_offset() const { return col_offset_; }

  /// Keep bits of the 8 entries (row, 8*block .. 8*block+7) in global coordinates: one Philox block
  /// gives 8 uniform 16-bit draws; an entry is kept when its draw >= rate * 65536.
  KOKKOS_INLINE_FUNCTION unsigned keep8(int64_t global_row, int64_t global_col_block) const {
    const Philox4x32Block r = rng_.bits(uint64_t(global_row), uint64_t(global_col_block));
    unsigned mask = 0;
    for (int k = 0; k < 4; ++k) {
      mask |= unsigned((r.v[k] & 0xFFFFu) >= threshold_) << (2 * k);
      mask |= unsigned((r.v[k] >> 16) >= threshold_) << (2 * k + 1);
    }
    return mask;
  }
  /// keep8 of blocks first_block .. first_block + count - 1 of one global row as factors:
  /// factors[8 k + t] = scale() where bit t of keep8(global_row, first_block + k) is set, else 0.
  template <class Scalar>
  KOKKOS_INLINE_FUNCTION void keep_factors(int64_t global_row, int64_t first_block, int count,
                                           Scalar* factors) const {
    const Scalar kept = Scalar(scale());
    auto factors_of = [&](int k, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3) {
      const uint32_t w[4] = {w0, w1, w2, w3};
      for (int q = 0; q < 4; ++q) {
        factors[8 * k + 2 * q] = (w[q] & 0xFFFFu) >= threshold_ ? kept : Scalar(0);
        factors[8 * k + 2 * q + 1] = (w[q] >> 16) >= threshold_ ? kept : Scalar(0);
      }
    };
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    for (int k = 0; k < count; ++k) {
      const Philox4x32Block r = rng_.bits(uint64_t(global_row), uint64_t(first_block + k));
      factors_of(k, r.v[0], r.v[1], r.v[2], r.v[3]);
    }
#else
    // The host makes the blocks of a run in one vectorized pass (CounterRng::bits_run: AVX-512 where the
    // CPU has it, though the library is built for the baseline ISA).
    constexpr int kRun = 32;
    uint32_t words[4 * kRun];
    for (int k0 = 0; k0 < count; k0 += kRun) {
      const int n = count - k0 < kRun ? count - k0 : kRun;
      rng_.bits_run(uint64_t(global_row), uint64_t(first_block + k0), n, words);
      for (int k = 0; k < n; ++k)
        factors_of(k0 + k, words[k], words[n + k], words[2 * n + k], words[3 * n + k]);
    }
#endif
  }
  /// Whether local entry (i, j) is kept.
  KOKKOS_INLINE_FUNCTION bool keep(int64_t i, int64_t j) const {
    if (!active()) return true;
    const int64_t col = col_offset_ + j;
    return (keep8(global_row(i), col >> 3) >> (col & 7)) & 1u;
  }
  /// Factor a kept entry is multiplied by, 1 / (1 - rate).
  KOKKOS_INLINE_FUNCTION float scale() const {
    return active() ? 1.0f / (1.0f - rate_) : 1.0f;
  }

 private:
  float rate_ = 0.0f;
  CounterRng rng_{0, 0};
  uint32_t threshold_ = 0;
  int64_t row_offset_ = 0, col_offset_ = 0;
  Vector<const int64_t> row_ids_;
};

/// Host code applies a row's dropout this many mask blocks (8 columns each) at a time: the blocks' factors
/// first (the Philox blocks are independent, so they overlap in the pipeline), then one loop over the
/// columns that the compiler vectorizes. Applying each block's bits within the block's own 8-column loop
/// kept both scalar: 3.1 ns per entry for BatchNorm's apply with dropout, against 1 ns of Philox.
constexpr int kDropoutRun = 32;

/// Calls run(j0, j1, factor) for consecutive pieces [j0, j1) of local columns [lo, hi) of local row i,
/// factor(j) giving dropout.scale() or 0 for column j of the piece (keep8's bits).
template <class Scalar, class Run>
KOKKOS_INLINE_FUNCTION void for_dropout_runs(const DropoutMask& dropout, int64_t i, int64_t lo, int64_t hi,
                                             const Run& run) {
  const int64_t c0 = dropout.col_offset(), last_block = (c0 + hi + 7) >> 3;
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  // A device thread holds one block's eight factors (the team path gives a lane 8 columns).
  constexpr int run_blocks = 1;
#else
  constexpr int run_blocks = kDropoutRun;
#endif
  Scalar factors[8 * run_blocks];
  for (int64_t b0 = (c0 + lo) >> 3; b0 < last_block; b0 += run_blocks) {
    const int count = int(last_block - b0 < run_blocks ? last_block - b0 : run_blocks);
    dropout.keep_factors(dropout.global_row(i), b0, count, factors);
    const int64_t base = b0 * 8 - c0;  // the local column of factors[0]
    run(base < lo ? lo : base, base + 8 * count < hi ? base + 8 * count : hi,
        [&](int64_t j) { return factors[j - base]; });
  }
}

/// The activation epilogue of columns [j0, j1) of one row, shared by every kernel that ends in it so they
/// agree bit for bit: row[j] = dropout(relu?(value(j))), one Philox block per 8 global columns.
/// ReLU is max(v, floor) with floor 0 or -inf, not `relu && v < 0`: the short-circuit compiled to a branch
/// on the sign, mispredicted half the time, and that made BatchNorm's apply 19% of a sampled training step.
/// NaN and -0 pass through unchanged either way.
template <class Scalar, class Value>
KOKKOS_INLINE_FUNCTION void relu_dropout_row(Scalar* KOKKOS_RESTRICT row, int64_t i, int64_t j0, int64_t j1,
                                             bool relu, const DropoutMask& dropout, const Value& value) {
  const Scalar floor = relu ? Scalar(0) : -Scalar(INFINITY);
  if (!dropout.active()) {
    for (int64_t j = j0; j < j1; ++j) {
      const Scalar v = value(j);
      row[j] = v < floor ? floor : v;
    }
    return;
  }
  for_dropout_runs<Scalar>(dropout, i, j0, j1, [&](int64_t lo, int64_t hi, const auto& factor) {
    for (int64_t j = lo; j < hi; ++j) {
      const Scalar v = value(j);
      row[j] = (v < floor ? floor : v) * factor(j);
    }
  });
}

/// In place: row[j] *= dropout's factor (scale() or 0) for columns [j0, j1) of local row i.
/// The pointer is copied into the piece's own restrict local and the factor is read before it is selected:
/// through the closure's references (which the stores might alias) and with a conditional read, the loop
/// stayed scalar with a branch, 2.7x the forward's time.
template <class Scalar>
KOKKOS_INLINE_FUNCTION void dropout_row(Scalar* KOKKOS_RESTRICT row, int64_t i, int64_t j0, int64_t j1,
                                        const DropoutMask& dropout) {
  for_dropout_runs<Scalar>(dropout, i, j0, j1, [row](int64_t lo, int64_t hi, const auto& factor) {
    Scalar* KOKKOS_RESTRICT out = row;
    for (int64_t j = lo; j < hi; ++j) out[j] = out[j] * factor(j);
  });
}

/// The backward of relu_dropout_row on columns [j0, j1): g[j] *= the derivative, read off the forward
/// output o (with ReLU, the dropout factor too; without, from the mask).
template <class Scalar>
KOKKOS_INLINE_FUNCTION void relu_dropout_row_backward(Scalar* KOKKOS_RESTRICT g,
                                                      const Scalar* KOKKOS_RESTRICT o, int64_t i, int64_t j0,
                                                      int64_t j1, bool relu, const DropoutMask& dropout) {
  if (!dropout.active()) {
    if (relu)
      for (int64_t j = j0; j < j1; ++j) g[j] = o[j] > Scalar(0) ? g[j] : Scalar(0);
    return;
  }
  if (relu) {
    // After ReLU the output is positive exactly where the entry was kept and its pre-activation positive
    // (a dropped entry's output is 0, or NaN), so the factor is read off the output and no mask block is
    // drawn: the same product g * (scale or 0) as the mask gives, the same bits.
    const Scalar kept = Scalar(dropout.scale());
    Scalar* KOKKOS_RESTRICT out = g;
    const Scalar* KOKKOS_RESTRICT forward = o;
    for (int64_t j = j0; j < j1; ++j) out[j] = out[j] * (forward[j] > Scalar(0) ? kept : Scalar(0));
    return;
  }
  // Without ReLU a kept entry's output may be 0 or negative: the mask is drawn again.
  dropout_row(g, i, j0, j1, dropout);
}

/// In place: y = dropout(relu?(y + bias)). `bias` may be empty.
template <class Scalar>
void bias_relu_dropout_forward(const Matrix<Scalar>& y, const Vector<const Scalar>& bias, bool relu,
                               const DropoutMask& dropout, KernelPath path = KernelPath::Auto);

/// In place: turns dL/d(out) into dL/d(pre-activation), given the forward output `out`.
template <class Scalar>
void bias_relu_dropout_backward(const Matrix<Scalar>& grad, const Matrix<const Scalar>& out, bool relu,
                                const DropoutMask& dropout, KernelPath path = KernelPath::Auto);

/// Fused backward epilogue + reduction: grad = bias_relu_dropout_backward(grad, out) and sums(j) =
/// sum_i grad(i, j) of the result, in one pass over grad (same values and order as the two calls).
template <class Scalar>
void relu_dropout_backward_column_sums(const Matrix<Scalar>& grad, const Matrix<const Scalar>& out, bool relu,
                                       const DropoutMask& dropout, const Vector<Scalar>& sums,
                                       KernelPath path = KernelPath::Auto);

/// sums(j) = sum_i x(i, j) (and sums_sq(j) = sum_i x(i, j)^2 when not empty); sequential per column,
/// so the result does not depend on the thread count.
template <class Scalar>
void column_sums(const Matrix<const Scalar>& x, const Vector<Scalar>& sums, const Vector<Scalar>& sums_sq,
                 KernelPath path = KernelPath::Auto);

/// sums_sq(j) = sum_i (x(i, j) - mean(j))^2: the centered second moment, which does not cancel when
/// |mean| >> the spread as sum x^2 - n mean^2 does.
template <class Scalar>
void column_centered_sums_sq(const Matrix<const Scalar>& x, const Vector<const Scalar>& mean,
                             const Vector<Scalar>& sums_sq, KernelPath path = KernelPath::Auto);

/// sums(j) = sum_i a(i, j) * b(i, j).
template <class Scalar>
void column_dot(const Matrix<const Scalar>& a, const Matrix<const Scalar>& b, const Vector<Scalar>& sums,
                KernelPath path = KernelPath::Auto);

/// sums_sq(i) = sum_j x(i, j)^2.
template <class Scalar>
void row_sums_sq(const Matrix<const Scalar>& x, const Vector<Scalar>& sums_sq,
                 KernelPath path = KernelPath::Auto);

/// sums(i) = sum_j a(i, j) * b(i, j).
template <class Scalar>
void row_dot(const Matrix<const Scalar>& a, const Matrix<const Scalar>& b, const Vector<Scalar>& sums,
             KernelPath path = KernelPath::Auto);

/// y(i, j) = x(i, j) * row_scale(i) (row_scale may be empty) * col_scale(j) (may be empty) + col_shift(j)
/// (may be empty). The shared step of batch norm, RMS norm and feature normalization.
template <class Scalar>
void scale_shift(const Matrix<const Scalar>& x, const Vector<const Scalar>& row_scale,
                 const Vector<const Scalar>& col_scale, const Vector<const Scalar>& col_shift,
                 const Matrix<Scalar>& y, KernelPath path = KernelPath::Auto);

/// y = a * x + b * y, element-wise on equal shapes.
template <class Scalar>
void axpby(Scalar a, const Matrix<const Scalar>& x, Scalar b, const Matrix<Scalar>& y,
           KernelPath path = KernelPath::Auto);

/// out(i, j) = the float of the bf16 bits bits(i, j) (exact), on equal shapes, on the execution space.
void widen_bf16(const Matrix<const uint16_t>& bits, const Matrix<float>& out);
/// bits(i, j) = x(i, j) rounded to bf16 (to_bf16: nearest, ties to even), on equal shapes, on the
/// execution space.
void round_to_bf16(const Matrix<const float>& x, const Matrix<uint16_t>& bits);

}  // namespace tessera
