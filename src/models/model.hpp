// SPDX-License-Identifier: BSD-3-Clause
// A stack of GNN layers with dropout on the input features: the whole model that a trainer drives.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/models/layers.hpp"

namespace tessera {

struct ModelConfig {
  ModelKind kind = ModelKind::Gcn;
  int layers = 2;
  int64_t in = 0, hidden = 16, out = 0;
  float dropout = 0.5f;        // on hidden layer outputs
  float input_dropout = 0.5f;  // on the input features
  NormKind norm = NormKind::None;
  uint64_t seed = 0;

  /// "gcn 2x16 (in 1433, out 7, norm none)"
  std::string describe() const;
  /// Throws Error on impossible settings (no layers, zero widths, dropout outside [0, 1)).
  void validate() const;
};

template <class Scalar>
class GnnModel {
 public:
  explicit GnnModel(const ModelConfig& config);

  /// Logits (nodes x out), owned by the model.
  Matrix<Scalar> forward(const GraphOps<Scalar>& ops, const Matrix<const Scalar>& features,
                         const PassInfo& pass);
  /// Sets every parameter's gradient from dL/d logits (overwritten). Layer 0 computes no input gradient.
  void backward(const GraphOps<Scalar>& ops, const Matrix<Scalar>& grad_logits, const PassInfo& pass);

  /// The same on sampled blocks: layer l aggregates with *ops[l] (rows: its output nodes, the leading rows
  /// of its input); the logits are the last block's output rows.
  Matrix<Scalar> forward(const std::vector<const GraphOps<Scalar>*>& ops,
                         const Matrix<const Scalar>& features, const PassInfo& pass);
  void backward(const std::vector<const GraphOps<Scalar>*>& ops, const Matrix<Scalar>& grad_logits,
                const PassInfo& pass);

  /// Promise that the features passed to forward never change (the trainer's case): without input dropout
  /// the first layer then aggregates them once instead of every pass.
  void set_static_features(bool value);

  std::vector<Parameter<Scalar>*> parameters();
  /// Non-trainable state a checkpoint must keep (BatchNorm running statistics), by name.
  std::vector<std::pair<std::string, Vector<Scalar>*>> buffers();
  const ModelConfig& config() const { return config_; }
  GnnLayer<Scalar>& layer(int index) { return *layers_[size_t(index)]; }

 private:
  ModelConfig config_;
  std::vector<std::unique_ptr<GnnLayer<Scalar>>> layers_;
  Matrix<Scalar> dropped_input_;  // capacity; the input dropout uses its leading rows
};

}  // namespace tessera
