// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the per-path GEMM kernels behind gemm() (one file per path). Shapes are checked by the
// caller and non-empty.
#pragma once

#include "tessera/core/views.hpp"
#include "tessera/kernels/gemm.hpp"

namespace tessera::impl {

/// C is m x n, op(A) m x k, op(B) k x n.
struct GemmShape {
  int64_t m, n, k;
};

template <class Scalar>
void gemm_host(Trans ta, Trans tb, const GemmShape& s, Scalar alpha, const Matrix<const Scalar>& a,
               const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c);
template <class Scalar>
void gemm_team(Trans ta, Trans tb, const GemmShape& s, Scalar alpha, const Matrix<const Scalar>& a,
               const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c);

}  // namespace tessera::impl
