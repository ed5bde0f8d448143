// SPDX-License-Identifier: BSD-3-Clause
// Dense matrix multiply on row-major matrices: C = alpha * op(A) * op(B) + beta * C. One entry point:
// host memory goes to BLAS (OpenBLAS), device memory to a portable Kokkos kernel (cuBLAS replaces it on
// CUDA builds). Tests check both against a plain reference.
#pragma once

#include "tessera/core/views.hpp"

namespace tessera {

enum class Trans { No, Yes };

/// Call as gemm<float>(...): the scalar is explicit so views convert (non-const to const) freely.
template <class Scalar>
void gemm(Trans trans_a, Trans trans_b, Scalar alpha, const Matrix<const Scalar>& a,
          const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c);

/// The portable Kokkos kernel behind gemm for non-host memory; callable on the host too (tests compare it).
template <class Scalar>
void gemm_kokkos(Trans trans_a, Trans trans_b, Scalar alpha, const Matrix<const Scalar>& a,
                 const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c);

}  // namespace tessera
