// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the per-path GEMM kernels behind gemm() (one file per path). Shapes are checked by the
// caller and non-empty.
#pragma once

#include <algorithm>

#include "tessera/core/views.hpp"
#include "tessera/kernels/gemm.hpp"

namespace tessera::impl {

/// C is m x n, op(A) m x k, op(B) k x n.
struct GemmShape {
  int64_t m, n, k;
};

/// A row-major operand's leading dimension as BLAS and oneDNN take it (at least 1, also for no columns).
template <class T>
int64_t leading_dimension(const Matrix<T>& x) {
  return std::max<int64_t>(1, int64_t(x.extent(1)));
}

template <class Scalar>
void gemm_host(Trans ta, Trans tb, const GemmShape& s, Scalar alpha, const Matrix<const Scalar>& a,
               const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c);
template <class Scalar>
void gemm_team(Trans ta, Trans tb, const GemmShape& s, Scalar alpha, const Matrix<const Scalar>& a,
               const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c);

/// C = alpha op(A) op(B) + beta C in fp32 through oneDNN's sgemm (row-major, leading dimensions as BLAS takes
/// them), for the host path under HostGemmLibrary::OneDnn (gemm_onednn.cpp; throws in builds without oneDNN).
void gemm_onednn_f32(Trans ta, Trans tb, const GemmShape& s, float alpha, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
/// Bytes of partial products gemm_onednn_f32 keeps after C = A^T B of shape s (0: no split, or no oneDNN).
int64_t onednn_reduction_scratch_bytes(const GemmShape& s);
/// Whether the build has oneDNN (the fp32 sgemm runs on any CPU oneDNN supports; bf16 needs more).
bool onednn_built();

/// C = alpha op(A) op(B) + beta C with A and B rounded to bf16 and fp32 sums (oneDNN's matmul), for the host
/// path under GemmDtype::Bf16 (gemm_onednn.cpp; builds without oneDNN have a version that throws).
void gemm_bf16(Trans ta, Trans tb, const GemmShape& s, float alpha, const Matrix<const float>& a,
               const Matrix<const float>& b, float beta, const Matrix<float>& c);
/// gemm_bf16 with A already bf16 bits: only B is rounded (gemm_bf16_operand's host path).
void gemm_bf16_bits(Trans ta, Trans tb, const GemmShape& s, float alpha, const Matrix<const uint16_t>& a,
                    const Matrix<const float>& b, float beta, const Matrix<float>& c);
/// Whether gemm_bf16 runs here: the build has oneDNN and oneDNN has a bf16 matmul for this CPU.
bool bf16_gemm_runs();

}  // namespace tessera::impl
