// SPDX-License-Identifier: BSD-3-Clause
// Compressed sparse rows. Offsets and column ids are int64: edge counts and global node ids pass 2^31
// on the graphs Tessera is for (ogbn-papers100M: 111M nodes, 1.6B edges).
#pragma once

#include <cstdint>
#include <string>

#include "tessera/core/views.hpp"

namespace tessera {

/// A sparse matrix in compressed sparse rows, in memory space Space, with column ids of type Column (int64,
/// or SpmmColumn where a matrix is built for CsrSpmm: spmm.hpp).
template <class Scalar, class Space = DeviceSpace, class Column = int64_t>
struct CsrMatrix {
  int64_t num_rows = 0;            ///< rows
  int64_t num_cols = 0;            ///< columns
  Vector<int64_t, Space> row_ptr;  ///< num_rows + 1 offsets, row_ptr(0) == 0
  Vector<Column, Space> col_idx;   ///< nnz column ids in [0, num_cols)
  Vector<Scalar, Space> values;    ///< nnz values, or empty for a pattern whose values are all one

  /// Stored entries.
  int64_t nnz() const { return int64_t(col_idx.extent(0)); }
  /// No values: every stored entry is one.
  bool is_pattern() const { return values.extent(0) == 0; }
};

/// The weight of entry (i, j) of a degree-scaled pattern (CsrSpmm's scaled form, the sampler's induced
/// blocks): the scales' product formed in double and rounded once, as gcn_normalize forms its values, so a
/// scaled pattern and the valued matrix agree to the bit. A missing scale is passed as 1.0.
template <class Scalar>
KOKKOS_INLINE_FUNCTION Scalar scaled_weight(double row_scale, double col_scale) {
  return Scalar(row_scale * col_scale);
}

/// Offsets from counts, in a kernel: out(i) = term(0) + ... + term(i - 1) for i in [0, n] (an exclusive scan
/// with its total at n), `term` a device-callable function of an index. Returns the total.
template <class Term>
int64_t prefix_offsets(int64_t n, const Term& term, const Vector<int64_t>& out, const char* name) {
  int64_t total = 0;
  Kokkos::parallel_scan(
      name, Kokkos::RangePolicy<ExecSpace>(0, n + 1),
      KOKKOS_LAMBDA(int64_t i, int64_t & prefix, bool final) {
        if (final) out(i) = prefix;
        if (i < n) prefix += term(i);
      },
      total);
  return total;
}

/// The row holding entry k (0 <= k < offsets(rows)) of a CSR with these row offsets: the last row starting at
/// or before k (an empty row starts where the next one does, so it is never that row).
template <class Offsets>
KOKKOS_INLINE_FUNCTION int64_t row_of_entry(const Offsets& offsets, int64_t rows, int64_t k) {
  int64_t lo = 0, hi = rows;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (offsets(mid) <= k)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/// Checks a host CSR's invariants (offsets start at 0, never decrease, end at nnz; columns in range;
/// values absent or nnz long) and throws Error naming `what` and the first offending row.
template <class Scalar>
void validate_csr(const CsrMatrix<Scalar, HostSpace>& csr, const std::string& what);

}  // namespace tessera
