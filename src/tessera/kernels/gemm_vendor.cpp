// SPDX-License-Identifier: BSD-3-Clause
// GEMM, vendor path on CUDA builds: cuBLAS. cuBLAS is column-major; a row-major C = op(A) op(B) is the
// column-major C^T = op(B)^T op(A)^T, so the operands swap places and keep their transpose flags.
// fp32 stays fp32 unless set_vendor_tf32(true). Compiled only with TESSERA_VENDOR_CUDA.
#include <cublas_v2.h>

#include "impl/vendor.hpp"
#include "impl/vendor_handles.hpp"

namespace tessera::impl {

namespace {
cublasOperation_t op(Trans t) {
  return t == Trans::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// The row length of a row-major operand: cuBLAS's leading dimension of its column-major transpose.
template <class View>
int64_t leading_dimension(const View& m) {
  return std::max<int64_t>(1, int64_t(m.stride(0)));
}

cublasStatus_t call(Trans ta, Trans tb, const GemmShape& s, const float* alpha, const float* a, int64_t lda,
                    const float* b, int64_t ldb, const float* beta, float* c, int64_t ldc) {
  return cublasSgemm_64(cublas(), op(tb), op(ta), s.n, s.m, s.k, alpha, b, ldb, a, lda, beta, c, ldc);
}

cublasStatus_t call(Trans ta, Trans tb, const GemmShape& s, const double* alpha, const double* a, int64_t lda,
                    const double* b, int64_t ldb, const double* beta, double* c, int64_t ldc) {
  return cublasDgemm_64(cublas(), op(tb), op(ta), s.n, s.m, s.k, alpha, b, ldb, a, lda, beta, c, ldc);
}
}  // namespace

template <class Scalar>
void gemm_vendor(Trans ta, Trans tb, const GemmShape& s, Scalar alpha, const Matrix<const Scalar>& a,
                 const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c) {
  check_cublas(call(ta, tb, s, &alpha, a.data(), leading_dimension(a), b.data(), leading_dimension(b), &beta,
                    c.data(), leading_dimension(c)),
               "cublasGemm");
}

template void gemm_vendor<float>(Trans, Trans, const GemmShape&, float, const Matrix<const float>&,
                                 const Matrix<const float>&, float, const Matrix<float>&);
template void gemm_vendor<double>(Trans, Trans, const GemmShape&, double, const Matrix<const double>&,
                                  const Matrix<const double>&, double, const Matrix<double>&);

}  // namespace tessera::impl
