// SPDX-License-Identifier: BSD-3-Clause
// The distributed product of one graph layer on the 3D grid (docs/architecture.md §4, pmm.hpp): out = sum_t
// Op_t H W_t over its terms — Aggregate (the graph's normalized adjacency) and Self (a node's own row:
// GraphSAGE's root weight, a Linear layer). It takes the next graph layer of its slot, owns its weights
// ({value, placement}, initialized from global coordinates, so any grid starts from the same matrices) and
// its workspace, and chooses (A H) W or transform-first A (H W) itself. A layer calls forward / backward and
// writes only its epilogue; the role rotation, padding and block ownership stay in here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/models/nn/layer.hpp"
#include "tessera/parallel3d/pmm.hpp"

namespace tessera {

/// One term of a graph layer's product.
enum class Term {
  Aggregate,  ///< the graph's normalized adjacency: a node's in-neighbours
  Self        ///< the node itself
};

/// What a GraphMultiply computes besides its width.
struct MultiplyOptions {
  std::vector<Term> terms{Term::Aggregate};  ///< one weight matrix per term
  /// Checkpoint names of the weights, one per term, after "layer<l>." (default "weight" for a single
  /// term, else "neighbour_weight" and "root_weight").
  std::vector<std::string> weight_names;
  /// The input never changes between passes on the static graph (layer 0 fed the fixed features without
  /// input dropout): A X is then aggregated once and reused.
  bool cached_input = false;
};

/// The product of one graph layer; see the file comment.
class GraphMultiply {
 public:
  /// Takes the slot's next graph layer: the slot's activations in, `out_width` columns out.
  GraphMultiply(LayerSlot& slot, int64_t out_width, MultiplyOptions options = {});
  GraphMultiply(const GraphMultiply&) = delete;
  GraphMultiply& operator=(const GraphMultiply&) = delete;

  /// out (this rank's output block) = sum_t Op_t in W_t on batch.layers[layer()]. Owned; valid until the
  /// next forward. Under bf16 activations only a training pass (`pass.training`) rounds and keeps its
  /// aggregation: after any other forward, backward throws.
  Matrix<float> forward(const Matrix<const float>& in, const GraphBatch& batch, const PassInfo& pass);
  /// forward for an input held as bf16 bits: graph layer 0 of a model built for bf16 features
  /// (RunOptions::feature_dtype), which aggregates first and keeps its aggregation (fp32, or bf16 bits under
  /// RunOptions::activation_dtype); the product reads
  /// the bits (CsrSpmm::apply_rows_bf16), so the result is the fp32 forward's on the widened values, bit
  /// for bit. Throws Error on any other layer.
  Matrix<float> forward_bf16(const Matrix<const uint16_t>& in, const GraphBatch& batch, const PassInfo& pass);
  /// Whether forward_bf16 applies: graph layer 0 of a model built for bf16 features.
  bool reads_bf16_input() const { return bf16_input_; }
  /// Sets every weight's gradient from grad_out (the output block's gradient); returns dL/d in when
  /// `want_input_grad`, else an empty matrix. dL/d in lives in the model's workspace (workspace.hpp):
  /// valid until the next graph layer's backward, which reads it as its grad_out and then overwrites it.
  Matrix<float> backward(const Matrix<const float>& grad_out, bool want_input_grad);
  /// Whether backward(_, want_input_grad) multiplies by the blocks' transposes: for the input gradient,
  /// and always when it transforms first (dL/dW = H^T (A^T dL/d out)); (A H) W without an input gradient
  /// reads only its aggregation (kept or computed again with the forward blocks).
  bool backward_reads_transposes(bool want_input_grad) const { return want_input_grad || transform_first_; }

  /// One weight per term, in term order.
  std::vector<ParameterRef> parameters();
  /// The graph layer it took.
  int layer() const { return layer_; }
  /// Layout of its input (the slot's activations when it was built).
  const ActivationLayout& input_layout() const { return in_; }
  /// Layout of its output.
  const ActivationLayout& output_layout() const { return out_; }
  /// The terms, in order.
  const std::vector<Term>& terms() const { return options_.terms; }
  /// The communicators and settings of its schedule.
  const LayerComms& comms() const { return comms_; }

 private:
  LayerOperators operators(const LayerGraph& graph) const;
  Matrix<const float> weights() const;
  Matrix<float> weight_grads() const;
  // Checks the input block's shape against the batch's operators and sets the forward state; returns the
  // graph layer's view.
  const LayerGraph& begin_forward(int64_t in_rows, int64_t in_cols, const GraphBatch& batch);
  // The output block and the kept aggregation, reused where a static input was aggregated before.
  template <class In>
  Matrix<float> forward_kept(const Matrix<const In>& in, const LayerGraph& graph, const PassInfo& pass);

  MultiplyOptions options_;
  ActivationLayout in_, out_;
  int layer_;
  LayerComms comms_;
  bool transform_first_;
  bool recompute_;   // an (A H) W layer that aggregates again in backward instead of keeping agg
  bool bf16_input_;  // graph layer 0 of a model fed bf16 features: (A X) W, agg kept
  bool bf16_agg_;    // RunOptions::activation_dtype Bf16 on an (A H) W layer that keeps agg
  // What the last forward of an (A H) W layer kept for backward: agg_ in fp32, its bf16 bits (agg_bits_),
  // or nothing (a forward outside training under bf16 activations).
  enum class Kept { Fp32, Bf16, Nothing } kept_ = Kept::Fp32;
  int64_t in_b_, w_cols_;
  Vector<float> values_, grads_;  // every term's block, stacked by rows
  std::vector<Parameter> weights_;
  std::vector<BlockPlacement> placements_;
  // Forward state kept for backward (leading rows of buffers that grow with headroom); the temporaries and
  // the input gradient live in the model's shared workspace.
  LayerOperators ops_;
  Matrix<const float> input_;
  const void* cached_for_ = nullptr;
  Matrix<float> agg_, out_buffer_;
  Matrix<uint16_t> agg_bits_;
  std::shared_ptr<LayerWorkspace> workspace_;
  int64_t rows_in_ = 0, rows_out_ = 0;
};

}  // namespace tessera
