// SPDX-License-Identifier: BSD-3-Clause
// SpMM, host path: one task per balanced row block; for each nonzero a contiguous row of X is added into
// Y's row, which the compiler vectorizes, with later rows of X prefetched. X may be bf16 bits, widened as
// they are read (half the bytes of X's rows; the sums in fp32).
#include "impl/spmm_kernels.hpp"

namespace tessera::impl {

namespace {
// Bytes of X rows requested ahead of use: enough to cover memory latency, few enough to fit the core's
// outstanding-miss buffers (so wide rows are prefetched fewer nonzeros ahead).
constexpr int64_t kPrefetchBytes = 4096;
KOKKOS_INLINE_FUNCTION void prefetch(const char* address) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  __builtin_prefetch(address, 0, 3);
#else
  (void)address;
#endif
}

// How an entry's weight is formed (SpmmCall): its value, one, or the row's scale times the column's
// (Rows, Cols: the other scales are ones). A template argument, so the inner loop carries no test for it.
enum class Weights { Values, Ones, Rows, Cols, RowsCols };

template <class Scalar, class In, Weights W>
void spmm_host_weighted(const SpmmCall<Scalar>& call, const Matrix<const In>& x, const Matrix<Scalar>& y) {
  const auto row_ptr = call.a.row_ptr;
  const auto col_idx = call.a.col_idx;
  const auto values = call.a.values;
  const auto row_scale = call.row_scale;
  const auto col_scale = call.col_scale;
  const auto starts = call.block_start;
  const int64_t width = int64_t(x.extent(1)), nnz = call.a.nnz();
  const int64_t row_begin = call.row_begin, row_end = call.row_end;
  const Scalar alpha = call.alpha, beta = call.beta;
  const int64_t row_bytes = width * int64_t(sizeof(In));
  const int64_t distance = row_bytes >= kPrefetchBytes ? 1 : kPrefetchBytes / (row_bytes > 0 ? row_bytes : 1);
  constexpr bool by_value = W == Weights::Values, by_row = W == Weights::Rows || W == Weights::RowsCols;
  constexpr bool by_column = W == Weights::Cols || W == Weights::RowsCols;
  Kokkos::parallel_for(
      "tessera::spmm_host",
      Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>(call.first_block, call.last_block),
      KOKKOS_LAMBDA(int64_t block) {
        const int64_t lo = starts(block) > row_begin ? starts(block) : row_begin;
        const int64_t hi = starts(block + 1) < row_end ? starts(block + 1) : row_end;
        for (int64_t row = lo; row < hi; ++row) {
          Scalar* KOKKOS_RESTRICT out = &y(row, 0);
          if (beta == Scalar(0))
            for (int64_t f = 0; f < width; ++f) out[f] = Scalar(0);
          else
            for (int64_t f = 0; f < width; ++f) out[f] *= beta;
          const double scale = by_row ? row_scale(row) : 1.0;
          const int64_t end = row_ptr(row + 1);
          for (int64_t k = row_ptr(row); k < end; ++k) {
            // The rows of X are visited in the graph's (random) order: ask for a later nonzero's row now
            // so its cache lines arrive while this one is summed (1.3-2x on a random graph here).
            if (k + distance < nnz) {
              const int64_t ahead_col = col_idx(k + distance);
              const char* ahead = reinterpret_cast<const char*>(&x(ahead_col, 0));
              for (int64_t byte = 0; byte < row_bytes; byte += 64) prefetch(ahead + byte);
              if (by_column) prefetch(reinterpret_cast<const char*>(&col_scale(ahead_col)));
            }
            const int64_t col = col_idx(k);
            // Constant conditions (plain ifs: nvcc's extended lambdas refuse captures under if constexpr).
            const Scalar a = by_value ? alpha * values(k)
                             : by_row || by_column
                                 ? alpha * scaled_weight<Scalar>(scale, by_column ? col_scale(col) : 1.0)
                                 : alpha;
            const In* KOKKOS_RESTRICT in = &x(col, 0);
            for (int64_t f = 0; f < width; ++f) out[f] += a * stored_value(in[f]);
          }
        }
      });
}

}  // namespace

template <class Scalar, class In>
void spmm_host(const SpmmCall<Scalar>& call, const Matrix<const In>& x, const Matrix<Scalar>& y) {
  const bool by_row = call.row_scale.extent(0) > 0, by_column = call.col_scale.extent(0) > 0;
  if (by_row && by_column) return spmm_host_weighted<Scalar, In, Weights::RowsCols>(call, x, y);
  if (by_row) return spmm_host_weighted<Scalar, In, Weights::Rows>(call, x, y);
  if (by_column) return spmm_host_weighted<Scalar, In, Weights::Cols>(call, x, y);
  if (call.a.is_pattern()) return spmm_host_weighted<Scalar, In, Weights::Ones>(call, x, y);
  spmm_host_weighted<Scalar, In, Weights::Values>(call, x, y);
}

template void spmm_host<float>(const SpmmCall<float>&, const Matrix<const float>&, const Matrix<float>&);
template void spmm_host<double>(const SpmmCall<double>&, const Matrix<const double>&, const Matrix<double>&);
template void spmm_host<float, uint16_t>(const SpmmCall<float>&, const Matrix<const uint16_t>&,
                                         const Matrix<float>&);

}  // namespace tessera::impl
