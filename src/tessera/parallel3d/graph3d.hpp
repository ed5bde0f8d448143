// SPDX-License-Identifier: BSD-3-Clause
// A graph on a 3D process grid (docs/architecture.md §4): the normalized, permuted adjacency in the block
// layout of each graph layer, the input features, and labels and named node masks in each layout's output
// order, so that one graph serves models of any depth. Built collectively from rows an application holds in
// memory (GraphRows: any contiguous block of rows per rank) or read from a graph file, in phases — degrees,
// adjacency, features, labels — each one all-to-all of what the other ranks need. Only dense blocks move
// afterwards; no rank holds the whole graph unless P = 1.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/grid_shape.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/kernels/spmm.hpp"
#include "tessera/parallel3d/layout.hpp"

namespace tessera {

class Communicator;     // comm/communicator.hpp
class ProcessGrid;      // comm/process_grid.hpp
class GraphFileReader;  // graph/graph_file.hpp
struct RowCosts;        // graph/graph_file.hpp

/// A graph as an application holds it: every rank one contiguous block of rows (destination nodes), blocks
/// in rank order covering [0, num_nodes) (sizes are free; a block may be empty).
struct GraphRows {
  static constexpr uint8_t kTrain = 1;  ///< splits bit: in the training split (split_names[0])
  static constexpr uint8_t kValid = 2;  ///< splits bit: in the validation split (split_names[1])
  static constexpr uint8_t kTest = 4;   ///< splits bit: in the test split (split_names[2])

  std::string name = "graph rows";  ///< named in error messages (a file's path)
  int64_t num_nodes = 0;            ///< nodes of the whole graph
  int64_t num_features = 0;         ///< feature columns
  int64_t num_classes = 0;          ///< label classes
  int64_t first_row = 0;            ///< this rank's first row
  std::vector<int64_t> indptr{0};   ///< rows + 1 offsets into indices, starting at 0
  std::vector<int64_t> indices;     ///< in-neighbour (source) ids of each row, in [0, num_nodes)
  std::vector<float> features;      ///< rows x num_features, row-major
  /// Instead of `features`: rows x num_features as bf16 bits (read_graph_rows with StorageDtype::Bf16),
  /// for Graph3DOptions::feature_dtype Bf16 without normalize_features (the bits are the values held).
  std::vector<uint16_t> features_bf16;
  std::vector<int64_t> labels;  ///< one per row, in [-1, num_classes); -1 = unlabeled
  /// A multi-label graph: num_classes tasks (labels then holds 0 for a row with an observed task, -1 else).
  bool multi_label = false;
  std::vector<int8_t> label_matrix;  ///< multi-label: rows x num_classes of 1, 0, -1 (unobserved)
  std::vector<uint8_t> splits;       ///< one per row: bit k set = in split split_names[k]
  /// The name of each bit of `splits`, at most 8, distinct; "train" (the nodes the loss covers) must be
  /// one of them. Each becomes a node mask of that name (NodeData::mask), e.g. a held-out set of one's own.
  std::vector<std::string> split_names{"train", "valid", "test"};

