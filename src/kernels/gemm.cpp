// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/gemm.hpp"

#include <cblas.h>

#include <type_traits>

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

struct Shape {
  int64_t m, n, k;
};

template <class Scalar, class Space>
Shape check_shapes(Trans ta, Trans tb, const Matrix<const Scalar, Space>& a,
                   const Matrix<const Scalar, Space>& b, const Matrix<Scalar, Space>& c) {
  const int64_t m = int64_t(ta == Trans::No ? a.extent(0) : a.extent(1));
  const int64_t k = int64_t(ta == Trans::No ? a.extent(1) : a.extent(0));
  const int64_t kb = int64_t(tb == Trans::No ? b.extent(0) : b.extent(1));
  const int64_t n = int64_t(tb == Trans::No ? b.extent(1) : b.extent(0));
  require(k == kb && int64_t(c.extent(0)) == m && int64_t(c.extent(1)) == n, "gemm: op(A) is ", m, "x", k,
          ", op(B) is ", kb, "x", n, ", C is ", c.extent(0), "x", c.extent(1));
  return {m, n, k};
}

void blas(Trans ta, Trans tb, const Shape& s, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta == Trans::No ? CblasNoTrans : CblasTrans,
              tb == Trans::No ? CblasNoTrans : CblasTrans, int(s.m), int(s.n), int(s.k), alpha, a, int(lda),
              b, int(ldb), beta, c, int(ldc));
}

void blas(Trans ta, Trans tb, const Shape& s, double alpha, const double* a, int64_t lda, const double* b,
          int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta == Trans::No ? CblasNoTrans : CblasTrans,
              tb == Trans::No ? CblasNoTrans : CblasTrans, int(s.m), int(s.n), int(s.k), alpha, a, int(lda),
              b, int(ldb), beta, c, int(ldc));
}

}  // namespace

template <class Scalar>
void gemm_kokkos(Trans ta, Trans tb, Scalar alpha, const Matrix<const Scalar>& a,
                 const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c) {
  using Space = DeviceSpace;
  const Shape s = check_shapes(ta, tb, a, b, c);
  const bool at = ta == Trans::Yes, bt = tb == Trans::Yes;
  using Exec = typename Space::execution_space;
  using Policy = Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>;
  using Point = typename Policy::point_type;
  // One thread per output entry with a sequential inner product: portable and deterministic.
  Kokkos::parallel_for(
      "tessera::gemm", Policy(Point{{0, 0}}, Point{{s.m, s.n}}), KOKKOS_LAMBDA(int64_t i, int64_t j) {
        Scalar sum = 0;
        for (int64_t p = 0; p < s.k; ++p) sum += (at ? a(p, i) : a(i, p)) * (bt ? b(j, p) : b(p, j));
        c(i, j) = alpha * sum + (beta == Scalar(0) ? Scalar(0) : beta * c(i, j));
      });
}

template <class Scalar>
void gemm(Trans ta, Trans tb, Scalar alpha, const Matrix<const Scalar>& a, const Matrix<const Scalar>& b,
          Scalar beta, const Matrix<Scalar>& c) {
  using Space = DeviceSpace;
  if constexpr (std::is_same<Space, Kokkos::HostSpace>::value) {
    const Shape s = check_shapes(ta, tb, a, b, c);
    if (s.m == 0 || s.n == 0) return;
    if (s.k == 0) {  // C = beta * C; some BLAS reject k == 0
      gemm_kokkos(ta, tb, alpha, a, b, beta, c);
      return;
    }
    Kokkos::fence();
    blas(ta, tb, s, alpha, a.data(), std::max<int64_t>(1, int64_t(a.extent(1))), b.data(),
         std::max<int64_t>(1, int64_t(b.extent(1))), beta, c.data(),
         std::max<int64_t>(1, int64_t(c.extent(1))));
  } else {
    gemm_kokkos(ta, tb, alpha, a, b, beta, c);
  }
}

template void gemm<float>(Trans, Trans, float, const Matrix<const float>&, const Matrix<const float>&, float,
                          const Matrix<float>&);
template void gemm<double>(Trans, Trans, double, const Matrix<const double>&, const Matrix<const double>&,
                           double, const Matrix<double>&);
template void gemm_kokkos<float>(Trans, Trans, float, const Matrix<const float>&, const Matrix<const float>&,
                                 float, const Matrix<float>&);
template void gemm_kokkos<double>(Trans, Trans, double, const Matrix<const double>&,
                                  const Matrix<const double>&, double, const Matrix<double>&);

}  // namespace tessera
