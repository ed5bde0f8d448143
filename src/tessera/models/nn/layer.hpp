// SPDX-License-Identifier: BSD-3-Clause
// The layer API (docs/architecture.md §9). A layer runs on the 3D grid (one rank is the 1x1x1 grid): it
// receives the activations as a block (rows split over one axis, columns over another), returns its output
// block and, backward, the gradient of its input. A graph layer calls GraphMultiply (graph_multiply.hpp) for
// its distributed A·H·W and writes only its local epilogue; element-wise layers work on the block they get.
// Layers are built in a Sequential (sequential.hpp) through a LayerSlot, which hands each layer the grid,
// how kernels and collectives run, and the layout of its input.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/comm/process_grid.hpp"
#include "tessera/comm/reduced_precision.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/models/nn/parameter.hpp"
#include "tessera/models/nn/workspace.hpp"
#include "tessera/parallel3d/graph3d.hpp"

namespace tessera {

/// What a forward or backward pass needs to know besides its inputs.
struct PassInfo {
  bool training = false;  ///< dropout and BatchNorm's batch statistics on
  uint64_t seed = 0;      ///< keys the dropout masks
  int64_t epoch = 0;      ///< keys the dropout masks (a step index in mini-batch modes)
};

/// How layers run; the numbers they compute do not depend on it (except bf16's rounding).
struct RunOptions {
  KernelPath kernels = KernelPath::Auto;  ///< which SpMM, GEMM and element-wise kernels run
  int overlap_chunks = 0;                 ///< > 1: sparse products in row chunks with non-blocking sums
  CommDtype comm_dtype = CommDtype::F32;  ///< activations' all-reduces on the wire
  /// (A H) W layers keep no aggregation from forward to backward: backward aggregates again (one more
  /// SpMM and all-reduce over a per layer, the same bits), a layer's A H less memory per layer.
  bool recompute_aggregation = false;
  /// How the model's input features are held. Bf16 (bf16 bits, Model::forward_bf16): a GCN or GraphSAGE
  /// graph layer 0 aggregates first, (A X) W, so that its SpMM is its one read of X, and keeps its
  /// aggregation (fp32 unless activation_dtype says otherwise); a first layer that transforms its input (GAT)
  /// is handed the bits widened.
  StorageDtype feature_dtype = StorageDtype::F32;
  /// How an (A H) W layer keeps its aggregation A H from forward to backward, where only the weight gradient
  /// dW = (A H)^T dY reads it. Bf16: rounded as the forward computes it (the forward's product uses the fp32
  /// sums), widened again in backward: half the bytes of a layer's largest kept activation, the weight
  /// gradient from the rounded values. A cached static aggregation (layer 0 on fixed features), which the
  /// next forward reuses, stays fp32; so does every other kept activation.
  StorageDtype activation_dtype = StorageDtype::F32;
};

/// The layout of the activations at one point of a model: rows split over one axis, columns over another,
/// replicated over the third. After graph layer l: rows by its c, columns by its a. The input: rows by X
/// (graph layer 0's a), columns by Y (its b).
struct ActivationLayout {
  int after_layer = -1;         ///< graph layer whose output these are (-1: the input features)
  int64_t width = 0;            ///< global columns (unpadded)
  Axis rows_axis = Axis::X;     ///< splits the rows
  Axis cols_axis = Axis::Y;     ///< splits the columns
  Axis replica_axis = Axis::Z;  ///< holds copies of the block
  int64_t col_begin = 0;        ///< global column of local column 0
  int64_t local_cols = 0;       ///< columns of the local block (padded width / extent of cols_axis)
  bool row_owner = false;       ///< this rank writes a row vector of this layout (replica 0 of its rows)
};

/// The layout after graph layer `after_layer` (-1: the input) of `width` columns, for rank `me`.
ActivationLayout activation_layout(const GridShape& shape, const GridCoords& me, int after_layer,
                                   int64_t width);

/// Where a layer is built: the grid, how layers run, the model's seed, and the layout of the activations
/// the layer receives. A GraphMultiply takes the next graph layer and moves the slot to its output.
class LayerSlot {
 public:
  /// The slot before the first layer: the input features, `input_width` wide.
  LayerSlot(const ProcessGrid& grid, const RunOptions& run, uint64_t seed, int64_t input_width,
            PhaseTimers* timers);

