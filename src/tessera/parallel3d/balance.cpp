// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/parallel3d/balance.hpp"

#include <algorithm>
#include <vector>

namespace tessera {

double block_imbalance(const CsrMatrix<float, HostSpace>& a, const RandomPermutation& rows,
                       const RandomPermutation& cols, int row_blocks, int col_blocks) {
  const int64_t n = a.num_rows;
  const int64_t row_size = (n + row_blocks - 1) / row_blocks, col_size = (n + col_blocks - 1) / col_blocks;
  std::vector<int32_t> col_block(
      static_cast<size_t>(n));  // one permutation evaluation per node, not per edge
  for (int64_t u = 0; u < n; ++u) col_block[size_t(u)] = int32_t(cols.inverse(u) / col_size);
  std::vector<int64_t> count(size_t(row_blocks) * size_t(col_blocks), 0);
  for (int64_t v = 0; v < n; ++v) {
    const int64_t rb = rows.inverse(v) / row_size;
    for (int64_t k = a.row_ptr(v); k < a.row_ptr(v + 1); ++k)
      ++count[size_t(rb * col_blocks + col_block[size_t(a.col_idx(k))])];
  }
  const double total = double(a.nnz()), top = double(*std::max_element(count.begin(), count.end()));
  return total > 0 ? top / (total / double(count.size())) : 1.0;
}

}  // namespace tessera
