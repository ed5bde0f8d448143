// SPDX-License-Identifier: BSD-3-Clause
// Models: what the Trainer drives (Model), and Sequential, a model made of layers in order. Layers are
// added with add<L>(args...), which builds L(slot, args...) at the slot after the previous layer, so each
// layer knows the grid and the layout of what it receives:
//   Sequential model(grid, features);
//   model.add<Dropout>(0.5f);
//   ConvOptions hidden;
//   hidden.relu = true;
//   hidden.dropout = 0.5f;  // C++20: model.add<GcnConv>(16, ConvOptions{.relu = true, .dropout = 0.5f})
//   model.add<GcnConv>(16, hidden);
//   model.add<GcnConv>(classes);
// An application can also derive from Model directly.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/models/nn/layer.hpp"

namespace tessera {

/// Parameters trained with a model that its forward does not apply (a link decoder's, which the loss
/// applies and writes the gradients of): Sequential::attach lists them after its layers'.
class AttachedParameters {
 public:
  virtual ~AttachedParameters() = default;
  /// Every trainable parameter with its placement.
  virtual std::vector<ParameterRef> parameters() = 0;
  /// One line (part of the model's description, which a checkpoint must match).
  virtual std::string describe() const = 0;
};

/// A model on the grid: logits from the input block, the parameters' gradients from the logits'.
class Model {
 public:
  virtual ~Model() = default;
  /// The logits block (output_layout()); `batch` holds the graph views of every graph layer.
  virtual Matrix<const float> forward(const Matrix<const float>& input, const GraphBatch& batch,
                                      const PassInfo& pass) = 0;
  /// forward from input features held as bf16 bits (Graph3D::features_bf16); the model must have been
  /// built for them (RunOptions::feature_dtype). The default throws Error.
  virtual Matrix<const float> forward_bf16(const Matrix<const uint16_t>& input, const GraphBatch& batch,
                                           const PassInfo& pass);
  /// Backward of the last forward from dL/d logits (overwritten): sets every parameter's gradient.
  virtual void backward(const Matrix<float>& grad_logits, const PassInfo& pass) = 0;
  /// Every trainable parameter with its placement.
  virtual std::vector<ParameterRef> parameters() = 0;
  /// Every buffer a checkpoint keeps.
  virtual std::vector<BufferRef> buffers() = 0;
  /// Layout of the logits (columns: classes).
  virtual const ActivationLayout& output_layout() const = 0;
  /// Graph layers (the batch must hold this many views).
  virtual int graph_layers() const = 0;
  /// Whether a layer has a Self term: the batches must carry self blocks.
  virtual bool needs_self_blocks() const = 0;
  /// Per graph layer, whether its backward multiplies by the layer's block transposes (BatchNeeds::
  /// transposes). The default: every layer's does.
  virtual std::vector<bool> backward_transposes() const {
    return std::vector<bool>(size_t(graph_layers()), true);
  }
  /// What its batches need of a graph: its depth, self blocks and transposes (full_graph_batch and the
  /// builders).
  BatchNeeds batch_needs() const {
    return BatchNeeds{graph_layers(), needs_self_blocks(), backward_transposes()};
  }
  /// The weighting of the adjacency the model's layers are defined with (none: any, or no aggregation).
  /// Sources built from a model refuse a graph weighted otherwise.
  virtual std::optional<Normalization> aggregation() const { return std::nullopt; }
  /// Identifies the model's shape; a checkpoint must come from a model with the same description.
  virtual std::string describe() const = 0;
  /// The last forward's input of the last graph layer: every node's last hidden representation
  /// (--save-embeddings), and its layout.
  virtual Matrix<const float> embeddings() const = 0;
  /// See embeddings().
  virtual const ActivationLayout& embeddings_layout() const = 0;
  /// The grid it runs on.
  virtual const ProcessGrid& grid() const = 0;
  /// The run's seed: it keyed the weights' initialization, and keys dropout and sampling unless a trainer
  /// or source is given another.
  virtual uint64_t seed() const { return 0; }
  /// Seconds per compute phase ("spmm", "gemm"), or null.
  virtual const PhaseTimers* timers() const { return nullptr; }
  /// Where the trainer may write dL/d logits (rows x cols) for backward, or an empty matrix: the trainer
  /// then keeps a buffer of its own. Sequential hands out its layers' shared input-gradient buffer, which
  /// the last layer reads in full before it writes its own input gradient there.
  virtual Matrix<float> logits_gradient_buffer(int64_t rows, int64_t cols) {
    (void)rows, (void)cols;
    return Matrix<float>();
  }
};

/// Layers applied in order.
class Sequential : public Model {
 public:
  /// An empty model whose input is `input_width` features wide, its weights initialized from `seed`.
  Sequential(const ProcessGrid& grid, int64_t input_width, const RunOptions& run = {}, uint64_t seed = 0);
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  /// Builds L(slot, args...) after the last layer and appends it.
  template <class L, class... Args>
  L& add(Args&&... args) {
    auto layer = std::make_unique<L>(slot_, std::forward<Args>(args)...);
    L& ref = *layer;
    push(std::move(layer));
    return ref;
  }
  /// The slot the next layer would be built at (its input layout).
  const LayerSlot& slot() const { return slot_; }
  /// Layers so far.
  size_t size() const { return layers_.size(); }
  /// Layer k.
  Layer& layer(size_t k) { return *layers_[k]; }
  /// Replaces describe()'s default (the layers' own descriptions).
  void set_description(std::string text) { description_ = std::move(text); }
  /// Parameters trained with the model outside its forward (a link decoder's): parameters() lists them
  /// after the layers', describe() ends with " + " and their description. Names must stay unique.
  void attach(std::shared_ptr<AttachedParameters> extra);

