// SPDX-License-Identifier: BSD-3-Clause
// The 3D data layout of docs/architecture.md §4 (Plexus): which grid axis plays outer (a), inner (b) and
// depth (c) at each graph layer, the padded sizes that make every block equal, and the block each rank holds.
//   H_l (input)   rows by a, cols by b, replicated over c
//   A_l           rows by c, cols by a, replicated over b
//   W_l           rows (in features) by b, cols (out features) by a, replicated over c
//   OUT_l = next layer's input: rows by c, cols by a, replicated over b
// A transform-first layer (transforms_first) keeps H and OUT as above; its W is rows by b with every
// output column, replicated over a and c.
// Row order: layer l's adjacency is A1 = P1 A P2^T on even layers and A2 = P2 A P1^T on odd ones, so its
// input rows are in p2 order (even) or p1 order (odd) and its output rows in the other.
// NodeLayout is the graph's side (nodes, permutations); widths are padded per feature dimension, so a model
// needs only the grid shape to lay out its weights.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/comm/grid_shape.hpp"
#include "tessera/graph/permutation.hpp"

namespace tessera {

/// The axes playing outer (a), inner (b) and depth (c) at one graph layer.
struct AxisRoles {
  Axis a;  ///< splits the input's rows and the output's columns
  Axis b;  ///< splits the input's columns
  Axis c;  ///< splits the output's rows
};

/// l mod 3 = 0 -> (X, Y, Z); 1 -> (Z, X, Y); 2 -> (Y, Z, X).
AxisRoles roles_for_layer(int layer);

/// A feature width padded to a multiple of lcm(X, Y, Z): every split of it has equal blocks.
int64_t padded_width(int64_t width, const GridShape& shape);
/// [begin, end) of the (padded) columns of a width held by coordinate k of an axis.
std::pair<int64_t, int64_t> width_block(int64_t width, const GridShape& shape, Axis axis, int k);

/// Bytes of one round of the load's exchanges (Graph3DOptions::exchange_budget) unless a run says otherwise.
constexpr int64_t kDefaultExchangeBudget = int64_t(256) << 20;

/// Whether graph layer `layer` (in -> out features) runs transform-first, A (H W), instead of (A H) W
/// (pmm.hpp): when the whole output is narrower than this rank's input columns, so the SpMM and the
/// activations that travel are narrower — unless its input is cached (layer 0 fed the fixed features
/// without input dropout: A X is then aggregated once, and (A H) W costs one GEMM per pass).
bool transforms_first(int layer, int64_t in, int64_t out, const GridShape& shape, bool cached_input);

/// The node side of the layout: padded node count, the two permutations, and node blocks per axis.
class NodeLayout {
 public:
  /// An empty layout.
  NodeLayout() = default;
  /// `permute` and `seed` choose p1 and p2 (the identity for PermuteMode::None), each moving runs of `chunk`
  /// consecutive nodes as units (RandomPermutation).
  NodeLayout(const GridShape& shape, int64_t num_nodes, PermuteMode permute, uint64_t seed,
             int64_t chunk = 1);

  /// The grid shape the blocks are cut for.
  const GridShape& shape() const { return shape_; }
  /// Nodes of the graph.
  int64_t num_nodes() const { return n_; }
  /// Nodes padded to a multiple of lcm(X, Y, Z): every split of the node axis has equal blocks.
  int64_t padded_nodes() const { return n_pad_; }
  /// [begin, end) of the node positions held by coordinate k of an axis (padded positions included).
  std::pair<int64_t, int64_t> node_block(Axis axis, int k) const;

  /// Permutation of layer l's adjacency rows (output order) and columns (input order).
  const RandomPermutation& row_order(int layer) const { return layer % 2 == 0 ? p1_ : p2_; }
  /// See row_order.
  const RandomPermutation& col_order(int layer) const { return layer % 2 == 0 ? p2_ : p1_; }
  /// The first permutation (rows of even layers).
  const RandomPermutation& p1() const { return p1_; }
  /// The second permutation (rows of odd layers).
  const RandomPermutation& p2() const { return p2_; }
  /// Whether p1 and p2 are one permutation (PermuteMode None or Single): every layer's rows and columns are
  /// then in the same order.
  bool one_order() const { return one_order_; }

 private:
  GridShape shape_;
  int64_t n_ = 0, n_pad_ = 0;
  RandomPermutation p1_, p2_;
  bool one_order_ = true;
};

/// A whole model's layout: the nodes and the feature widths {features, hidden..., classes} (layer l maps
/// dims[l] -> dims[l + 1]). What the performance model prices.
class Layout3D {
 public:
  /// See NodeLayout; dims needs at least two entries.
  Layout3D(const GridShape& shape, int64_t num_nodes, std::vector<int64_t> dims, PermuteMode permute,
           uint64_t seed);

  /// The node side.
  const NodeLayout& nodes() const { return nodes_; }
  /// The grid shape.
  const GridShape& shape() const { return nodes_.shape(); }
  /// Graph layers.
  int layers() const { return int(dims_.size()) - 1; }
  /// See NodeLayout::num_nodes.
  int64_t num_nodes() const { return nodes_.num_nodes(); }
  /// See NodeLayout::padded_nodes.
  int64_t padded_nodes() const { return nodes_.padded_nodes(); }
  /// Width i of {features, hidden..., classes}.
  int64_t dim(int i) const { return dims_[size_t(i)]; }
  /// Width i padded (padded_width).
  int64_t padded_dim(int i) const { return padded_width(dims_[size_t(i)], shape()); }
  /// See NodeLayout::node_block.
  std::pair<int64_t, int64_t> node_block(Axis axis, int k) const { return nodes_.node_block(axis, k); }
  /// [begin, end) of the columns of width i held by coordinate k of an axis.
  std::pair<int64_t, int64_t> dim_block(int i, Axis axis, int k) const {
    return width_block(dims_[size_t(i)], shape(), axis, k);
  }
  /// Distinct adjacency layouts: layer l uses layout l mod 6 (rotation l mod 3, permutation parity l mod 2).
  int num_adjacency_layouts() const { return layers() < 6 ? layers() : 6; }

 private:
  NodeLayout nodes_;
  std::vector<int64_t> dims_;
};

}  // namespace tessera
