// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/normalize.hpp"

#include <cmath>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera {

CsrMatrix<float, HostSpace> gcn_normalize(const CsrMatrix<float, HostSpace>& a) {
  require(a.num_rows == a.num_cols, "gcn_normalize: the adjacency must be square, is ", a.num_rows, "x",
          a.num_cols);
  const int64_t n = a.num_rows;
  // Row v: its in-edges other than v itself, and one self loop however often the file lists it.
  std::vector<int64_t> loops(static_cast<size_t>(n), 0);
  for (int64_t v = 0; v < n; ++v)
    for (int64_t k = a.row_ptr(v); k < a.row_ptr(v + 1); ++k) loops[size_t(v)] += a.col_idx(k) == v;
  CsrMatrix<float, HostSpace> out;
  out.num_rows = out.num_cols = n;
  out.row_ptr = HostVector<int64_t>("row_ptr", size_t(n + 1));
  for (int64_t v = 0; v < n; ++v)
    out.row_ptr(v + 1) = out.row_ptr(v) + (a.row_ptr(v + 1) - a.row_ptr(v)) - loops[size_t(v)] + 1;
  const int64_t nnz = out.row_ptr(n);
  out.col_idx = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), size_t(nnz));
  out.values = HostVector<float>(Kokkos::ViewAllocateWithoutInitializing("values"), size_t(nnz));
  std::vector<double> inv_sqrt_degree(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v)
    inv_sqrt_degree[size_t(v)] = degree_scale(Normalization::Symmetric, double(out.row_ptr(v + 1) - out.row_ptr(v)));
  for (int64_t v = 0; v < n; ++v) {
    int64_t at = out.row_ptr(v);
    bool loop_placed = false;  // keep rows sorted: the self loop goes where it belongs among the sources
    for (int64_t k = a.row_ptr(v); k <= a.row_ptr(v + 1); ++k) {
      const int64_t u = k < a.row_ptr(v + 1) ? a.col_idx(k) : n;
      if (!loop_placed && u >= v) {
        out.col_idx(at) = v;
        out.values(at++) = float(inv_sqrt_degree[size_t(v)] * inv_sqrt_degree[size_t(v)]);
        loop_placed = true;
      }
      if (k == a.row_ptr(v + 1)) break;
      if (u == v) continue;
      out.col_idx(at) = u;
      out.values(at++) = float(inv_sqrt_degree[size_t(v)] * inv_sqrt_degree[size_t(u)]);
    }
  }
  return out;
}

void normalize_feature_rows(const HostMatrix<float>& x) {
  for (size_t i = 0; i < x.extent(0); ++i) {
    double sum = 0;
    for (size_t j = 0; j < x.extent(1); ++j) sum += x(i, j);
    if (sum == 0) continue;
    for (size_t j = 0; j < x.extent(1); ++j) x(i, j) = float(x(i, j) / sum);
  }
}

}  // namespace tessera
