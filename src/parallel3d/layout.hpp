// SPDX-License-Identifier: BSD-3-Clause
// The 3D data layout of DESIGN §4 (Plexus): which grid axis plays outer (a), inner (b) and depth (c) at
// each layer, the padded sizes that make every block equal, and the block each rank holds.
//   H_l (input)   rows by a, cols by b, replicated over c
//   A_l           rows by c, cols by a, replicated over b
//   W_l           rows (in features) by b, cols (out features) by a, replicated over c
//   OUT_l = next layer's input: rows by c, cols by a, replicated over b
// A transform-first layer (transforms_first) keeps H and OUT as above; its W is rows by b with every
// output column, replicated over a and c.
// Row order: layer l's adjacency is A1 = P1 A P2^T on even layers and A2 = P2 A P1^T on odd ones, so its
// input rows are in p2 order (even) or p1 order (odd) and its output rows in the other.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/comm/process_grid.hpp"
#include "tessera/graph/permutation.hpp"

namespace tessera {

struct AxisRoles {
  Axis a, b, c;
};

/// l mod 3 = 0 -> (X, Y, Z); 1 -> (Z, X, Y); 2 -> (Y, Z, X).
AxisRoles roles_for_layer(int layer);

class Layout3D {
 public:
  /// dims = {features, hidden..., classes}: layer l maps dims[l] -> dims[l + 1].
  Layout3D(const GridShape& shape, int64_t num_nodes, std::vector<int64_t> dims, PermuteMode permute,
           uint64_t seed);

  const GridShape& shape() const { return shape_; }
  int layers() const { return int(dims_.size()) - 1; }
  int64_t num_nodes() const { return n_; }
  /// Nodes padded to a multiple of lcm(Gx, Gy, Gz): every split of the node axis has equal blocks.
  int64_t padded_nodes() const { return n_pad_; }
  int64_t dim(int i) const { return dims_[size_t(i)]; }
  int64_t padded_dim(int i) const { return dims_pad_[size_t(i)]; }

  /// [begin, end) of the node positions held by coordinate k of an axis (padded positions included).
  std::pair<int64_t, int64_t> node_block(Axis axis, int k) const;
  /// [begin, end) of the columns of feature dimension i held by coordinate k of an axis.
  std::pair<int64_t, int64_t> dim_block(int i, Axis axis, int k) const;

  /// Permutation of layer l's adjacency rows (output order) and columns (input order).
  const RandomPermutation& row_order(int layer) const { return layer % 2 == 0 ? p1_ : p2_; }
  const RandomPermutation& col_order(int layer) const { return layer % 2 == 0 ? p2_ : p1_; }
  const RandomPermutation& p1() const { return p1_; }
  const RandomPermutation& p2() const { return p2_; }

  /// Whether layer l runs transform-first, A (H W), instead of (A H) W (pmm.hpp): after layer 0 (whose
  /// A X is aggregated once) when the whole output is narrower than this rank's input columns, so the
  /// SpMM and the activations that travel are narrower. The one-rank trainer makes the same choice.
  bool transforms_first(int layer) const;

  /// Distinct adjacency layouts: layer l uses layout l mod 6 (axis rotation l mod 3, permutation parity l mod
  /// 2).
  int num_adjacency_layouts() const { return layers() < 6 ? layers() : 6; }

 private:
  GridShape shape_;
  int64_t n_, n_pad_;
  std::vector<int64_t> dims_, dims_pad_;
  RandomPermutation p1_, p2_;
};

}  // namespace tessera
