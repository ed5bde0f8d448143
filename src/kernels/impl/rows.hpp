// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the element-wise launchers on the path a caller names (rows_host.hpp / rows_team.hpp).
#pragma once

#include "impl/rows_host.hpp"
#include "impl/rows_team.hpp"
#include "tessera/kernels/kernel_path.hpp"

namespace tessera::impl {

/// op(i, j0, j1) over every row i and chunks [j0, j1) of its columns.
template <class Op>
void for_each_row(KernelPath path, const char* name, int64_t rows, int64_t cols, const Op& op) {
  if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Team)
    for_each_row_team(name, rows, cols, op);
  else
    for_each_row_host(name, rows, cols, op);
}

/// out(i) = sum of term(i, j0, j1) over the chunks of row i.
template <class Scalar, class Term>
void reduce_rows(KernelPath path, const char* name, int64_t rows, int64_t cols, const Vector<Scalar>& out,
                 const Term& term) {
  if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Team)
    reduce_rows_team(name, rows, cols, out, term);
  else
    reduce_rows_host(name, rows, cols, out, term);
}

/// out(j) = sum over rows of what add(i, j0, j1, acc) adds, in fixed row blocks (identical on both paths).
template <class Scalar, class Add>
void reduce_columns(KernelPath path, const char* name, int64_t rows, int64_t cols, const Vector<Scalar>& out,
                    const Add& add) {
  Matrix<Scalar> partial(Kokkos::ViewAllocateWithoutInitializing("column_partial"), size_t(column_blocks(rows)),
                         size_t(cols));
  if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Team)
    column_partials_team(name, rows, cols, partial, add);
  else
    column_partials_host(name, rows, cols, partial, add);
  const int64_t blocks = int64_t(partial.extent(0));
  Kokkos::parallel_for(
      name, Kokkos::RangePolicy<ExecSpace>(0, cols), KOKKOS_LAMBDA(int64_t j) {
        Scalar total = 0;
        for (int64_t b = 0; b < blocks; ++b) total += partial(b, j);
        out(j) = total;
      });
}

}  // namespace tessera::impl