  /// Rows this rank holds.
  int64_t rows() const { return int64_t(labels.size()); }
};

/// Collective: a contiguous block of a graph file's rows (balanced_row_begins with `costs`), its split ids
/// turned into row bits; every value is checked as it is read, as validate_graph checks it (a problem on
/// any rank is thrown collectively, naming the file, dataset and entry). `features` Bf16 reads the
/// features as bf16 bits only (GraphRows::features_bf16), never as fp32 rows.
GraphRows read_graph_rows(const GraphFileReader& reader, const Communicator& comm, const RowCosts& costs,
                          StorageDtype features = StorageDtype::F32);
/// The same with the default costs (the bytes read).
GraphRows read_graph_rows(const GraphFileReader& reader, const Communicator& comm);

/// One layout's block of the normalized adjacency, and its transpose (Sum: patterns; otherwise patterns
/// with degree scales on host builds, values on device builds).
struct AdjacencyBlock {
  CsrSpmm<float> forward;     ///< rows = this rank's c block, columns = its a block
  CsrSpmm<float> transpose;   ///< rows = a block, columns = c block (0 x 0 when not has_transpose)
  int64_t nnz = 0;            ///< nonzeros of forward
  bool has_transpose = true;  ///< false: loaded for forward passes only (Graph3DOptions::transposes)
};

/// One phase of loading a graph onto the grid: seconds of its slowest rank, and the peak resident memory
/// of the largest rank when it ended (peaks only grow: the phase that raises it is the one to shrink).
struct LoadPhase {
  std::string name;        ///< "read", "labels", "degrees", "adjacency 0", ..., "features"
  double seconds = 0;      ///< slowest rank
  int64_t peak_bytes = 0;  ///< largest peak resident memory over the ranks, at the end of the phase
  int rounds = 1;          ///< rounds its exchange took (Graph3DOptions::exchange_budget)
};

/// What build_graph_3d needs besides the rows and the grid. Set the fields by name.
struct Graph3DOptions {
  /// The deepest model the graph serves. 0 (and 6 or more): any depth — layer l runs on layout l mod 6, so
  /// up to six adjacency layouts are built (layouts that coincide are shared). A model's depth below 6
  /// builds only the layouts models of at most that depth use: less memory and a shorter load.
  int layers = 0;
  PermuteMode permute = PermuteMode::Double;               ///< permutations of the rows for balance
  uint64_t seed = 0;                                       ///< keys the permutations
  Normalization normalization = Normalization::Symmetric;  ///< weights of the adjacency
  bool normalize_features = false;                         ///< divide each feature row by its sum
  /// Called on every rank as each load phase ends, with this rank's time and peak (before they are reduced
  /// over the ranks): a long load's progress. Must not communicate. Empty: nothing.
  std::function<void(const LoadPhase&)> on_phase{};
  /// Build each block's transpose, which the backward passes of full-graph training multiply by. Mini-batch
  /// training cuts its batches' transposes itself and evaluates forward only: false saves a copy of every
  /// block and the exchange of the transposes' entries.
  bool transposes = true;
  /// Bytes a rank's send buffers of one exchange round may hold in the adjacency phases (and the features
  /// phase, where rounds lower the peak): the rows are sent in as many rounds as that takes (every rank
  /// running as many as the one that needs most), so a rank that read many edges never materializes all of
  /// them at once; each rank receives about as much per round. 0: each phase in one round.
  int64_t exchange_budget = kDefaultExchangeBudget;
  /// Runs of consecutive nodes the permutations move as units (RandomPermutation): 0 picks
  /// kReorderedPermuteChunk for a file numbered for locality (GraphFileReader::has_original_ids) in
  /// load_graph_3d, else 1 (every node on its own).
  int64_t permute_chunk = 0;
  /// Refuse a graph without a labeled training node (what node tasks train on); false for a link task,
  /// which trains on node pairs.
  bool require_labels = true;
  /// Round each feature value (after any normalization) to bf16 and back: the values a model trained on bf16
  /// features saw (`tessera predict` of such a checkpoint).
  bool bf16_feature_values = false;
  /// How the graph holds the input block: F32 in Graph3D::features, Bf16 as bf16 bits in
  /// Graph3D::features_bf16 (half the bytes; each value rounded after any normalization, as
  /// bf16_feature_values rounds it). Graph layer 0 then aggregates first and reads the bits in its SpMM.
  StorageDtype feature_dtype = StorageDtype::F32;
};

/// The permutations' run length on a reordered graph file: long enough that a window of output rows belongs
/// to one community of the ordering, short next to a rank's block, so blocks stay balanced.
inline constexpr int64_t kReorderedPermuteChunk = 64;

/// Node data in one layout's output row order (padding rows last): what losses and metrics look up.
struct NodeData {
  Vector<int64_t> labels;  ///< class of each row (-1: unlabeled or padding)
  Matrix<int8_t> targets;  ///< multi-label graphs: rows x tasks (1, 0, -1 unobserved or padding); else empty
  /// Masks by name (1: the row's node is in that set): "train", "valid", "test" from a graph file, or
  /// GraphRows::split_names.
  std::vector<std::pair<std::string, Vector<uint8_t>>> masks;
  /// Whether a mask of that name is here.
  bool has_mask(const std::string& name) const;
  /// The mask named `name`; throws Error naming it and the masks there are when there is none.
  const Vector<uint8_t>& mask(const std::string& name) const;
};

/// What a model's batches need of a graph: its graph layers, and whether a layer has a Self term (a root
/// weight applied to each node's own row through self blocks). Batch sources ask the model for it.
struct BatchNeeds {
  int layers = 0;            ///< graph layers of the model
  bool self_blocks = false;  ///< build each layer's self block too
  /// Per graph layer, whether a training step's backward multiplies by its blocks' transposes (empty: every
  /// layer's does). Sources that build a block per step skip the transposes nobody reads.
  std::vector<bool> transposes;
  /// Whether graph layer `layer`'s backward reads its blocks' transposes.
  bool transposed(int layer) const { return size_t(layer) >= transposes.size() || transposes[size_t(layer)]; }
};

/// A graph distributed over a 3D replica of the grid.
struct Graph3D {
  NodeLayout layout;         ///< nodes, permutations, node blocks
  GridCoords coords;         ///< this rank's coordinates
  int layers = 0;            ///< deepest model it serves (0: any depth)
  int64_t num_features = 0;  ///< input width (unpadded)
  int64_t num_classes = 0;   ///< classes (unpadded); multi-label: tasks
  bool multi_label = false;  ///< labels are a matrix of tasks (NodeData::targets)
  Normalization normalization = Normalization::Symmetric;  ///< weights of `adjacency`
  std::vector<AdjacencyBlock> adjacency;                   ///< per layout: layer l uses layout l mod 6
  Matrix<float> features;  ///< layer 0 input block: rows by X (p2 order), columns by Y
  /// Graph3DOptions::feature_dtype: with Bf16 the input block is features_bf16 (bf16 bits, the same rows
  /// and columns) and `features` is empty.
  StorageDtype feature_dtype = StorageDtype::F32;
  Matrix<uint16_t> features_bf16;           ///< the input block as bf16 bits (feature_dtype Bf16), else empty
  Vector<int64_t> input_ids;                ///< node id of every local input row (-1: padding)
  std::vector<Vector<int64_t>> output_ids;  ///< per layout: node id of every local output row (-1: padding)
  std::vector<NodeData> node_data;          ///< per layout: labels and masks in its output rows' order
  int64_t num_train = 0;                    ///< labeled training nodes over the whole graph
  double max_nnz = 0;                       ///< largest nonzeros per block of layout 0 over the grid
  double mean_nnz = 0;                      ///< mean nonzeros per block of layout 0
  std::vector<LoadPhase> load_phases;       ///< the load's phases in order (see LoadPhase)

