// SPDX-License-Identifier: BSD-3-Clause
// SpMM, team path (what device builds run): a team per balanced row block, a thread per row, vector lanes
// across features, so neighbouring lanes read neighbouring entries of an X row (coalesced on a GPU). X may
// be bf16 bits, widened as they are read.
#include "impl/spmm_kernels.hpp"

namespace tessera::impl {

template <class Scalar, class In>
void spmm_team(const SpmmCall<Scalar>& call, const Matrix<const In>& x, const Matrix<Scalar>& y) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const auto row_ptr = call.a.row_ptr;
  const auto col_idx = call.a.col_idx;
  const auto values = call.a.values;
  const auto row_scale = call.row_scale;
  const auto col_scale = call.col_scale;
  const auto starts = call.block_start;
  const bool pattern = call.a.is_pattern();
  const bool by_row = row_scale.extent(0) > 0, by_column = col_scale.extent(0) > 0;
  const int64_t width = int64_t(x.extent(1)), first_block = call.first_block;
  const int64_t row_begin = call.row_begin, row_end = call.row_end;
  const Scalar alpha = call.alpha, beta = call.beta;
  const int lanes = width >= 32 ? 32 : width >= 8 ? 8 : 1;
  Kokkos::parallel_for(
      "tessera::spmm_team", Policy(call.last_block - first_block, Kokkos::AUTO, lanes),
      KOKKOS_LAMBDA(const Member& team) {
        const int64_t block = first_block + team.league_rank();
        // A block may straddle the requested range: only its rows inside [row_begin, row_end) are written.
        const int64_t lo = starts(block) > row_begin ? starts(block) : row_begin;
        const int64_t hi = starts(block + 1) < row_end ? starts(block + 1) : row_end;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, lo, hi > lo ? hi : lo), [&](int64_t row) {
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, width), [&](int64_t f) {
            Scalar sum = 0;
            const double scale = by_row ? row_scale(row) : 1.0;
            for (int64_t k = row_ptr(row); k < row_ptr(row + 1); ++k) {
              const Scalar weight =
                  by_row || by_column ? scaled_weight<Scalar>(scale, by_column ? col_scale(col_idx(k)) : 1.0)
                  : pattern           ? Scalar(1)
                                      : values(k);
              sum += weight * stored_value(x(col_idx(k), f));
            }
            y(row, f) = alpha * sum + (beta == Scalar(0) ? Scalar(0) : beta * y(row, f));
          });
        });
      });
}

template void spmm_team<float>(const SpmmCall<float>&, const Matrix<const float>&, const Matrix<float>&);
template void spmm_team<double>(const SpmmCall<double>&, const Matrix<const double>&, const Matrix<double>&);
template void spmm_team<float, uint16_t>(const SpmmCall<float>&, const Matrix<const uint16_t>&,
                                         const Matrix<float>&);

}  // namespace tessera::impl
