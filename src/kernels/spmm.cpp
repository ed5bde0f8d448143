// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/spmm.hpp"

#include <algorithm>
#include <type_traits>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {
// Bytes of X rows requested ahead of use: enough to cover memory latency, few enough to fit the
// core's outstanding-miss buffers (so wide rows are prefetched fewer nonzeros ahead).
constexpr int64_t kPrefetchBytes = 4096;
KOKKOS_INLINE_FUNCTION void prefetch(const char* address) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
  __builtin_prefetch(address, 0, 3);
#else
  (void)address;
#endif
}
}  // namespace

HostVector<int64_t> balanced_row_blocks(const HostVector<int64_t>& row_ptr, int64_t blocks) {
  const int64_t rows = int64_t(row_ptr.extent(0)) - 1;
  blocks = std::max<int64_t>(1, std::min(blocks, std::max<int64_t>(rows, 1)));
  HostVector<int64_t> start("block_start", size_t(blocks + 1));
  const double total = double(row_ptr(rows) + rows);
  int64_t row = 0;
  for (int64_t b = 1; b < blocks; ++b) {
    const double target = total * double(b) / double(blocks);
    while (row < rows && double(row_ptr(row) + row) < target) ++row;
    start(b) = row;
  }
  start(0) = 0;
  start(blocks) = rows;
  return start;
}

template <class Scalar>
CsrMatrix<Scalar, HostSpace> csr_transpose(const CsrMatrix<Scalar, HostSpace>& a) {
  CsrMatrix<Scalar, HostSpace> t;
  t.num_rows = a.num_cols;
  t.num_cols = a.num_rows;
  t.row_ptr = HostVector<int64_t>("row_ptr", size_t(t.num_rows + 1));
  t.col_idx = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), size_t(a.nnz()));
  if (!a.is_pattern())
    t.values = HostVector<Scalar>(Kokkos::ViewAllocateWithoutInitializing("values"), size_t(a.nnz()));
  for (int64_t k = 0; k < a.nnz(); ++k) ++t.row_ptr(a.col_idx(k) + 1);
  for (int64_t r = 0; r < t.num_rows; ++r) t.row_ptr(r + 1) += t.row_ptr(r);
  std::vector<int64_t> fill(t.row_ptr.data(), t.row_ptr.data() + t.num_rows);
  // Visiting rows in order leaves every transposed row sorted by column.
  for (int64_t r = 0; r < a.num_rows; ++r)
    for (int64_t k = a.row_ptr(r); k < a.row_ptr(r + 1); ++k) {
      const int64_t at = fill[size_t(a.col_idx(k))]++;
      t.col_idx(at) = r;
      if (!a.is_pattern()) t.values(at) = a.values(k);
    }
  return t;
}

template <class Scalar, class Space>
CsrMatrix<Scalar, Space> csr_to_space(const CsrMatrix<Scalar, HostSpace>& a) {
  CsrMatrix<Scalar, Space> out;
  out.num_rows = a.num_rows;
  out.num_cols = a.num_cols;
  out.row_ptr = Kokkos::create_mirror_view_and_copy(Space(), a.row_ptr);
  out.col_idx = Kokkos::create_mirror_view_and_copy(Space(), a.col_idx);
  out.values = Kokkos::create_mirror_view_and_copy(Space(), a.values);
  return out;
}

template <class Scalar, class Space>
CsrSpmm<Scalar, Space>::CsrSpmm(CsrMatrix<Scalar, Space> a) : a_(std::move(a)) {
  const auto row_ptr = Kokkos::create_mirror_view_and_copy(HostSpace(), a_.row_ptr);
  // A few blocks per thread lets the dynamic schedule even out what the nonzero count cannot see.
  const int64_t blocks = 16 * int64_t(ExecSpace().concurrency());
  host_block_start_ = balanced_row_blocks(row_ptr, blocks);
  block_start_ = Kokkos::create_mirror_view_and_copy(Space(), host_block_start_);
}

template <class Scalar, class Space>
void CsrSpmm<Scalar, Space>::apply(const Matrix<const Scalar, Space>& x, const Matrix<Scalar, Space>& y,
                                   Scalar alpha, Scalar beta) const {
  apply_rows(x, y, 0, a_.num_rows, alpha, beta);
}

