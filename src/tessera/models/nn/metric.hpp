// SPDX-License-Identifier: BSD-3-Clause
// Evaluation metrics as library pieces. A Loss names the metric its task is judged by (Loss::metric()):
// accuracy for softmax cross-entropy, the area under the ROC curve for binary cross-entropy. A metric is
// fed the logits of one evaluation batch after another (add) and gives its value over all of them at the
// end (value), so the same metric serves the full graph (one batch), mini-batch evaluation and the sampled
// mode's evaluation in rounds of seeds. Multi-label tasks (LossInput::targets) are scored per task and
// averaged: ROC-AUC and average precision over the tasks whose evaluated entries hold both classes (the OGB
// Evaluator's rule), F1 at probability 0.5 over all entries (micro) or per task (macro). The batch sources
// evaluate the train, validation and test nodes with the Trainer's loss and its metric.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/enum_names.hpp"
#include "tessera/models/nn/loss_input.hpp"

namespace tessera {

/// The metric a run is judged by: what evaluation reports, what picks the best epoch and stops early.
enum class MetricKind {
  Auto,      ///< the task's own: accuracy (single-label), ROC-AUC (multi-label, as OGB scores proteins)
  Accuracy,  ///< share of nodes whose highest logit is their class (single-label)
  RocAuc,    ///< mean ROC-AUC over tasks (multi-label)
  AveragePrecision,  ///< mean average precision over tasks (multi-label)
  F1Micro,           ///< F1 over every entry (multi-label)
  F1Macro,           ///< F1 per task, averaged (multi-label)
  Hits20,            ///< link prediction: Hits\@20 over a shared negative set (ogbl-ddi)
  Hits50,            ///< link prediction: Hits\@50 (ogbl-collab)
  Hits100,           ///< link prediction: Hits\@100 (ogbl-ppa)
  Mrr                ///< link prediction: mean reciprocal rank among each pair's negatives (ogbl-citation2)
};
/// The names of MetricKind's values (core/enum_names.hpp): `--metric`, the bindings and messages.
inline constexpr EnumName<MetricKind> kMetricKindNames[] = {
    {MetricKind::Auto, "auto"},        {MetricKind::Accuracy, "accuracy"},
    {MetricKind::RocAuc, "rocauc"},    {MetricKind::AveragePrecision, "ap"},
    {MetricKind::F1Micro, "f1-micro"}, {MetricKind::F1Macro, "f1-macro"},
    {MetricKind::Hits20, "hits@20"},   {MetricKind::Hits50, "hits@50"},
    {MetricKind::Hits100, "hits@100"}, {MetricKind::Mrr, "mrr"}};

/// Whether `kind` scores a link task (Hits\@K, MRR) rather than nodes.
constexpr bool is_link_metric(MetricKind kind) {
  return kind == MetricKind::Hits20 || kind == MetricKind::Hits50 || kind == MetricKind::Hits100 ||
         kind == MetricKind::Mrr;
}

class Metric;
/// A fresh accumulator of `kind` for a single-label or multi-label task; throws Error naming the metric and
/// the task where the pair is not offered (accuracy on a multi-label task, a task metric on a single-label
/// one, a link metric on either: link tasks are scored by LinkLoss).
std::unique_ptr<Metric> make_metric(MetricKind kind, bool multi_label);

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
/// Average precision of `scores` against `positive`: the sum over distinct score thresholds, highest first,
/// of precision at the threshold times the recall it adds (scikit-learn's average_precision_score); 0 where
/// either class is absent. Local.
double average_precision(const std::vector<float>& scores, const std::vector<uint8_t>& positive);

/// Hits\@K of link prediction as OGB's Evaluator computes it (ogbl-collab, -ddi, -ppa): the share of
/// `positive` scores strictly above the K-th highest of the shared `negative` scores; 1 where there are
/// fewer than K negatives, 0 without a positive. Local.
double hits_at_k(const std::vector<float>& positive, const std::vector<float>& negative, int64_t k);

/// Mean reciprocal rank of link prediction as OGB's Evaluator computes it (ogbl-citation2): positive e is
/// ranked among its own `per_edge` negatives (row e of `negative`, row-major), rank 1 + the negatives above
/// it + half of those tied with it, and the mean of 1 / rank is returned (0 without a positive). Local.
double mean_reciprocal_rank(const std::vector<float>& positive, const std::vector<float>& negative,
                            int64_t per_edge);

/// A multi-label metric scored per task from every evaluated entry's score (the logit) and label: the mean
/// over tasks whose entries hold both classes of a per-task score. Exact: value() gathers the evaluated
/// entries of the rank's task columns from the rows' axis and `over` (5 bytes each on every such rank: 0.5
/// GB for one task over 100 M evaluated nodes), and each rank of `over` scores every size-th task.
class MultiLabelRankMetric : public Metric {
 public:
  void add(const LossInput& rows) override;
  double value(const LogitsLayout& layout, const Communicator& over) override;

 protected:
  /// The per-task score of a task with both classes present.
  virtual double score(const std::vector<float>& scores, const std::vector<uint8_t>& positive) const = 0;

 private:
  std::vector<std::vector<float>> scores_;  // per local task column
  std::vector<std::vector<uint8_t>> positive_;
};

/// Mean ROC-AUC over the tasks with both classes: ogbn-proteins' metric (Evaluator "rocauc").
class MultiLabelRocAucMetric final : public MultiLabelRankMetric {
 public:
  std::string name() const override { return "roc_auc"; }

 protected:
  double score(const std::vector<float>& s, const std::vector<uint8_t>& p) const override {
    return roc_auc(s, p);
  }
};

/// Mean average precision over the tasks with both classes (OGB's "ap").
class MultiLabelAveragePrecisionMetric final : public MultiLabelRankMetric {
 public:
  std::string name() const override { return "average_precision"; }

 protected:
  double score(const std::vector<float>& s, const std::vector<uint8_t>& p) const override {
    return average_precision(s, p);
  }
};

/// F1 of a multi-label task, each entry predicted positive where its logit is above 0 (probability 0.5, as
/// GraphSAINT scores Yelp and PPI). Micro: 2 TP / (2 TP + FP + FN) over every evaluated entry; macro: that
/// per task, averaged over every task (0 for a task without a positive or a predicted positive, as
/// scikit-learn's f1_score). Exact: sums of counts.
class MultiLabelF1Metric final : public Metric {
 public:
  /// Over every entry (micro) or per task, then averaged (macro).
  enum class Average { Micro, Macro };
  /// An F1 accumulator averaged as `average` says.
  explicit MultiLabelF1Metric(Average average) : average_(average) {}
  void add(const LossInput& rows) override;
  double value(const LogitsLayout& layout, const Communicator& over) override;
  std::string name() const override { return average_ == Average::Micro ? "f1_micro" : "f1_macro"; }

 private:
  Average average_;
  std::vector<int64_t> counts_;  // per local task column: true positives, false positives, false negatives
};

}  // namespace tessera
