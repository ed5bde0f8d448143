// SPDX-License-Identifier: BSD-3-Clause
// GEMM, team path: a team per row of C, vector lanes across its columns (neighbouring lanes read
// neighbouring entries of a B row), a sequential inner product per entry: portable and deterministic.
// It is what device builds run until the vendor path (cuBLAS) exists.
#include "impl/gemm_kernels.hpp"

namespace tessera::impl {

template <class Scalar>
void gemm_team(Trans ta, Trans tb, const GemmShape& s, Scalar alpha, const Matrix<const Scalar>& a,
               const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const bool at = ta == Trans::Yes, bt = tb == Trans::Yes;
  const int64_t n = s.n, k = s.k;
  const int lanes = n >= 32 ? 32 : n >= 8 ? 8 : 1;
  Kokkos::parallel_for(
      "tessera::gemm_team", Policy(s.m, Kokkos::AUTO, lanes), KOKKOS_LAMBDA(const Member& team) {
        const int64_t i = team.league_rank();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, (n + lanes - 1) / lanes), [&](int64_t tile) {
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, lanes), [&](int64_t lane) {
            const int64_t j = tile * lanes + lane;
            if (j >= n) return;
            Scalar sum = 0;
            for (int64_t p = 0; p < k; ++p) sum += (at ? a(p, i) : a(i, p)) * (bt ? b(j, p) : b(p, j));
            c(i, j) = alpha * sum + (beta == Scalar(0) ? Scalar(0) : beta * c(i, j));
          });
        });
      });
}

template void gemm_team<float>(Trans, Trans, const GemmShape&, float, const Matrix<const float>&,
                               const Matrix<const float>&, float, const Matrix<float>&);
template void gemm_team<double>(Trans, Trans, const GemmShape&, double, const Matrix<const double>&,
                                const Matrix<const double>&, double, const Matrix<double>&);

}  // namespace tessera::impl
