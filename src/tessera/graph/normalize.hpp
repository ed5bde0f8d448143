// SPDX-License-Identifier: BSD-3-Clause
// Aggregation matrices built from a graph's in-edges (row v lists the sources u of edges u -> v):
//   GCN:  A_hat = D^-1/2 (A + I) D^-1/2, D = in-degree + 1, one self loop per node however often the
//   file lists it (as PyG's gcn_norm) mean: D^-1 A, the neighbour average of GraphSAGE-mean (rows without in-edges stay zero)
// and feature row normalization (each row divided by its sum, as Kipf & Welling preprocess Cora).
#pragma once

#include <Kokkos_Core.hpp>
#include <cmath>

#include "tessera/core/csr.hpp"
#include "tessera/core/enum_names.hpp"

namespace tessera {

/// How the adjacency is weighted when it is distributed (row v holds the in-edges u -> v). Symmetric and
/// Mean blocks are patterns with degree scales (CsrSpmm::scaled): entry (v, u) weighs
/// float(d_v^-1/2 * d_u^-1/2) or float(1 / d_v), the products formed in double, as gcn_normalize does.
enum class Normalization {
  Symmetric,  ///< GCN: D^-1/2 (A + I) D^-1/2, D = in-degree + 1 (the file's self loops stand for the one I adds)
  Mean,       ///< GraphSAGE-mean: the average over in-neighbours other than v itself (D^-1 A)
  Sum         ///< the edges as given, every weight one
};
/// The names of Normalization's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<Normalization> kNormalizationNames[] = {
    {Normalization::Symmetric, "symmetric"},
    {Normalization::Mean, "mean"},
    {Normalization::Sum, "sum"}};
/// symmetric or mean or sum: the name of a value.
inline const char* normalization_name(Normalization normalization) { return name_of(kNormalizationNames, normalization); }

/// A node's scale in the normalized adjacency, from its degree (Symmetric: counting the self loop):
/// d^-1/2 (Symmetric), 1/d (Mean), 1 (Sum). Entry (v, u) weighs float(scale(d_v) * scale(d_u)) (Symmetric)
/// or float(scale(d_v)) (Mean), the product formed in double: the one formula of gcn_normalize, the 3D
/// loader's degree scales and the samplers' block weights.
KOKKOS_INLINE_FUNCTION double degree_scale(Normalization normalization, double degree) {
  return normalization == Normalization::Symmetric ? 1.0 / ::sqrt(degree)
         : normalization == Normalization::Mean    ? 1.0 / degree
                                                   : 1.0;
}

/// A_hat = D^-1/2 (A + I) D^-1/2 of a square in-edge CSR.
CsrMatrix<float, HostSpace> gcn_normalize(const CsrMatrix<float, HostSpace>& adjacency);

/// Divides every row by its sum; rows summing to zero are left unchanged.
void normalize_feature_rows(const HostMatrix<float>& features);

}  // namespace tessera
