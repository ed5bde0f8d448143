// SPDX-License-Identifier: BSD-3-Clause
// Evaluation metrics as library pieces. A Loss names the metric its task is judged by (Loss::metric()):
// accuracy for softmax cross-entropy, the area under the ROC curve for binary cross-entropy. A metric is
// fed the logits of one evaluation batch after another (add) and gives its value over all of them at the
// end (value), so the same metric serves the full graph (one batch), mini-batch evaluation and the sampled
// mode's evaluation in rounds of seeds. The batch sources evaluate the train, validation and test nodes with
// the Trainer's loss and its metric.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/models/nn/loss_input.hpp"

namespace tessera {

/// A metric accumulated over evaluation batches.
class Metric {
 public:
  virtual ~Metric() = default;
  /// Collective over the layout's axes: the covered rows (mask != 0, label >= 0) of one batch's logits.
  virtual void add(const LossInput& rows) = 0;
  /// Collective over the layout's axes and over `over`, the ranks whose batches held other rows (the world
  /// in the sampled mode, this rank alone where a replica's batch holds every row): the metric over every
  /// row added since the last value(), the same on every rank; then starts over. 0 where it is undefined
  /// (no covered row; a ROC curve without both classes).
  virtual double value(const LogitsLayout& layout, const Communicator& over) = 0;
  /// "accuracy", "roc_auc": the name in the log and the metrics records.
  virtual std::string name() const = 0;
};

/// Share of covered rows whose argmax over the real classes (lowest index on ties) is the label.
class AccuracyMetric final : public Metric {
 public:
  void add(const LossInput& rows) override;
  double value(const LogitsLayout& layout, const Communicator& over) override;
  std::string name() const override { return "accuracy"; }

 private:
  int64_t hits_ = 0, count_ = 0;
};

/// Area under the ROC curve of a two-class task: the logits have one column, the score of class 1, and the
/// labels are 0 or 1 (another label is refused). The probability that a random positive row scores above a
/// random negative one, ties counting half (the Mann-Whitney statistic), computed exactly from every score.
class RocAucMetric final : public Metric {
 public:
  void add(const LossInput& rows) override;
  double value(const LogitsLayout& layout, const Communicator& over) override;
  std::string name() const override { return "roc_auc"; }

 private:
  std::vector<float> scores_;
  std::vector<uint8_t> positive_;
  int64_t bad_label_ = -1;  // a covered label that is neither 0 nor 1 (-1: none)
};

/// The area under the ROC curve of `scores` against `positive` (ties counting half); 0 where either class is
/// absent. Local (no communication).
double roc_auc(const std::vector<float>& scores, const std::vector<uint8_t>& positive);

}  // namespace tessera
