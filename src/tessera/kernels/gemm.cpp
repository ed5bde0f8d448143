// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/gemm.hpp"

#include <cstdio>
#include <string>

#include "impl/gemm_kernels.hpp"
#ifdef TESSERA_VENDOR_GEMM
#include "impl/vendor.hpp"
#endif
#include "tessera/core/error.hpp"
#include "tessera/core/kernel_profile.hpp"
#include "tessera/kernels/elementwise.hpp"

namespace tessera {
namespace {

template <class A, class Scalar>
impl::GemmShape check_shapes(Trans ta, Trans tb, const Matrix<const A>& a, const Matrix<const Scalar>& b,
                             const Matrix<Scalar>& c) {
  const int64_t m = int64_t(ta == Trans::No ? a.extent(0) : a.extent(1));
  const int64_t k = int64_t(ta == Trans::No ? a.extent(1) : a.extent(0));
  const int64_t kb = int64_t(tb == Trans::No ? b.extent(0) : b.extent(1));
  const int64_t n = int64_t(tb == Trans::No ? b.extent(1) : b.extent(0));
  require(k == kb && int64_t(c.extent(0)) == m && int64_t(c.extent(1)) == n, "gemm: op(A) is ", m, "x", k,
          ", op(B) is ", kb, "x", n, ", C is ", c.extent(0), "x", c.extent(1));
  return {m, n, k};
}

// The library calls are no Kokkos kernels: a profile sees them as regions named by their shape.
std::string profile_name(KernelPath path, Trans ta, Trans tb, const impl::GemmShape& s, const char* what) {
  if (!kernel_profile_active()) return std::string();
  char name[96];
  std::snprintf(name, sizeof(name), "gemm %s%s %c%c %lldx%lldx%lld", kernel_path_name(path), what,
                ta == Trans::Yes ? 'T' : 'N', tb == Trans::Yes ? 'T' : 'N', static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k));
  return name;
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
  const ProfileRegion region(profile_name(resolved, ta, tb, s, "").c_str());
  if (resolved == KernelPath::Host) return impl::gemm_host(ta, tb, s, alpha, a, b, beta, c);
#ifdef TESSERA_VENDOR_GEMM
  if (resolved == KernelPath::Vendor) return impl::gemm_vendor(ta, tb, s, alpha, a, b, beta, c);
#endif
  fail("gemm: no kernel for path ", kernel_path_name(resolved));
}

bool gemm_reads_bf16_bits(KernelPath path) {
  return resolve_kernel_path(path, KernelKind::Gemm) == KernelPath::Host && gemm_dtype() == GemmDtype::Bf16;
}

void gemm_bf16_operand(Trans ta, Trans tb, float alpha, const Matrix<const uint16_t>& a,
                       const Matrix<const float>& b, float beta, const Matrix<float>& c,
                       const Matrix<float>& widened, KernelPath path) {
  const impl::GemmShape s = check_shapes(ta, tb, a, b, c);
  if (gemm_reads_bf16_bits(path)) {
    // An empty product reads no entry of A (C = beta C where k = 0): gemm<float> does it as on fp32.
    if (s.m == 0 || s.n == 0 || s.k == 0)
      return gemm<float>(ta, tb, alpha, Matrix<const float>(nullptr, a.extent(0), a.extent(1)), b, beta, c,
                         path);
    Kokkos::fence();  // oneDNN runs outside Kokkos: earlier kernels must have finished
    const ProfileRegion region(profile_name(KernelPath::Host, ta, tb, s, " bf16 operand").c_str());
    return impl::gemm_bf16_bits(ta, tb, s, alpha, a, b, beta, c);
  }
  require(widened.extent(0) == a.extent(0) && widened.extent(1) == a.extent(1), "gemm: A is ", a.extent(0),
          "x", a.extent(1), " bf16, its widened copy ", widened.extent(0), "x", widened.extent(1));
  widen_bf16(a, widened);
  gemm<float>(ta, tb, alpha, widened, b, beta, c, path);
}

template void gemm<float>(Trans, Trans, float, const Matrix<const float>&, const Matrix<const float>&, float,
                          const Matrix<float>&, KernelPath);
template void gemm<double>(Trans, Trans, double, const Matrix<const double>&, const Matrix<const double>&,
                           double, const Matrix<double>&, KernelPath);

}  // namespace tessera
