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

/// gemm<float> with A held as bf16 bits (an activation kept in bf16), equal to gemm<float> on A widened.
/// Where gemm<float> rounds its operands to bf16 itself (gemm_reads_bf16_bits), oneDNN reads the bits as
/// they are: no widening pass and no rounding pass for A. Elsewhere A is widened into `widened` (A's
/// extents, fp32, which it overwrites) and gemm<float> runs on it.
void gemm_bf16_operand(Trans trans_a, Trans trans_b, float alpha, const Matrix<const uint16_t>& a,
                       const Matrix<const float>& b, float beta, const Matrix<float>& c,
                       const Matrix<float>& widened, KernelPath path = KernelPath::Auto);

/// Whether gemm_bf16_operand on `path` reads bf16 bits without widening them: the host path under
/// GemmDtype::Bf16 (set_gemm_dtype).
bool gemm_reads_bf16_bits(KernelPath path = KernelPath::Auto);

}  // namespace tessera