  /// The grid the model runs on.
  const ProcessGrid& grid() const { return *grid_; }
  /// How layers run.
  const RunOptions& run() const { return run_; }
  /// Keys weight initialization (and, through PassInfo, dropout).
  uint64_t seed() const { return seed_; }
  /// Where SpMM / GEMM seconds are added (may be null).
  PhaseTimers* timers() const { return timers_; }
  /// The activations a layer built now receives.
  const ActivationLayout& layout() const { return layout_; }
  /// Graph layers taken so far (the next one's index).
  int graph_layers() const { return graph_layers_; }
  /// For GraphMultiply: takes the next graph layer, whose output (`out_width` wide) becomes the slot's
  /// activations; returns its index.
  int take_graph_layer(int64_t out_width);
  /// "layer<l>.<what>" for the graph layer whose output the activations are (l = 0 before any).
  std::string name(const std::string& what) const;
  /// For GraphMultiply: a layer has a Self term, so batches must carry self blocks.
  void request_self_blocks() { self_blocks_ = true; }
  /// Whether a layer asked for self blocks.
  bool self_blocks() const { return self_blocks_; }
  /// For a layer whose aggregation is defined with one weighting of the adjacency (GcnConv: Symmetric,
  /// SageConv: Mean): the model then needs a graph weighted so. Throws Error naming both layers when an
  /// earlier layer needs another (one graph carries one weighting).
  void require_aggregation(Normalization normalization, const std::string& layer);
  /// The weighting the model's layers need (none: no layer named one).
  std::optional<Normalization> aggregation() const { return aggregation_; }
  /// The scratch buffers the model's graph layers share (workspace.hpp).
  const std::shared_ptr<LayerWorkspace>& workspace() const { return workspace_; }

 private:
  const ProcessGrid* grid_;
  RunOptions run_;
  uint64_t seed_;
  PhaseTimers* timers_;
  ActivationLayout layout_;
  int graph_layers_ = 0;
  bool self_blocks_ = false;
  std::optional<Normalization> aggregation_;
  std::string aggregation_layer_;  // the first layer that named it
  std::shared_ptr<LayerWorkspace> workspace_ = std::make_shared<LayerWorkspace>();
};

/// A layer of a model on the grid.
class Layer {
 public:
  virtual ~Layer() = default;
  /// The output block (owned by the layer, valid until its next forward); `batch` holds the graph views
  /// (a graph layer uses batch.layers[its index], element-wise layers the rows of their slot).
  virtual Matrix<const float> forward(const Matrix<const float>& in, const GraphBatch& batch,
                                      const PassInfo& pass) = 0;
  /// Backward of the last forward: grad_out (dL/d output, which the layer may overwrite) sets the
  /// parameters' gradients; returns dL/d input when `want_input_grad` (it may alias grad_out), else an
  /// empty matrix.
  virtual Matrix<float> backward(const Matrix<float>& grad_out, bool want_input_grad,
                                 const PassInfo& pass) = 0;
  /// forward from an input held as bf16 bits (a model's first layer fed stored features), for a layer
  /// that reads_bf16_input(pass); the default throws Error naming the layer.
  virtual Matrix<const float> forward_bf16(const Matrix<const uint16_t>& in, const GraphBatch& batch,
                                           const PassInfo& pass);
  /// Whether forward_bf16 takes the bits in this pass: a layer that reads its input in a product (graph
  /// layer 0 aggregating first). A model hands any other first layer the bits widened into fp32
  /// (Sequential::forward_bf16).
  virtual bool reads_bf16_input(const PassInfo& pass) const {
    (void)pass;
    return false;
  }
  /// Whether forward returns its input unchanged in this pass (a dropout outside training): a model fed
  /// bf16 features hands them on to the next layer as they are.
  virtual bool passes_input_through(const PassInfo& pass) const {
    (void)pass;
    return false;
  }
  /// For a layer that took a graph layer: whether its backward, called with `want_input_grad`, multiplies
  /// by that graph layer's block transposes. Sources that build blocks per step skip the transposes nobody
  /// reads; a layer that reads one anyway throws Error. The default, true, is always safe.
  virtual bool backward_reads_transposes(bool want_input_grad) const {
    (void)want_input_grad;
    return true;
  }
  /// Trainable parameters with their placements (none by default).
  virtual std::vector<ParameterRef> parameters() { return {}; }
  /// State a checkpoint keeps besides the parameters (none by default).
  virtual std::vector<BufferRef> buffers() { return {}; }
  /// One line: what the layer computes ("gcn 1433 -> 16").
  virtual std::string describe() const = 0;
};

/// A 1 x width parameter over the columns of the slot's activations (a bias, a norm's scale or shift):
/// replicated over the ranks that hold other rows, so its gradient is the column sums of every rank's rows.
class RowParameter {
 public:
  /// Named slot.name(name), every entry `value`, at the slot's current layout.
  RowParameter(const LayerSlot& slot, const std::string& name, float value);
  /// The parameter and its placement (for Layer::parameters()).
  ParameterRef ref() { return {&param_, at_}; }
  /// The values (this rank's columns).
  Vector<const float> value() const { return param_.value; }
  /// The gradient (this rank's columns).
  const Vector<float>& grad() const { return param_.grad; }
  /// Collective over the rows' axis: grad = column sums of `g` over every row of the grid.
  void gradient_from(const Matrix<const float>& g, KernelPath path, const char* phase);
  /// Collective over the rows' axis: grad, holding this rank's partial sums, summed over the rows' ranks.
  void sum_gradient(const char* phase);

 private:
  Parameter param_;
  BlockPlacement at_;
  const Communicator* rows_;
};

/// The rows an element-wise layer at `layout` sees in `batch` (the input rows before any graph layer).
const LayerGraph& rows_at(const GraphBatch& batch, const ActivationLayout& layout);

}  // namespace tessera
