// SPDX-License-Identifier: BSD-3-Clause
// SpMM, host path: one task per balanced row block; for each nonzero a contiguous row of X is added into
// Y's row, which the compiler vectorizes, with later rows of X prefetched. X may be bf16 bits, widened as
// they are read (half the bytes of X's rows; the sums in fp32).
#include "impl/cpu_clones.hpp"
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

// One SpMM's operands as plain pointers (in the execution space's memory): what the row loop below reads.
template <class Scalar, class In>
struct RowOperands {
  const int64_t* row_ptr;
  const SpmmColumn* col_idx;
  const Scalar* values;
  const double *row_scale, *col_scale;
  const In* x;
  Scalar* y;
  int64_t x_stride, y_stride, width, nnz;
  Scalar alpha, beta;
};

// Rows [lo, hi) of y = alpha A x + beta y: for each nonzero a contiguous row of X is added into Y's row.
template <class Scalar, class In, Weights W>
KOKKOS_INLINE_FUNCTION void spmm_rows(const RowOperands<Scalar, In>& m, int64_t lo, int64_t hi) {
  const int64_t row_bytes = m.width * int64_t(sizeof(In));
  const int64_t distance = row_bytes >= kPrefetchBytes ? 1 : kPrefetchBytes / (row_bytes > 0 ? row_bytes : 1);
  constexpr bool by_value = W == Weights::Values, by_row = W == Weights::Rows || W == Weights::RowsCols;
  constexpr bool by_column = W == Weights::Cols || W == Weights::RowsCols;
  for (int64_t row = lo; row < hi; ++row) {
    Scalar* KOKKOS_RESTRICT out = m.y + row * m.y_stride;
    if (m.beta == Scalar(0))
      for (int64_t f = 0; f < m.width; ++f) out[f] = Scalar(0);
    else
      for (int64_t f = 0; f < m.width; ++f) out[f] *= m.beta;
    const double scale = by_row ? m.row_scale[row] : 1.0;
    const int64_t end = m.row_ptr[row + 1];
    for (int64_t k = m.row_ptr[row]; k < end; ++k) {
      // The rows of X are visited in the graph's (random) order: ask for a later nonzero's row now so
      // its cache lines arrive while this one is summed (1.3-2x on a random graph).
      if (k + distance < m.nnz) {
        const int64_t ahead_col = m.col_idx[k + distance];
        const char* ahead = reinterpret_cast<const char*>(m.x + ahead_col * m.x_stride);
        for (int64_t byte = 0; byte < row_bytes; byte += 64) prefetch(ahead + byte);
        if (by_column) prefetch(reinterpret_cast<const char*>(m.col_scale + ahead_col));
      }
      const int64_t col = m.col_idx[k];
      Scalar a = m.alpha;
      if constexpr (by_value) a = m.alpha * m.values[k];
      if constexpr (by_row || by_column)
        a = m.alpha * scaled_weight<Scalar>(scale, by_column ? m.col_scale[col] : 1.0);
      const In* KOKKOS_RESTRICT in = m.x + col * m.x_stride;
      for (int64_t f = 0; f < m.width; ++f) out[f] += a * stored_value(in[f]);
    }
  }
}

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)  // a host loop (device passes skip it)
// spmm_rows on a CPU. At the baseline x86-64 ISA the library is built for (four floats an instruction)
// the sums, not memory, bound the loop (on random blocks of a sampled step's forward shapes, widths 128 and
// 256, the AVX-512 clone takes 0.57-0.65x its time), so it is compiled for AVX-512 and AVX2 too and the
// loader picks (target_clones). The file is compiled without floating-point contraction (CMakeLists.txt):
// every clone multiplies, then adds, as the default one does, and gives its bits.
template <class Scalar, class In, Weights W>
TESSERA_CPU_TEMPLATE_CLONES void spmm_rows_on_cpu(const RowOperands<Scalar, In>& m, int64_t lo, int64_t hi) {
  spmm_rows<Scalar, In, W>(m, lo, hi);
}
#endif

template <class Scalar, class In, Weights W>
void spmm_host_weighted(const SpmmCall<Scalar>& call, const Matrix<const In>& x, const Matrix<Scalar>& y) {
  const RowOperands<Scalar, In> m{call.a.row_ptr.data(),
                                  call.a.col_idx.data(),
                                  call.a.values.data(),
                                  call.row_scale.data(),
                                  call.col_scale.data(),
                                  x.data(),
                                  y.data(),
                                  int64_t(x.stride(0)),
                                  int64_t(y.stride(0)),
                                  int64_t(x.extent(1)),
                                  call.a.nnz(),
                                  call.alpha,
                                  call.beta};
  const auto starts = call.block_start;
  const int64_t row_begin = call.row_begin, row_end = call.row_end;
  Kokkos::parallel_for(
      "tessera::spmm_host",
      Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>(call.first_block, call.last_block),
      KOKKOS_LAMBDA(int64_t block) {
        const int64_t lo = starts(block) > row_begin ? starts(block) : row_begin;
        const int64_t hi = starts(block + 1) < row_end ? starts(block + 1) : row_end;
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
        spmm_rows_on_cpu<Scalar, In, W>(m, lo, hi);
#else
        spmm_rows<Scalar, In, W>(m, lo, hi);
#endif
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
