// SPDX-License-Identifier: BSD-3-Clause
// Element-wise layers: dropout and ReLU on the block they get. A dropout mask is a function of (seed,
// epoch, position in the model, global node, global column), so every grid drops the same entries. The
// fused forms (ConvOptions, NormOptions) compute the same numbers in fewer passes.
#pragma once

#include <string>

#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/nn/layer.hpp"

namespace tessera {

/// Drops each entry with probability `rate` on training passes (scaling the rest by 1 / (1 - rate));
/// passes its input through otherwise. Before the first graph layer it is the input dropout.
class Dropout : public Layer {
 public:
  /// At the slot's activations; rate in [0, 1).
  Dropout(LayerSlot& slot, float rate);
  Matrix<const float> forward(const Matrix<const float>& in, const GraphBatch& batch,
                              const PassInfo& pass) override;
  bool passes_input_through(const PassInfo& pass) const override { return !pass.training || rate_ == 0; }
  Matrix<float> backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass) override;
  std::string describe() const override;

 private:
  DropoutMask mask(const PassInfo& pass) const;
  float rate_;
  ActivationLayout at_;
  KernelPath kernels_;
  Vector<const int64_t> rows_;
  Matrix<float> out_capacity_, out_;
};

/// max(x, 0).
class ReLU : public Layer {
 public:
  /// At the slot's activations.
  explicit ReLU(LayerSlot& slot);
  Matrix<const float> forward(const Matrix<const float>& in, const GraphBatch& batch,
                              const PassInfo& pass) override;
  Matrix<float> backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass) override;
  std::string describe() const override { return "relu"; }

 private:
  KernelPath kernels_;
  Matrix<float> out_capacity_, out_;
};

}  // namespace tessera
