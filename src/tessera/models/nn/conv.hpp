// SPDX-License-Identifier: BSD-3-Clause
// Graph convolutions built on GraphMultiply: the product, then bias, ReLU and dropout in one pass over the
// output block. GcnConv aggregates with the symmetric-normalized adjacency (Normalization::Symmetric);
// SageConv adds a root weight on the node's own row to the mean of its neighbours (Normalization::Mean);
// Linear transforms each node's own row alone (a Self term: no neighbours). Each tells the model the
// weighting it needs (LayerSlot::require_aggregation), so a source built from the model refuses a graph
// weighted otherwise, and one model cannot mix GCN and SAGE layers. A layer of one's own follows the same
// pattern: a GraphMultiply and an epilogue.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/nn/graph_multiply.hpp"

namespace tessera {

/// What runs after the product, in one pass over the output block.
struct ConvOptions {
  bool bias = true;      ///< add a bias (leave it out before BatchNorm, whose shift replaces it)
  bool relu = false;     ///< then ReLU
  float dropout = 0.0f;  ///< then dropout on training passes, keyed by (seed, epoch, layer, node, column)
  bool cached_input = false;  ///< see MultiplyOptions::cached_input
};

/// A GraphMultiply followed by bias, ReLU and dropout.
class GraphConv : public Layer {
 public:
  /// `kind` names it in describe() ("gcn", "sage", ...).
  GraphConv(LayerSlot& slot, int64_t out_width, MultiplyOptions multiply, const ConvOptions& options,
            std::string kind);
  Matrix<const float> forward(const Matrix<const float>& in, const GraphBatch& batch,
                              const PassInfo& pass) override;
  /// Graph layer 0 of a model built for bf16 features (GraphMultiply::forward_bf16).
  Matrix<const float> forward_bf16(const Matrix<const uint16_t>& in, const GraphBatch& batch,
                                   const PassInfo& pass) override;
  bool reads_bf16_input(const PassInfo&) const override { return multiply_.reads_bf16_input(); }
  Matrix<float> backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass) override;
  /// GraphMultiply::backward_reads_transposes.
  bool backward_reads_transposes(bool want_input_grad) const override {
    return multiply_.backward_reads_transposes(want_input_grad);
  }
  std::vector<ParameterRef> parameters() override;
  std::string describe() const override;
  /// The product it runs.
  const GraphMultiply& multiply() const { return multiply_; }

 private:
  DropoutMask dropout(const PassInfo& pass) const;
  Matrix<const float> epilogue(const GraphBatch& batch, const PassInfo& pass);
  GraphMultiply multiply_;
  ConvOptions options_;
  std::string kind_;
  std::unique_ptr<RowParameter> bias_;
  Matrix<float> out_;
  Vector<const int64_t> rows_;  // node ids of the output rows of the last forward (dropout keys)
};

/// GCN (Kipf & Welling): out = A_hat H W + b.
class GcnConv : public GraphConv {
 public:
  /// `out_width` output features; the input width is the slot's.
  GcnConv(LayerSlot& slot, int64_t out_width, const ConvOptions& options = {});
};

/// GraphSAGE-mean (Hamilton et al.): out = mean_{u in N(v)} H_u W_neighbour + H_v W_root + b.
class SageConv : public GraphConv {
 public:
  /// `out_width` output features; the input width is the slot's.
  SageConv(LayerSlot& slot, int64_t out_width, const ConvOptions& options = {});
};

/// out = H_v W + b per node, no neighbours; it still moves the rows to the next graph layer's layout.
class Linear : public GraphConv {
 public:
  /// `out_width` output features; the input width is the slot's.
  Linear(LayerSlot& slot, int64_t out_width, const ConvOptions& options = {});
};

}  // namespace tessera
