// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the per-path SpMM kernels behind CsrSpmm::apply_rows (one file per path).
#pragma once

#include "tessera/core/bf16.hpp"
#include "tessera/core/csr.hpp"
#include "tessera/core/views.hpp"
#include "tessera/kernels/spmm.hpp"

namespace tessera::impl {

/// One product's arguments: rows [row_begin, row_end) of y = alpha A x + beta y, visiting the balanced
/// row blocks [first_block, last_block) that intersect the range. Entry (i, j) of A weighs its value, one
/// for a pattern, or scaled_weight(row_scale(i), col_scale(j)) when either scale is not empty (an empty
/// one: ones); every path forms the weight the same way, then alpha * weight.
template <class Scalar>
struct SpmmCall {
  CsrMatrix<Scalar, DeviceSpace, SpmmColumn> a;
  Vector<const double> row_scale, col_scale;
  Vector<const int64_t> block_start;
  int64_t first_block, last_block, row_begin, row_end;
  Scalar alpha, beta;
};

/// An entry of X as the number it stands for: itself, or bf16 bits (uint16_t) widened to fp32 (exact).
KOKKOS_INLINE_FUNCTION float stored_value(float v) {
  return v;
}
KOKKOS_INLINE_FUNCTION double stored_value(double v) {
  return v;
}
KOKKOS_INLINE_FUNCTION float stored_value(uint16_t bits) {
  return from_bf16(bits);
}

/// In: X's entries, Scalar or bf16 bits (Scalar float), widened as they are read; sums in Scalar.
template <class Scalar, class In = Scalar>
void spmm_host(const SpmmCall<Scalar>& call, const Matrix<const In>& x, const Matrix<Scalar>& y);
template <class Scalar, class In = Scalar>
void spmm_team(const SpmmCall<Scalar>& call, const Matrix<const In>& x, const Matrix<Scalar>& y);

}  // namespace tessera::impl