  /// Local output rows of `layer` that are real nodes (they come first; padding follows).
  int64_t valid_rows(int layer) const;
  /// Whether a model of `depth` graph layers can run on it (Graph3DOptions::layers).
  bool serves(int depth) const { return depth >= 1 && (layers == 0 || layers >= 6 || depth <= layers); }
  /// The node data in the order of a `depth`-layer model's logits rows (its last layer's output rows).
  const NodeData& node_data_for(int depth) const;
};

/// Collective over the grid's replica. Validates the rows (sizes, offsets, ids, labels, finite features,
/// contiguous blocks) and throws CollectiveError naming rows.name on a problem, on a graph without labeled
/// training nodes (unless Graph3DOptions::require_labels is false) and on a grid with more ranks along an
/// axis than the graph has nodes.
Graph3D build_graph_3d(const GraphRows& rows, const ProcessGrid& grid, const Graph3DOptions& options);
/// The same, freeing the rows' edges once the adjacency is built and their features once copied out, which
/// lowers the load's peak (on an ogbn-products-size graph on 8 ranks by a sixth); `rows` is left with its
/// labels and splits only.
Graph3D build_graph_3d(GraphRows&& rows, const ProcessGrid& grid, const Graph3DOptions& options);

/// Collective: read_graph_rows + build_graph_3d, over the grid's replica.
Graph3D load_graph_3d(const GraphFileReader& reader, const ProcessGrid& grid, const Graph3DOptions& options);

/// The identity of graph layer `layer` restricted to this rank's block (rows in the layer's output order,
/// columns in its input order): a node's own row, carried from the input layout to the output layout.
/// A pattern; computed locally.
AdjacencyBlock self_block(const NodeLayout& layout, const GridCoords& coords, int layer);

/// What one graph layer runs on: the full graph's static block, or a block cut from it for a mini-batch
/// (docs/architecture.md §5), whose sizes differ per block but agree within every reduction.
struct LayerGraph {
  const AdjacencyBlock* adjacency = nullptr;  ///< the normalized adjacency block (null for the input rows)
  const AdjacencyBlock* self = nullptr;       ///< the self block (self_block), when a layer asked for it
  Vector<const int64_t> output_ids;           ///< node of each local output row (-1: padding)
  int64_t valid_rows = 0;                     ///< leading output rows that are real nodes
  int64_t num_nodes = 0;                      ///< nodes of the (sub)graph: BatchNorm's count
  bool is_static = false;                     ///< the full graph: a static input's aggregation can be reused
};

/// What a model's forward runs on: the input rows and one view per graph layer. Owns the blocks it made.
struct GraphBatch {
  LayerGraph input;                                     ///< the input block's rows (no adjacency)
  std::vector<LayerGraph> layers;                       ///< one per graph layer
  std::vector<std::unique_ptr<AdjacencyBlock>> blocks;  ///< blocks the views point into, owned here
  /// The input block's data when it is the step's own copy, which the model may overwrite (null: it may
  /// not, e.g. the full graph's features). An input dropout then masks it in place instead of copying it:
  /// a mini-batch or sampled step held its input rows once more for that copy.
  const float* scratch_input = nullptr;
};

/// The full graph for a model that needs `needs`: every layer's static block, and its self block where
/// needs.self_blocks; throws Error where the graph does not serve that depth.
GraphBatch full_graph_batch(const Graph3D& g, const BatchNeeds& needs);

}  // namespace tessera
