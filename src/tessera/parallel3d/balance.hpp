// SPDX-License-Identifier: BSD-3-Clause
// Load balance of a block split of the (permuted) adjacency: the ratio of the largest block's nonzeros to
// the mean, which bounds how long the slowest rank's SpMM takes relative to the average (Plexus reports
// 7.70 without permutation, 3.24 with one and 1.001 with two on europe_osm).
#pragma once

#include "tessera/core/csr.hpp"
#include "tessera/graph/permutation.hpp"

namespace tessera {

/// max / mean nonzeros over a row_blocks x col_blocks split of P_rows A P_cols^T, where A is a host CSR
/// (rows = destinations) and positions are padded up to a multiple of the block counts.
double block_imbalance(const CsrMatrix<float, HostSpace>& a, const RandomPermutation& rows,
                       const RandomPermutation& cols, int row_blocks, int col_blocks);

}  // namespace tessera
