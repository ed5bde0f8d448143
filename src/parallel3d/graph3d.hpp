// SPDX-License-Identifier: BSD-3-Clause
// Loading a graph file onto a 3D grid (DESIGN §4): every rank reads a contiguous 1/P of the CSR rows and
// feature rows, degrees are combined collectively, the normalized adjacency is mapped through the
// permutations, and all-to-all exchanges deliver each nonzero, feature row, label and split bit to the
// ranks whose blocks hold it. Nothing is read twice; no rank holds the whole graph unless P = 1.
#pragma once

#include <string>
#include <vector>

#include "tessera/comm/process_grid.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/kernels/spmm.hpp"
#include "tessera/parallel3d/layout.hpp"

namespace tessera {

struct AdjacencyBlock {
  CsrSpmm<float> forward;    // A_l: rows = this rank's c block, columns = its a block
  CsrSpmm<float> transpose;  // A_l^T: rows = a block, columns = c block
  int64_t nnz = 0;
};

struct Graph3D {
  Layout3D layout;
  std::vector<AdjacencyBlock> adjacency;    // index l mod 6
  Matrix<float> features;                   // layer 0 input block: rows by X (p2 order), columns by Y
  Vector<int64_t> input_ids;                // node id of every local input row (-1: padding)
  std::vector<Vector<int64_t>> output_ids;  // per layer: node id of every local output row (-1: padding)
  Vector<int64_t> labels;                   // last layer's output rows (-1: unlabeled or padding)
  Vector<uint8_t> train, valid, test;       // same rows
  int64_t num_train = 0;                    // labeled training nodes over the whole graph
  double max_nnz = 0, mean_nnz = 0;         // nonzeros per block of layout 0, over the grid
  int64_t valid_rows(int layer) const;      // local output rows of `layer` that are real nodes
};

/// What one layer of the 3D model runs on: the full graph's static block, or a block cut from it for a
/// mini-batch (DESIGN §5), whose sizes differ per block but agree within every reduction.
struct LayerGraph {
  const AdjacencyBlock* adjacency = nullptr;
  Vector<const int64_t> output_ids;  // vertex of each local output row (-1: padding)
  int64_t valid_rows = 0;            // leading output rows that are real vertices
  int64_t num_nodes = 0;             // vertices of the (sub)graph: BatchNorm's count
  bool is_static = false;            // the full graph: a static input's aggregation can be reused
};

/// The full graph's view of each layer.
std::vector<LayerGraph> full_graph_views(const Graph3D& g);

struct Load3DOptions {
  std::vector<int64_t> hidden;  // widths of the hidden layers (layers = hidden.size() + 1)
  PermuteMode permute = PermuteMode::Double;
  uint64_t seed = 0;
  bool normalize_features = false;
};

/// Collective over the grid's replica. Throws CollectiveError on a file without a train split or labels.
Graph3D load_graph_3d(const GraphFileReader& reader, const ProcessGrid& grid, const Load3DOptions& options);

}  // namespace tessera
