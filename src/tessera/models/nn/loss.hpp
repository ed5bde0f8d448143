// SPDX-License-Identifier: BSD-3-Clause
// The training loss as a piece of the library: what a Trainer minimizes. A loss sees one step's logits block
// on this rank, where the block sits on the grid (rows split over one axis, classes over another), the rows'
// labels and the mask of rows it covers. It returns the sum over the covered rows of the whole grid and their
// count, and writes d(sum)/d(logits) for this rank's block; the Trainer scales both to the mean the mode
// trains on. SoftmaxCrossEntropy is the default; BinaryCrossEntropy serves two-class tasks with one logit,
// MultiLabelBinaryCrossEntropy multi-label tasks (one logit per task, labels 1, 0 or unobserved).
// Each names the metric it is evaluated by (metric.hpp). An application writes its own by deriving from Loss
// and summing its rank's share with sum_over_grid, so that every rank reports the same number
// (examples/custom_loss, docs/library.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/models/nn/loss_input.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/models/nn/parameter.hpp"

namespace tessera {

/// A loss summed over the rows it covered on the whole grid.
struct LossSum {
  double sum = 0;     ///< the loss summed over the covered rows
  int64_t count = 0;  ///< the covered rows
};

/// Scores of one evaluation of a task judged on other things than node rows (Loss::score_splits).
struct SplitScores {
  double train = 0;       ///< on the training split
  double valid = 0;       ///< on the validation split
  double test = 0;        ///< on the test split
  double valid_loss = 0;  ///< the loss's mean on the validation split
  std::string metric;     ///< what train, valid and test measure
};

/// What a Trainer minimizes. Collective over the layout's axes: every rank of a replica enters it each step.
class Loss {
 public:
  virtual ~Loss() = default;
  /// The sum over the covered rows of the whole grid and their count (the same on every rank); writes every
  /// entry of `grad` (rows x local columns, as the logits) with d(sum)/d(logits): 0 on rows it does not
  /// cover and on padding columns.
  virtual LossSum sum_and_gradient(const LossInput& input, const Matrix<float>& grad) = 0;
  /// A name for the log and the checkpoint's run identity ("softmax_cross_entropy").
  virtual std::string name() const = 0;
  /// A fresh accumulator of the metric the task is judged by: what evaluation reports as train, validation
  /// and test scores and what picks the best epoch (higher is better). AccuracyMetric unless overridden.
  virtual std::unique_ptr<Metric> metric() const;
  /// Collective over the layout's axes: a task judged on other things than node rows (link prediction's
  /// node pairs) scores an evaluation forward of every node (LossInput::nodes) here. nullopt (the default):
  /// the batch source scores the rows of each split's nodes with metric().
  virtual std::optional<SplitScores> score_splits(const LossInput& every_node) {
    (void)every_node;
    return std::nullopt;
  }
  /// Parameters the loss applies besides the model's (a link decoder's; none by default):
  /// sum_and_gradient writes their gradients of the sum, and the Trainer weighs them as it weighs
  /// d(sum)/d(logits). The model must list them too (Sequential::attach), so that the optimizer, the
  /// gradient sums over replicas and checkpoints see them.
  virtual std::vector<ParameterRef> parameters() { return {}; }
};

/// -log softmax(logits)(label), the softmax over the real classes, spread over the grid as the logits are.
class SoftmaxCrossEntropy final : public Loss {
 public:
  LossSum sum_and_gradient(const LossInput& input, const Matrix<float>& grad) override;
  std::string name() const override { return "softmax_cross_entropy"; }
};

/// A two-class task with one logit z per row (the model's output is one column; labels 0 or 1):
/// log(1 + e^z) - y z, computed stably, with gradient sigmoid(z) - y. A label other than 0 or 1 on a covered
/// row, or logits wider than one class, is refused with an Error on every rank. Its metric is RocAucMetric.
class BinaryCrossEntropy final : public Loss {
 public:
  LossSum sum_and_gradient(const LossInput& input, const Matrix<float>& grad) override;
  std::string name() const override { return "binary_cross_entropy"; }
  std::unique_ptr<Metric> metric() const override;
};

/// A multi-label task with one logit z per task (LossInput::targets: 1, 0, or -1 unobserved): the sum over
/// observed entries of covered rows of p_t y log(1 + e^-z) + (1 - y) log(1 + e^z), PyTorch's
/// BCEWithLogitsLoss with pos_weight p_t; the count is the observed entries, so the Trainer's mean is over
/// them. Its metric is the mean ROC-AUC over tasks (MultiLabelRocAucMetric), the OGB rule for ogbn-proteins.
class MultiLabelBinaryCrossEntropy final : public Loss {
 public:
  /// `positive_weight`: one weight per task on its positive entries (empty: 1 for every task); `metric`: what
  /// metric() gives (make_metric; Auto: mean ROC-AUC).
  explicit MultiLabelBinaryCrossEntropy(std::vector<float> positive_weight = {},
                                        MetricKind metric = MetricKind::Auto);
  LossSum sum_and_gradient(const LossInput& input, const Matrix<float>& grad) override;
  std::string name() const override { return "multi_label_binary_cross_entropy"; }
  std::unique_ptr<Metric> metric() const override;

 private:
  std::vector<float> positive_weight_;
  MetricKind metric_;
  Vector<float> weight_view_;  // positive_weight_ where kernels read it, sized on first use
};

/// Collective over the layout's rows and classes axes: a rank's share of a loss (`partial`: its rows, its
/// columns) summed over both axes, and its covered rows (`rows`, which every rank holding the same rows
/// counts alike) summed over the rows' axis. What a user-written Loss returns.
LossSum sum_over_grid(const LogitsLayout& layout, double partial, int64_t rows);

}  // namespace tessera
