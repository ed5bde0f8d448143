// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/gemm.hpp"

#include <cstdio>

#include "impl/gemm_kernels.hpp"
#ifdef TESSERA_VENDOR_GEMM
#include "impl/vendor.hpp"
#endif
#include "tessera/core/error.hpp"
#include "tessera/core/kernel_profile.hpp"

namespace tessera {
namespace {

template <class Scalar>
impl::GemmShape check_shapes(Trans ta, Trans tb, const Matrix<const Scalar>& a, const Matrix<const Scalar>& b,
                             const Matrix<Scalar>& c) {
  const int64_t m = int64_t(ta == Trans::No ? a.extent(0) : a.extent(1));
  const int64_t k = int64_t(ta == Trans::No ? a.extent(1) : a.extent(0));
  const int64_t kb = int64_t(tb == Trans::No ? b.extent(0) : b.extent(1));
  const int64_t n = int64_t(tb == Trans::No ? b.extent(1) : b.extent(0));
  require(k == kb && int64_t(c.extent(0)) == m && int64_t(c.extent(1)) == n, "gemm: op(A) is ", m, "x", k,
          ", op(B) is ", kb, "x", n, ", C is ", c.extent(0), "x", c.extent(1));
  return {m, n, k};
}

}  // namespace

template <class Scalar>
void gemm(Trans ta, Trans tb, Scalar alpha, const Matrix<const Scalar>& a, const Matrix<const Scalar>& b,
          Scalar beta, const Matrix<Scalar>& c, KernelPath path) {
  const impl::GemmShape s = check_shapes(ta, tb, a, b, c);
  const KernelPath resolved = resolve_kernel_path(path, KernelKind::Gemm);
  if (s.m == 0 || s.n == 0) return;
  // C = beta * C when k = 0: some BLAS reject it, and the team kernel's empty product does it exactly.
  if (resolved == KernelPath::Team || s.k == 0) return impl::gemm_team(ta, tb, s, alpha, a, b, beta, c);
  // The library calls are no Kokkos kernels: a profile sees them as regions named by their shape.
  char name[96] = "";
  if (kernel_profile_active())
    std::snprintf(name, sizeof(name), "gemm %s %c%c %lldx%lldx%lld", kernel_path_name(resolved),
                  ta == Trans::Yes ? 'T' : 'N', tb == Trans::Yes ? 'T' : 'N', static_cast<long long>(s.m),
                  static_cast<long long>(s.n), static_cast<long long>(s.k));
  const ProfileRegion region(name);
  if (resolved == KernelPath::Host) return impl::gemm_host(ta, tb, s, alpha, a, b, beta, c);
#ifdef TESSERA_VENDOR_GEMM
  if (resolved == KernelPath::Vendor) return impl::gemm_vendor(ta, tb, s, alpha, a, b, beta, c);
#endif
  fail("gemm: no kernel for path ", kernel_path_name(resolved));
}

template void gemm<float>(Trans, Trans, float, const Matrix<const float>&, const Matrix<const float>&, float,
                          const Matrix<float>&, KernelPath);
template void gemm<double>(Trans, Trans, double, const Matrix<const double>&, const Matrix<const double>&,
                           double, const Matrix<double>&, KernelPath);

}  // namespace tessera
