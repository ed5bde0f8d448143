// SPDX-License-Identifier: BSD-3-Clause
// Aggregation matrices built from a graph's in-edges (row v lists the sources u of edges u -> v):
//   GCN:  A_hat = D^-1/2 (A + I) D^-1/2, D = in-degree + 1, self loops added where missing (as PyG's
//   gcn_norm) mean: D^-1 A, the neighbour average of GraphSAGE-mean (rows without in-edges stay zero)
// and feature row normalization (each row divided by its sum, as Kipf & Welling preprocess Cora).
#pragma once

#include "tessera/core/csr.hpp"

namespace tessera {

/// A_hat = D^-1/2 (A + I) D^-1/2 of a square in-edge CSR.
CsrMatrix<float, HostSpace> gcn_normalize(const CsrMatrix<float, HostSpace>& adjacency);
/// D^-1 A: each row divided by its number of entries.
CsrMatrix<float, HostSpace> mean_normalize(const CsrMatrix<float, HostSpace>& adjacency);

/// Divides every row by its sum; rows summing to zero are left unchanged.
void normalize_feature_rows(const HostMatrix<float>& features);

}  // namespace tessera
