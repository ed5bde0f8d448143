// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/conv.hpp"

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/nn/random_streams.hpp"

namespace tessera {

namespace {
MultiplyOptions with_cache(MultiplyOptions m, const ConvOptions& o) {
  m.cached_input = o.cached_input;
  return m;
}
}  // namespace

GraphConv::GraphConv(LayerSlot& slot, int64_t out_width, MultiplyOptions multiply, const ConvOptions& options,
                     std::string kind)
    : multiply_(slot, out_width, with_cache(std::move(multiply), options)),
      options_(options),
      kind_(std::move(kind)) {
  require(options_.dropout >= 0 && options_.dropout < 1, "dropout must be in [0, 1), not ", options_.dropout);
  if (options_.bias) bias_ = std::make_unique<RowParameter>(slot, "bias", 0.0f);
}

std::vector<ParameterRef> GraphConv::parameters() {
  std::vector<ParameterRef> out = multiply_.parameters();
  if (bias_) out.push_back(bias_->ref());
  return out;
}

std::string GraphConv::describe() const {
  std::string s = kind_ + " " + std::to_string(multiply_.input_layout().width) + " -> " +
                  std::to_string(multiply_.output_layout().width);
  if (options_.relu) s += ", relu";
  if (options_.dropout > 0) s += ", dropout " + std::to_string(options_.dropout).substr(0, 4);
  return s;
}

DropoutMask GraphConv::dropout(const PassInfo& pass) const {
  if (!pass.training || options_.dropout <= 0) return DropoutMask();
  return DropoutMask(options_.dropout, pass.seed, streams::dropout(pass.epoch, multiply_.layer()), 0,
                     multiply_.output_layout().col_begin)
      .with_row_ids(rows_);
}

Matrix<const float> GraphConv::forward(const Matrix<const float>& in, const GraphBatch& batch,
                                       const PassInfo& pass) {
  out_ = multiply_.forward(in, batch, pass);
  return epilogue(batch, pass);
}

Matrix<const float> GraphConv::forward_bf16(const Matrix<const uint16_t>& in, const GraphBatch& batch,
                                            const PassInfo& pass) {
  out_ = multiply_.forward_bf16(in, batch, pass);
  return epilogue(batch, pass);
}

// Bias, ReLU and dropout on the product in out_, in place. A layer with none of them (one a norm follows,
// which has its own shift, ReLU and dropout) skips the pass: it would read and write the whole block to
// turn -0 into +0.
Matrix<const float> GraphConv::epilogue(const GraphBatch& batch, const PassInfo& pass) {
  rows_ = batch.layers[size_t(multiply_.layer())].output_ids;
  const DropoutMask mask = dropout(pass);
  if (!bias_ && !options_.relu && !mask.active()) return out_;
  const Vector<const float> bias = bias_ ? bias_->value() : Vector<const float>();
  bias_relu_dropout_forward<float>(out_, bias, options_.relu, mask, multiply_.comms().kernels);
  return out_;
}

Matrix<float> GraphConv::backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass) {
  const KernelPath kernels = multiply_.comms().kernels;
  const bool epilogue = options_.relu || (pass.training && options_.dropout > 0);
  if (epilogue && bias_) {
    // One pass over the gradient instead of two: each row is rewritten where the bias gradient sums it.
    relu_dropout_backward_column_sums<float>(grad_out, out_, options_.relu, dropout(pass), bias_->grad(),
                                             kernels);
    bias_->sum_gradient(phase::kBackwardWeightsC);
  } else {
    if (epilogue) bias_relu_dropout_backward<float>(grad_out, out_, options_.relu, dropout(pass), kernels);
    if (bias_) bias_->gradient_from(grad_out, kernels, phase::kBackwardWeightsC);
  }
  return multiply_.backward(grad_out, want_input_grad);
}

GcnConv::GcnConv(LayerSlot& slot, int64_t out_width, const ConvOptions& options)
    : GraphConv(slot, out_width, MultiplyOptions{{Term::Aggregate}, {"weight"}, false}, options, "gcn") {
  slot.require_aggregation(Normalization::Symmetric, "gcn");
}

SageConv::SageConv(LayerSlot& slot, int64_t out_width, const ConvOptions& options)
    : GraphConv(slot, out_width,
                MultiplyOptions{{Term::Aggregate, Term::Self}, {"neighbour_weight", "root_weight"}, false},
                options, "sage") {
  slot.require_aggregation(Normalization::Mean, "sage");
}

Linear::Linear(LayerSlot& slot, int64_t out_width, const ConvOptions& options)
    : GraphConv(slot, out_width, MultiplyOptions{{Term::Self}, {"weight"}, false}, options, "linear") {}

}  // namespace tessera
