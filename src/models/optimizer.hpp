// SPDX-License-Identifier: BSD-3-Clause
// Adam (weight decay added to the gradient, as torch.optim.Adam) and AdamW (decoupled weight decay,
// Loshchilov & Hutter). Moments are kept per parameter and saved in checkpoints.
#pragma once

#include <string>
#include <vector>

#include "tessera/models/parameter.hpp"

namespace tessera {

enum class OptimizerKind { Adam, AdamW };
OptimizerKind parse_optimizer(const std::string& name);

struct AdamSettings {
  OptimizerKind kind = OptimizerKind::Adam;
  float lr = 0.01f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
};

class Adam {
 public:
  Adam(std::vector<Parameter<float>*> params, AdamSettings settings);
  /// One update of every parameter from its gradient.
  void step();

  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }
  const std::vector<Parameter<float>*>& params() const { return params_; }
  Vector<float>& first_moment(size_t i) { return m_[i]; }
  Vector<float>& second_moment(size_t i) { return v_[i]; }

 private:
  std::vector<Parameter<float>*> params_;
  AdamSettings s_;
  std::vector<Vector<float>> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace tessera
