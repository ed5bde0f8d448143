// SPDX-License-Identifier: BSD-3-Clause
// Dense matrix multiply on row-major matrices: C = alpha * op(A) * op(B) + beta * C, on the path the caller
// names (kernel_path.hpp): on the host path oneDNN's sgemm or BLAS (set_host_gemm_library; gemm_host.cpp,
// gemm_onednn.cpp), oneDNN on bf16-rounded operands under set_gemm_dtype(GemmDtype::Bf16); a Kokkos team
// kernel on the team path (gemm_team.cpp).
// Tests check every available path against a plain reference.
#pragma once

#include "tessera/core/views.hpp"
#include "tessera/kernels/kernel_path.hpp"

namespace tessera {

/// Whether an operand is used as stored or transposed.
enum class Trans {
  No,  ///< as stored
  Yes  ///< transposed
};

/// Call as gemm<float>(...): the scalar is explicit so views convert (non-const to const) freely.
template <class Scalar>
void gemm(Trans trans_a, Trans trans_b, Scalar alpha, const Matrix<const Scalar>& a,
          const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c,
          KernelPath path = KernelPath::Auto);

}  // namespace tessera
