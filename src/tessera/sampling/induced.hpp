// SPDX-License-Identifier: BSD-3-Clause
// Cutting a sampled subgraph out of a static sparse block, on the host, with no communication (docs/architecture.md §5):
// the rows and columns whose vertices are in the sample are kept, renumbered in their local order, and
// off-diagonal entries (row vertex != column vertex) are divided by the pair inclusion probability p, so
// the sampled aggregation is an unbiased estimate of the full one. Plain C++ containers only: it runs on
// the sampler thread, beside Kokkos kernels on the main thread.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

/// A host CSR in standard containers (what the sampler thread produces).
struct HostCsr {
  int64_t num_rows = 0;             ///< rows
  int64_t num_cols = 0;             ///< columns
  std::vector<int64_t> row_ptr{0};  ///< num_rows + 1 offsets into col_idx
  std::vector<int64_t> col_idx;     ///< column of each entry, increasing within a row
  std::vector<float> values;        ///< value of each entry
};

/// The rows (or columns) of a static block that a sample selects: `local` are the local indices in
/// increasing order, `ids` their vertex ids.
struct SampledIndex {
  std::vector<int64_t> local;  ///< local indices in the static block, increasing
  std::vector<int64_t> ids;    ///< their vertex ids
};

/// A sample's vertices in the order of one node ordering (p1 or p2): positions increasing, their vertex
/// ids beside them. Sorted once per step and ordering; every block of that ordering is then a slice.
struct SampleOrder {
  std::vector<int64_t> positions;  ///< increasing (a permutation's positions are distinct)
  std::vector<int64_t> ids;        ///< the vertex at each position
};

/// sample[k] sits at positions[k] in the ordering. O(|sample| log |sample|).
SampleOrder order_sample(const std::vector<int64_t>& sample, const std::vector<int64_t>& positions);

/// The sampled rows (or columns) of a block covering positions [begin, end) of the ordering. O(log |sample|
/// + |slice|).
SampledIndex sampled_positions(const SampleOrder& order, int64_t begin, int64_t end);

/// How a static block's entries weigh: `values`, one per entry, or, where values is null, entry (i, j)
/// weighs scaled_weight<float>(row_scale[i], col_scale[j]) (a null scale: ones), as a scaled CsrSpmm does.
struct BlockWeights {
  const float* values = nullptr;      ///< one per entry, or null
  const double* row_scale = nullptr;  ///< one per row (when values is null), or null for ones
  const double* col_scale = nullptr;  ///< one per column, or null for ones
};

/// The induced block A[rows.local, cols.local] of a static block with `block_cols` columns (CSR arrays and
/// the entries' weights), with off-diagonal weights (row vertex != column vertex) multiplied by
/// `off_diagonal_scale`. Columns are renumbered to their index in cols.local. Column is int32_t or int64_t
/// (the static block's ids as CsrSpmm stores them).
template <class Column>
HostCsr induced_block(const int64_t* row_ptr, const Column* col_idx, const BlockWeights& weights,
                      int64_t block_cols, const SampledIndex& rows, const SampledIndex& cols,
                      float off_diagonal_scale);

/// Transpose of a host CSR (counting sort; columns within a row stay increasing).
HostCsr transpose(const HostCsr& a);

}  // namespace tessera
