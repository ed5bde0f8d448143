// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/csr.hpp"

#include "tessera/core/error.hpp"

namespace tessera {

template <class Scalar>
void validate_csr(const CsrMatrix<Scalar, HostSpace>& csr, const std::string& what) {
  require(csr.num_rows >= 0 && csr.num_cols >= 0, what, ": negative dimensions");
  require(int64_t(csr.row_ptr.extent(0)) == csr.num_rows + 1, what, ": row_ptr has ", csr.row_ptr.extent(0),
          " entries, expected ", csr.num_rows + 1);
  require(csr.row_ptr(0) == 0, what, ": row_ptr(0) is ", csr.row_ptr(0), ", expected 0");
  for (int64_t row = 0; row < csr.num_rows; ++row) {
    require(csr.row_ptr(row + 1) >= csr.row_ptr(row), what, ": row_ptr decreases at row ", row);
    for (int64_t k = csr.row_ptr(row); k < csr.row_ptr(row + 1) && k < csr.nnz(); ++k)
      require(csr.col_idx(k) >= 0 && csr.col_idx(k) < csr.num_cols, what, ": row ", row, " has column ",
              csr.col_idx(k), " outside [0, ", csr.num_cols, ")");
  }
  require(csr.row_ptr(csr.num_rows) == csr.nnz(), what, ": row_ptr ends at ", csr.row_ptr(csr.num_rows),
          " but there are ", csr.nnz(), " column ids");
  require(csr.is_pattern() || int64_t(csr.values.extent(0)) == csr.nnz(), what, ": ", csr.values.extent(0),
          " values for ", csr.nnz(), " nonzeros");
}

template void validate_csr(const CsrMatrix<float, HostSpace>&, const std::string&);
template void validate_csr(const CsrMatrix<double, HostSpace>&, const std::string&);

}  // namespace tessera
