// SPDX-License-Identifier: BSD-3-Clause
// Runs compared by their final weights. A run gathers no weights at its end (only tests read them): these
// helpers gather them after it, every parameter in global layout, concatenated in parameter order.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "tessera/models/train.hpp"

namespace tessera::fixtures {

/// A hook that gathers the model's weights when the run finishes (collective, as on_finish is).
class GatherFinalWeights final : public TrainerHook {
 public:
  explicit GatherFinalWeights(std::vector<float>* weights) : weights_(weights) {}
  void on_finish(Trainer& trainer) override {
    *weights_ = gather_global(trainer.model().parameters(), trainer.world(), false);
  }

 private:
  std::vector<float>* weights_;
};

/// max |x - y| / max |y|: how far two runs' numbers (weights, logits, gradients) are apart.
inline double relative_difference(const std::vector<float>& x, const std::vector<float>& y) {
  double diff = 0, top = 1e-30;
  for (size_t k = 0; k < x.size(); ++k) {
    diff = std::max(diff, double(std::abs(x[k] - y[k])));
    top = std::max(top, double(std::abs(y[k])));
  }
  return diff / top;
}

/// What run_training returns, and the final weights.
struct RunWithWeights : TrainResult {
  std::vector<float> final_weights;  ///< every parameter in global layout, concatenated
};

/// Collective: run_training(options, world) and its final weights.
inline RunWithWeights run_training_with_weights(const TrainOptions& options, const Communicator& world) {
  RunWithWeights run;
  std::vector<std::unique_ptr<TrainerHook>> hooks;
  hooks.push_back(std::make_unique<GatherFinalWeights>(&run.final_weights));
  static_cast<TrainResult&>(run) = run_training(options, world, std::move(hooks));
  return run;
}

/// Collective: trainer.run() and the final weights of its model.
inline RunWithWeights run_with_weights(Trainer& trainer) {
  RunWithWeights run;
  static_cast<TrainResult&>(run) = trainer.run();
  run.final_weights = gather_global(trainer.model().parameters(), trainer.world(), false);
  return run;
}

}  // namespace tessera::fixtures