template <class Scalar, class Space>
void CsrSpmm<Scalar, Space>::apply_rows(const Matrix<const Scalar, Space>& x, const Matrix<Scalar, Space>& y,
                                        int64_t row_begin, int64_t row_end, Scalar alpha, Scalar beta) const {
  if (row_end <= row_begin) return;
  // The balanced blocks that intersect the range; rows outside it are skipped inside the kernels.
  const int64_t first_block =
      int64_t(
          std::upper_bound(host_block_start_.data(), host_block_start_.data() + num_blocks() + 1, row_begin) -
          host_block_start_.data()) -
      1;
  const int64_t last_block = int64_t(
      std::lower_bound(host_block_start_.data(), host_block_start_.data() + num_blocks() + 1, row_end) -
      host_block_start_.data());
  require(int64_t(x.extent(0)) == a_.num_cols && int64_t(y.extent(0)) == a_.num_rows &&
              x.extent(1) == y.extent(1),
          "spmm: A is ", a_.num_rows, "x", a_.num_cols, ", X is ", x.extent(0), "x", x.extent(1), ", Y is ",
          y.extent(0), "x", y.extent(1));
  using Exec = typename Space::execution_space;
  const auto row_ptr = a_.row_ptr;
  const auto col_idx = a_.col_idx;
  const auto values = a_.values;
  const auto starts = block_start_;
  const bool pattern = a_.is_pattern();
  const int64_t width = int64_t(x.extent(1)), nnz = a_.nnz();
  const int64_t row_bytes = width * int64_t(sizeof(Scalar));
  const int64_t distance = row_bytes >= kPrefetchBytes ? 1 : kPrefetchBytes / (row_bytes > 0 ? row_bytes : 1);
  if (std::is_same<typename Exec::memory_space, Kokkos::HostSpace>::value) {
    // Host: one block per task; for each nonzero, a contiguous row of X is added into Y's row, which
    // the compiler vectorizes.
    Kokkos::parallel_for(
        "tessera::spmm",
        Kokkos::RangePolicy<Exec, Kokkos::Schedule<Kokkos::Dynamic>>(first_block, last_block),
        KOKKOS_LAMBDA(int64_t block) {
          const int64_t lo = starts(block) > row_begin ? starts(block) : row_begin;
          const int64_t hi = starts(block + 1) < row_end ? starts(block + 1) : row_end;
          for (int64_t row = lo; row < hi; ++row) {
            Scalar* KOKKOS_RESTRICT out = &y(row, 0);
            if (beta == Scalar(0))
              for (int64_t f = 0; f < width; ++f) out[f] = Scalar(0);
            else
              for (int64_t f = 0; f < width; ++f) out[f] *= beta;
            const int64_t end = row_ptr(row + 1);
            for (int64_t k = row_ptr(row); k < end; ++k) {
              // The rows of X are visited in the graph's (random) order: ask for a later nonzero's row
              // now so its cache lines arrive while this one is summed (1.3-2x on a random graph here).
              if (k + distance < nnz) {
                const char* ahead = reinterpret_cast<const char*>(&x(col_idx(k + distance), 0));
                for (int64_t byte = 0; byte < row_bytes; byte += 64) prefetch(ahead + byte);
              }
              const Scalar a = pattern ? alpha : alpha * values(k);
              const Scalar* KOKKOS_RESTRICT in = &x(col_idx(k), 0);
              for (int64_t f = 0; f < width; ++f) out[f] += a * in[f];
            }
          }
        });
  } else {
    // Device: a team per block, a thread per row, vector lanes across features (coalesced reads of X).
    using Policy = Kokkos::TeamPolicy<Exec>;
    using Member = typename Policy::member_type;
    const int lanes = width >= 32 ? 32 : width >= 8 ? 8 : 1;
    Kokkos::parallel_for(
        "tessera::spmm", Policy(last_block - first_block, Kokkos::AUTO, lanes),
        KOKKOS_LAMBDA(const Member& team) {
          const int64_t block = first_block + team.league_rank();
          Kokkos::parallel_for(
              Kokkos::TeamThreadRange(team, starts(block), starts(block + 1)), [&](int64_t row) {
                Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, width), [&](int64_t f) {
                  Scalar sum = 0;
                  for (int64_t k = row_ptr(row); k < row_ptr(row + 1); ++k)
                    sum += (pattern ? Scalar(1) : values(k)) * x(col_idx(k), f);
                  y(row, f) = alpha * sum + (beta == Scalar(0) ? Scalar(0) : beta * y(row, f));
                });
              });
        });
  }
}

template class CsrSpmm<float, DeviceSpace>;
template class CsrSpmm<double, DeviceSpace>;
template CsrMatrix<float, HostSpace> csr_transpose(const CsrMatrix<float, HostSpace>&);
template CsrMatrix<double, HostSpace> csr_transpose(const CsrMatrix<double, HostSpace>&);
template CsrMatrix<float, DeviceSpace> csr_to_space<float, DeviceSpace>(const CsrMatrix<float, HostSpace>&);
template CsrMatrix<double, DeviceSpace> csr_to_space<double, DeviceSpace>(
    const CsrMatrix<double, HostSpace>&);

}  // namespace tessera
