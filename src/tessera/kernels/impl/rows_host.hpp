// SPDX-License-Identifier: BSD-3-Clause
// Not installed: how the element-wise kernels and reductions run on the host path. A row is one task and
// its columns one contiguous loop (which the compiler vectorizes). Mirrors rows_team.hpp.
//   op(i, j0, j1)             - works on columns [j0, j1) of row i (here always the whole row)
//   term(i, j0, j1) -> Scalar - row i's partial sum over columns [j0, j1)
//   add(i, j0, j1, acc)       - adds row i's columns [j0, j1) into acc[0 .. j1 - j0)
#pragma once

#include "tessera/core/views.hpp"

namespace tessera::impl {

/// Column reductions sum fixed blocks of this many rows, in order, into partial rows; the partial rows are
/// summed the same way, level after level, until one row is left. The shape depends on the row count
/// alone (not on threads or the path), so every path gives the same bits; a GPU gets rows / 32 blocks of
/// work (a fixed 64 blocks left it 2048 threads: 38 ms for a 169k x 256 column sum on an H100).
constexpr int64_t kColumnBlockRows = 32;

/// The partial rows a column-reduction level leaves from `rows` rows (at least one).
inline int64_t column_blocks(int64_t rows) {
  return rows > kColumnBlockRows ? (rows + kColumnBlockRows - 1) / kColumnBlockRows : 1;
}

template <class Op>
void for_each_row_host(const char* name, int64_t rows, int64_t cols, const Op& op) {
  Kokkos::parallel_for(
      name, Kokkos::RangePolicy<ExecSpace>(0, rows), KOKKOS_LAMBDA(int64_t i) { op(i, int64_t(0), cols); });
}

/// for_each_row_host for rows of uneven work (a sparse block's rows, whose degrees follow the graph's):
/// rows handed out in chunks of 64 as threads free up, not split evenly by count up front, where the rows
/// of a power-law graph's hubs would leave one thread most of the edges. Each row is still one task.
template <class Op>
void for_each_uneven_row_host(const char* name, int64_t rows, int64_t cols, const Op& op) {
  Kokkos::parallel_for(
      name, Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>(0, rows, Kokkos::ChunkSize(64)),
      KOKKOS_LAMBDA(int64_t i) { op(i, int64_t(0), cols); });
}

template <class Scalar, class Term>
void reduce_rows_host(const char* name, int64_t rows, int64_t cols, const Vector<Scalar>& out,
                      const Term& term) {
  Kokkos::parallel_for(
      name, Kokkos::RangePolicy<ExecSpace>(0, rows),
      KOKKOS_LAMBDA(int64_t i) { out(i) = term(i, int64_t(0), cols); });
}

/// The block partials of a column reduction (column_blocks(rows) x cols).
template <class Scalar, class Add>
void column_partials_host(const char* name, int64_t rows, int64_t cols, const Matrix<Scalar>& partial,
                          const Add& add) {
  const int64_t blocks = int64_t(partial.extent(0));
  Kokkos::parallel_for(
      name, Kokkos::RangePolicy<ExecSpace>(0, blocks), KOKKOS_LAMBDA(int64_t b) {
        const int64_t lo = b * kColumnBlockRows,
                      hi = lo + kColumnBlockRows < rows ? lo + kColumnBlockRows : rows;
        Scalar* KOKKOS_RESTRICT acc = &partial(b, 0);
        for (int64_t j = 0; j < cols; ++j) acc[j] = Scalar(0);
        for (int64_t i = lo; i < hi; ++i) add(i, int64_t(0), cols, acc);
      });
}

}  // namespace tessera::impl
