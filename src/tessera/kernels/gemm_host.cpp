// SPDX-License-Identifier: BSD-3-Clause
// GEMM, host path: oneDNN's sgemm or BLAS (OpenBLAS's OpenMP build) for fp32 (set_host_gemm_library), BLAS
// for double; both run on OpenMP, so their threads are Kokkos' threads.
#include <cblas.h>

#include <type_traits>

#include "impl/gemm_kernels.hpp"

namespace tessera::impl {

namespace {
void blas(Trans ta, Trans tb, const GemmShape& s, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta == Trans::No ? CblasNoTrans : CblasTrans,
              tb == Trans::No ? CblasNoTrans : CblasTrans, int(s.m), int(s.n), int(s.k), alpha, a, int(lda),
              b, int(ldb), beta, c, int(ldc));
}

void blas(Trans ta, Trans tb, const GemmShape& s, double alpha, const double* a, int64_t lda, const double* b,
          int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta == Trans::No ? CblasNoTrans : CblasTrans,
              tb == Trans::No ? CblasNoTrans : CblasTrans, int(s.m), int(s.n), int(s.k), alpha, a, int(lda),
              b, int(ldb), beta, c, int(ldc));
}
}  // namespace

template <class Scalar>
void gemm_host(Trans ta, Trans tb, const GemmShape& s, Scalar alpha, const Matrix<const Scalar>& a,
               const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c) {
  Kokkos::fence();  // BLAS runs outside Kokkos: earlier kernels must have finished
  if constexpr (std::is_same<Scalar, float>::value) {
    if (gemm_dtype() == GemmDtype::Bf16) return gemm_bf16(ta, tb, s, alpha, a, b, beta, c);
    if (host_gemm_library() == HostGemmLibrary::OneDnn)
      return gemm_onednn_f32(ta, tb, s, alpha, a.data(), leading_dimension(a), b.data(), leading_dimension(b),
                             beta, c.data(), leading_dimension(c));
  }
  blas(ta, tb, s, alpha, a.data(), leading_dimension(a), b.data(), leading_dimension(b), beta, c.data(),
       leading_dimension(c));
}

template void gemm_host<float>(Trans, Trans, const GemmShape&, float, const Matrix<const float>&,
                               const Matrix<const float>&, float, const Matrix<float>&);
template void gemm_host<double>(Trans, Trans, const GemmShape&, double, const Matrix<const double>&,
                                const Matrix<const double>&, double, const Matrix<double>&);

}  // namespace tessera::impl
