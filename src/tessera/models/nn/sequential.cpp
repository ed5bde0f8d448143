// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/sequential.hpp"

#include <set>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/nn/graph_multiply.hpp"

namespace tessera {

Sequential::Sequential(const ProcessGrid& grid, int64_t input_width, const RunOptions& run, uint64_t seed)
    : slot_(grid, run, seed, input_width, &timers_),
      embeddings_layout_(slot_.layout()),
      layout_before_(slot_.layout()) {}

void Sequential::require_new_names(const std::vector<ParameterRef>& params,
                                   const std::vector<BufferRef>& buffers) {
  std::set<std::string> names;
  for (const ParameterRef& p : parameters()) names.insert(p.param->name);
  for (const BufferRef& b : this->buffers()) names.insert(b.name);
  for (const ParameterRef& p : params)
    require(names.insert(p.param->name).second, "model: two parameters named ", p.param->name);
  for (const BufferRef& b : buffers)
    require(names.insert(b.name).second, "model: two buffers named ", b.name);
}

void Sequential::push(std::unique_ptr<Layer> layer) {
  require_new_names(layer->parameters(), layer->buffers());
  wants_input_grad_.push_back(has_parameters_);
  has_parameters_ = has_parameters_ || !layer->parameters().empty();
  // The input of the last layer that took a graph layer is the embedding.
  if (slot_.graph_layers() > graph_layers_seen_) {
    embedding_layer_ = layers_.size();
    embeddings_layout_ = layout_before_;
    if (graph_layers_seen_ > 0) stage_begin_.push_back(layers_.size());
    stage_layouts_.push_back(layout_before_);
  }
  backward_transposes_.resize(size_t(slot_.graph_layers()),
                              layer->backward_reads_transposes(wants_input_grad_.back()));
  graph_layers_seen_ = slot_.graph_layers();
  layout_before_ = slot_.layout();
  layers_.push_back(std::move(layer));
}

Matrix<const float> Model::forward_bf16(const Matrix<const uint16_t>&, const GraphBatch&, const PassInfo&) {
  fail("model: ", describe(), " takes fp32 input features");
}

Matrix<const float> Sequential::forward(const Matrix<const float>& input, const GraphBatch& batch,
                                        const PassInfo& pass) {
  return forward_from(0, input, batch, pass);
}

Matrix<const float> Sequential::forward_bf16(const Matrix<const uint16_t>& input, const GraphBatch& batch,
                                             const PassInfo& pass) {
  require(!layers_.empty(), "model: no layers");
  // Layers that hand their input on unchanged in this pass (an input dropout outside training) hand on the
  // bits; the next one reads them (graph layer 0's SpMM) or is handed them widened. The stage inputs and
  // embeddings those layers would have seen (the features) stay empty.
  size_t k = 0;
  while (k + 1 < layers_.size() && layers_[k]->passes_input_through(pass)) ++k;
  const bool widen = !layers_[k]->reads_bf16_input(pass);
  embeddings_ = Matrix<const float>();
  // One graph layer: the embeddings are the features, widened.
  if (embedding_layer_ <= k || widen) {
    if (widened_input_.extent(0) != input.extent(0) || widened_input_.extent(1) != input.extent(1))
      widened_input_ = Matrix<float>("model.widened_input", input.extent(0), input.extent(1));
    widen_bf16(input, widened_input_);
  }
  if (widen) {
    // The model's own copy: an input dropout in training masks it in place (as a step's gathered rows)
    // rather than copying it, so the features are held once in fp32 besides the bits. The views outlive
    // this forward: a layer's backward reads them.
    lent_batch_.input = batch.input;
    lent_batch_.layers = batch.layers;
    lent_batch_.scratch_input = widened_input_.data();
    return forward_from(k, widened_input_, lent_batch_, pass);
  }
  if (embedding_layer_ <= k) embeddings_ = widened_input_;
  const Matrix<const float> first = layers_[k]->forward_bf16(input, batch, pass);
  return forward_from(k + 1, first, batch, pass);
}

// Layers first.. on h, the output of the layers before (the model's input for first = 0).
Matrix<const float> Sequential::forward_from(size_t first, const Matrix<const float>& input,
                                             const GraphBatch& batch, const PassInfo& pass) {
  require(!layers_.empty(), "model: no layers");
  require(int64_t(batch.layers.size()) == graph_layers(), "model: ", graph_layers(),
          " graph layers, but the batch has ", batch.layers.size());
  stage_inputs_.assign(size_t(graph_layers()) + 1, Matrix<const float>());
  Matrix<const float> h = input;
  int stage = 0;  // stages begun before `first` ran without stage inputs here
  while (stage < graph_layers() && stage_begin_[size_t(stage)] < first) ++stage;
  for (size_t k = first; k < layers_.size(); ++k) {
    if (k == embedding_layer_) embeddings_ = h;
    if (stage < graph_layers() && k == stage_begin_[size_t(stage)]) stage_inputs_[size_t(stage++)] = h;
    h = layers_[k]->forward(h, batch, pass);
  }
  stage_inputs_.back() = h;
  return h;
}

Matrix<const float> Sequential::forward_stage(int l, const Matrix<const float>& input,
                                              const GraphBatch& batch, const PassInfo& pass) {
  require(l >= 0 && l < graph_layers(), "model: no graph layer ", l, " (", graph_layers(), " in all)");
  require(int64_t(batch.layers.size()) > l, "model: the batch has no view for graph layer ", l);
  const size_t end = l + 1 < graph_layers() ? stage_begin_[size_t(l + 1)] : layers_.size();
  Matrix<const float> h = input;
  for (size_t k = stage_begin_[size_t(l)]; k < end; ++k) {
    if (k == embedding_layer_) embeddings_ = h;
    h = layers_[k]->forward(h, batch, pass);
  }
  return h;
}

Matrix<const float> Sequential::graph_layer_input(int l) const {
  require(l >= 0 && size_t(l) < stage_inputs_.size(), "model: no representation after ", l,
          " graph layers (run a forward first; ", graph_layers(), " graph layers)");
  return stage_inputs_[size_t(l)];
}

const ActivationLayout& Sequential::graph_layer_input_layout(int l) const {
  require(l >= 0 && l <= graph_layers(), "model: no representation after ", l, " graph layers (",
          graph_layers(), " graph layers)");
  return size_t(l) < stage_layouts_.size() ? stage_layouts_[size_t(l)] : slot_.layout();
}

void Sequential::backward(const Matrix<float>& grad_logits, const PassInfo& pass) {
  Matrix<float> grad = grad_logits;
  for (size_t k = layers_.size(); k-- > 0;) {
    grad = layers_[k]->backward(grad, wants_input_grad_[k], pass);
    if (!wants_input_grad_[k]) break;  // nothing below has parameters
  }
}

std::vector<ParameterRef> Sequential::parameters() {
  std::vector<ParameterRef> out;
  for (auto& layer : layers_)
    for (const ParameterRef& p : layer->parameters()) out.push_back(p);
  for (auto& extra : attached_)
    for (const ParameterRef& p : extra->parameters()) out.push_back(p);
  return out;
}

void Sequential::attach(std::shared_ptr<AttachedParameters> extra) {
  require(extra != nullptr, "Sequential::attach: nothing to attach");
  require_new_names(extra->parameters(), {});
  attached_.push_back(std::move(extra));
}

std::vector<BufferRef> Sequential::buffers() {
  std::vector<BufferRef> out;
  for (auto& layer : layers_)
    for (const BufferRef& b : layer->buffers()) out.push_back(b);
  return out;
}

Matrix<float> Sequential::logits_gradient_buffer(int64_t rows, int64_t cols) {
  return slot_.workspace()->input_gradient(rows, cols);
}

std::string Sequential::describe() const {
  std::string s = description_;
  if (s.empty())
    for (const auto& layer : layers_) s += (s.empty() ? "" : "; ") + layer->describe();
  for (const auto& extra : attached_) s += " + " + extra->describe();
  return s;
}

}  // namespace tessera
