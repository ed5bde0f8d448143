// SPDX-License-Identifier: BSD-3-Clause
// Adam (weight decay added to the gradient, as torch.optim.Adam) and AdamW (decoupled weight decay,
// Loshchilov & Hutter), and gradient clipping by the global norm. Moments are kept per parameter and saved in
// checkpoints.
#pragma once

#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/enum_names.hpp"
#include "tessera/models/nn/parameter.hpp"

namespace tessera {

/// Adam or AdamW.
enum class OptimizerKind {
  Adam,  ///< weight decay added to the gradient
  AdamW  ///< decoupled weight decay
};
/// The names of OptimizerKind's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<OptimizerKind> kOptimizerKindNames[] = {
    {OptimizerKind::Adam, "adam"},
    {OptimizerKind::AdamW, "adamw"}};
/// adam or adamw: the name of a value.
inline const char* optimizer_name(OptimizerKind kind) { return name_of(kOptimizerKindNames, kind); }

/// The optimizer's settings.
struct AdamSettings {
  OptimizerKind kind = OptimizerKind::Adam;  ///< Adam or AdamW
  float lr = 0.01f;                          ///< learning rate
  float beta1 = 0.9f;                        ///< first moment's decay
  float beta2 = 0.999f;                      ///< second moment's decay
  float eps = 1e-8f;                         ///< added to the second moment's root
  float weight_decay = 0.0f;                 ///< on parameters with decay set (weights)
  /// Throws Error naming the first bad value (the command line's option name): a learning rate that is not
  /// finite and non-negative, betas outside [0, 1), eps not finite and positive, a negative weight decay.
  void validate() const;
};

/// Adam over a list of parameters.
class Adam {
 public:
  /// Moments start at zero.
  Adam(std::vector<Parameter*> params, AdamSettings settings);
  /// The parameters of a model's list.
  Adam(const std::vector<ParameterRef>& params, AdamSettings settings);
  /// One update of every parameter from its gradient.
  void step();

  /// Updates so far (bias correction).
  int64_t steps() const { return steps_; }
  /// The learning rate of the next step (a schedule sets it before each step).
  float lr() const { return s_.lr; }
  /// Sets the learning rate of the next steps.
  void set_lr(float lr) { s_.lr = lr; }
  /// Restores the update count (a resumed run).
  void set_steps(int64_t steps) { steps_ = steps; }
  /// The parameters, in order.
  const std::vector<Parameter*>& params() const { return params_; }
  /// First moment of parameter i.
  Vector<float>& first_moment(size_t i) { return m_[i]; }
  /// Second moment of parameter i.
  Vector<float>& second_moment(size_t i) { return v_[i]; }

 private:
  std::vector<Parameter*> params_;
  AdamSettings s_;
  std::vector<Vector<float>> m_, v_;
  int64_t steps_ = 0;
};

/// Local: entries of the parameters' values and the buffers on this rank that are not finite (NaN, inf).
int64_t count_nonfinite(const std::vector<ParameterRef>& params, const std::vector<BufferRef>& buffers);

/// Collective over `world` (every rank of the run; every replica holding the same gradients): the L2 norm
/// of the gradients of every parameter's global matrix, each entry counted once (its block's owner; padding
/// left out), summed in double.
double global_gradient_norm(const std::vector<ParameterRef>& params, const Communicator& world);

/// Collective over `world`: where the global gradient norm exceeds `max_norm`, every gradient times
/// max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_; returns the norm before.
double clip_gradient_norm(const std::vector<ParameterRef>& params, const Communicator& world,
                          double max_norm);

}  // namespace tessera
