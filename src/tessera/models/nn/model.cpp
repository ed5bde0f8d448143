// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/model.hpp"

#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/models/nn/activation.hpp"
#include "tessera/models/nn/attention.hpp"
#include "tessera/models/nn/conv.hpp"

namespace tessera {

Normalization normalization_for(ModelKind kind) {
  return kind == ModelKind::Sage ? Normalization::Mean : Normalization::Symmetric;
}

std::string ModelConfig::describe() const {
  std::ostringstream s;
  s << model_kind_name(kind) << ' ' << layers << 'x' << hidden << " (in " << in << ", out " << out
    << ", norm " << norm_name(norm);
  if (kind == ModelKind::Gat) s << ", heads " << heads << ", output heads " << output_heads;
  s << ')';
  return s.str();
}

namespace {
// Bounds that keep every size product far from overflow; no model comes near them.
constexpr int kMaxLayers = 256;
constexpr int64_t kMaxWidth = int64_t(1) << 24;
}  // namespace

void ModelConfig::validate() const {
  require(layers >= 1 && layers <= kMaxLayers, "`layers` must be in [1, ", kMaxLayers, "], not ", layers);
  require((hidden >= 1 || layers == 1) && hidden <= kMaxWidth, "`hidden` must be in [1, ", kMaxWidth,
          "], not ", hidden);
  require(in >= 1 && out >= 1, "the model needs at least one input feature and one class (in ", in, ", out ",
          out, ")");
  require(dropout >= 0 && dropout < 1, "`dropout` must be in [0, 1), not ", dropout);
  require(input_dropout >= 0 && input_dropout < 1, "input dropout must be in [0, 1), not ", input_dropout);
  require(heads >= 1 && heads <= 1024, "`heads` must be in [1, 1024], not ", heads);
  require(output_heads >= 1 && output_heads <= 1024, "`output-heads` must be in [1, 1024], not ",
          output_heads);
  require(attention_dropout >= 0 && attention_dropout < 1, "`attention-dropout` must be in [0, 1), not ",
          attention_dropout);
  require(kind == ModelKind::Gat || (heads == 8 && output_heads == 1 && attention_dropout == 0),
          "`heads`, `output-heads` and `attention-dropout` are for `model` gat");
}

namespace {

// A hidden layer's norm after its convolution, with ReLU and dropout fused or as layers of their own.
void add_norm(Sequential& model, const ModelConfig& c) {
  NormOptions norm;
  if (c.fuse) norm.relu = true, norm.dropout = c.dropout;
  if (c.norm == NormKind::Batch)
    model.add<BatchNorm>(norm);
  else
    model.add<RmsNorm>(norm);
  if (c.fuse) return;
  model.add<ReLU>();
  if (c.dropout > 0) model.add<Dropout>(c.dropout);
}

void add_gat_layers(Sequential& model, const ModelConfig& c) {
  if (c.input_dropout > 0) model.add<Dropout>(c.input_dropout);
  for (int l = 0; l < c.layers; ++l) {
    const bool hidden = l + 1 < c.layers, normed = hidden && c.norm != NormKind::None;
    GatOptions gat;
    gat.heads = hidden ? c.heads : c.output_heads;
    gat.concat = hidden;
    gat.attention_dropout = c.attention_dropout;
    gat.bias = !(normed && c.norm == NormKind::Batch);
    gat.activation = hidden && !normed ? Activation::Elu : Activation::None;
    gat.dropout = hidden && !normed ? c.dropout : 0.0f;
    model.add<GatConv>(hidden ? c.hidden : c.out, gat);
    if (normed) add_norm(model, c);
  }
}

template <class Conv>
void add_layers(Sequential& model, const ModelConfig& c, bool static_features) {
  if (c.input_dropout > 0) model.add<Dropout>(c.input_dropout);
  for (int l = 0; l < c.layers; ++l) {
    const bool hidden = l + 1 < c.layers, normed = hidden && c.norm != NormKind::None;
    ConvOptions conv;
    conv.bias = !(normed && c.norm == NormKind::Batch);  // BatchNorm's shift replaces the bias
    conv.relu = hidden && !normed;
    conv.dropout = hidden && !normed ? c.dropout : 0.0f;
    conv.cached_input = l == 0 && static_features && c.input_dropout == 0;
    model.add<Conv>(hidden ? c.hidden : c.out, conv);
    if (normed) add_norm(model, c);
  }
}

}  // namespace

std::unique_ptr<Sequential> build_model(const ModelConfig& config, const ProcessGrid& grid,
                                        const RunOptions& run, bool static_features) {
  config.validate();
  auto model = std::make_unique<Sequential>(grid, config.in, run, config.seed);
  if (config.kind == ModelKind::Gcn)
    add_layers<GcnConv>(*model, config, static_features);
  else if (config.kind == ModelKind::Sage)
    add_layers<SageConv>(*model, config, static_features);
  else
    add_gat_layers(*model, config);
  model->set_description(config.describe());
  return model;
}

}  // namespace tessera