  Matrix<const float> forward(const Matrix<const float>& input, const GraphBatch& batch,
                              const PassInfo& pass) override;
  /// Its first layer reads the bits where it can (Layer::reads_bf16_input: a graph layer that aggregates
  /// first); any other (an input dropout in training, a GAT, which transforms first) is handed them
  /// widened into fp32, a copy the model keeps and a dropout masks in place. The rest as forward.
  /// graph_layer_input(0) is that copy where the model's first layer took it, else empty.
  Matrix<const float> forward_bf16(const Matrix<const uint16_t>& input, const GraphBatch& batch,
                                   const PassInfo& pass) override;
  /// Graph layer l's stage alone: the layers from the one that takes graph layer l (from the first layer
  /// for l = 0) up to the one that takes graph layer l + 1 (to the end for the last). Its input is what
  /// graph_layer_input(l) is after a whole forward; its output, graph_layer_input(l + 1) (the logits for
  /// the last). `batch` needs only batch.layers[l] (and batch.input for l = 0). Layer-wise inference runs
  /// the stages one after another over every node (inference.hpp); valid until the stage's next forward.
  Matrix<const float> forward_stage(int l, const Matrix<const float>& input, const GraphBatch& batch,
                                    const PassInfo& pass);
  /// The input of graph layer l's stage in the last forward (l = 0: the model's input; l = graph_layers():
  /// the logits): the node representation after l graph layers. Valid until the next forward.
  Matrix<const float> graph_layer_input(int l) const;
  /// The layout of graph_layer_input(l).
  const ActivationLayout& graph_layer_input_layout(int l) const;
  void backward(const Matrix<float>& grad_logits, const PassInfo& pass) override;
  std::vector<ParameterRef> parameters() override;
  std::vector<BufferRef> buffers() override;
  const ActivationLayout& output_layout() const override { return slot_.layout(); }
  int graph_layers() const override { return slot_.graph_layers(); }
  bool needs_self_blocks() const override { return slot_.self_blocks(); }
  /// A graph layer's transposes are read unless its layer says otherwise for the input gradient it is
  /// asked for (none below the first layer with parameters).
  std::vector<bool> backward_transposes() const override { return backward_transposes_; }
  std::optional<Normalization> aggregation() const override { return slot_.aggregation(); }
  std::string describe() const override;
  Matrix<const float> embeddings() const override { return embeddings_; }
  const ActivationLayout& embeddings_layout() const override { return embeddings_layout_; }
  const ProcessGrid& grid() const override { return slot_.grid(); }
  uint64_t seed() const override { return slot_.seed(); }
  const PhaseTimers* timers() const override { return &timers_; }
  Matrix<float> logits_gradient_buffer(int64_t rows, int64_t cols) override;

 private:
  void push(std::unique_ptr<Layer> layer);
  Matrix<const float> forward_from(size_t first, const Matrix<const float>& input, const GraphBatch& batch,
                                   const PassInfo& pass);
  // Throws Error where a name of `params` or `buffers` is already the model's (or repeats).
  void require_new_names(const std::vector<ParameterRef>& params, const std::vector<BufferRef>& buffers);
  PhaseTimers timers_;
  LayerSlot slot_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<bool> wants_input_grad_;     // some earlier layer has parameters
  std::vector<bool> backward_transposes_;  // per graph layer
  bool has_parameters_ = false;
  int graph_layers_seen_ = 0;
  size_t embedding_layer_ = 0;  // the layer that took the last graph layer
  ActivationLayout embeddings_layout_, layout_before_;
  Matrix<const float> embeddings_;
  // forward_bf16's input widened: for a first layer that takes fp32 input, and for a one-graph-layer
  // model's embeddings.
  Matrix<float> widened_input_;
  GraphBatch lent_batch_;  // forward_bf16's batch views, with widened_input_ as the step's own input
  // Graph layer l's stage begins at layers_[stage_begin_[l]] (stage 0 at layer 0); one more entry: the end.
  std::vector<size_t> stage_begin_ = {0};
  std::vector<ActivationLayout> stage_layouts_;    // the input layout of each stage, then the output's
  std::vector<Matrix<const float>> stage_inputs_;  // in the last forward, the same
  std::string description_;
  std::vector<std::shared_ptr<AttachedParameters>> attached_;
};

}  // namespace tessera
