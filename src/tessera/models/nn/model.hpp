// SPDX-License-Identifier: BSD-3-Clause
// The model the command line describes (--model, --layers, --hidden, --norm, --dropout): a Sequential of
// library layers, the same on one rank and on any grid. An application builds its own Sequential (or
// Model) instead when it wants other layers.
#pragma once

#include <memory>
#include <string>

#include "tessera/core/enum_names.hpp"
#include "tessera/models/nn/norm.hpp"
#include "tessera/models/nn/sequential.hpp"

namespace tessera {

/// The graph convolution of every layer.
enum class ModelKind {
  Gcn,   ///< GcnConv
  Sage,  ///< SageConv
  Gat    ///< GatConv (attention.hpp)
};
/// The names of ModelKind's values (core/enum_names.hpp): what the command line, the bindings and messages
/// use.
inline constexpr EnumName<ModelKind> kModelKindNames[] = {
    {ModelKind::Gcn, "gcn"}, {ModelKind::Sage, "sage"}, {ModelKind::Gat, "gat"}};
/// gcn, sage or gat: the name of a value.
inline const char* model_kind_name(ModelKind kind) {
  return name_of(kModelKindNames, kind);
}
/// The adjacency weights a kind aggregates with: Symmetric for GCN (and GAT, which reads its pattern: every
/// in-edge and the self loop), Mean for GraphSAGE.
Normalization normalization_for(ModelKind kind);

/// A stack of graph convolutions.
struct ModelConfig {
  ModelKind kind = ModelKind::Gcn;  ///< the convolution
  int layers = 2;                   ///< graph layers
  int64_t in = 0;                   ///< input features (from the data)
  int64_t hidden = 16;              ///< width of every hidden layer (GAT: per head)
  int64_t out = 0;                  ///< classes (from the data)
  float dropout = 0.5f;             ///< on hidden layers' outputs
  float input_dropout = 0.5f;       ///< on the input features
  NormKind norm = NormKind::None;   ///< after every hidden layer's convolution
  uint64_t seed = 0;                ///< weight initialization (and the trainer's dropout keys)
  bool fuse = true;                 ///< norm, ReLU and dropout in the norm's passes (false: separate layers)
  int64_t heads = 8;                ///< GAT: attention heads of every hidden layer (concatenated)
  int64_t output_heads = 1;         ///< GAT: attention heads of the last layer (averaged)
  float attention_dropout = 0.0f;   ///< GAT: dropout on the attention coefficients

  /// "gcn 2x16 (in 1433, out 7, norm none)": what a checkpoint must match.
  std::string describe() const;
  /// Throws Error on impossible settings (no layers, zero widths, dropout outside [0, 1)).
  void validate() const;
};

/// [Dropout(input)] then per layer a GcnConv / SageConv / GatConv (without bias before BatchNorm); every
/// hidden layer is followed by ReLU (GAT: ELU) and dropout, fused into the convolution without a norm and
/// into the norm with one (then ReLU; Norm, ReLU, Dropout layers when !config.fuse). A GAT's hidden layers
/// concatenate `heads` heads of `hidden` features, its last layer averages `output_heads`. `static_features`:
/// the input block never changes between passes (full-graph training), so layer 0 may aggregate it once when
/// there is no input dropout.
std::unique_ptr<Sequential> build_model(const ModelConfig& config, const ProcessGrid& grid,
                                        const RunOptions& run, bool static_features);

}  // namespace tessera
