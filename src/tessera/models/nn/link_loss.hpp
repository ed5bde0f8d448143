// SPDX-License-Identifier: BSD-3-Clause
// Link prediction as a loss: the model's output rows are node embeddings and a node pair (u, v) scores
// their dot product h_u . h_v (the graph auto-encoder's decoder). Training is binary cross-entropy on the
// task's training pairs against negatives drawn each step; evaluation ranks each split's positive pairs
// against its negatives as OGB's Evaluator does (ROC-AUC, Hits@K over a shared negative set, MRR over each
// pair's own negatives). The embeddings are spread over the grid as logits are (rows over one axis, columns
// over another): the rows a step's pairs need are gathered over the rows' axis, each rank dots its columns
// and the partial scores are summed over the columns' axis, so every rank holds every score and the
// gradient of its own rows without sending any back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/models/nn/link_decoder.hpp"
#include "tessera/models/nn/loss.hpp"

namespace tessera {

class GraphFileReader;  // graph/graph_file.hpp (not included: it pulls in <hdf5.h>)

/// Node pairs (source[i], target[i]).
struct NodePairs {
  std::vector<int64_t> source;  ///< first node of each pair
  std::vector<int64_t> target;  ///< second node of each pair
  /// Pairs held.
  int64_t size() const { return int64_t(source.size()); }
};

/// One evaluation split of a link task (graph file /link/valid or /link/test): its positive pairs and what
/// they are ranked against: a negative set shared by every positive (ROC-AUC, Hits\@K), or per positive
/// `negatives_per_edge` targets of its source (MRR, as ogbl-citation2), or both.
struct LinkEvaluationSplit {
  NodePairs positives;                    ///< pairs that are edges
  NodePairs shared_negatives;             ///< pairs that are not, ranked against every positive
  std::vector<int64_t> negative_targets;  ///< positives x negatives_per_edge, row-major
  int64_t negatives_per_edge = 0;         ///< columns of negative_targets (0: none)
  /// Whether the split has no positive pair (absent from the file).
  bool empty() const { return positives.size() == 0; }
};

/// What a link task trains on and is judged by.
struct LinkTask {
  int64_t num_nodes = 0;      ///< node ids are in [0, num_nodes)
  NodePairs train;            ///< positive training pairs
  LinkEvaluationSplit valid;  ///< validation pairs (empty: none)
  LinkEvaluationSplit test;   ///< test pairs (empty: none)
};

/// Collective over `comm`: the link task of a graph file (its /link splits, read whole on every rank, every
/// id checked). Throws CollectiveError naming the file where an id is outside its nodes, a split has no
/// negatives, it has neither a validation nor a test split, or (with `training`) no /link/train/edges.
LinkTask read_link_task(const GraphFileReader& reader, const Communicator& comm, bool training = true);

/// Collective over the layout's rows and columns axes: the score of every pair, h_u . h_v or the decoder's
/// MLP(h_u * h_v) where one is given, from node embeddings spread over the grid as logits are
/// (LossInput::nodes names each row's node); every rank gets every score.
std::vector<double> score_node_pairs(const LossInput& every_node, const NodePairs& pairs,
                                     MlpLinkDecoder* decoder = nullptr);

/// The `d`-th of `negatives` targets drawn for training pair `pair` in the step keyed `key`: uniform over
/// [0, num_nodes), a function of (seed, key, pair, d) only, so that every grid and mode draws the same.
int64_t link_negative_target(uint64_t seed, int64_t key, int64_t pair, int64_t negatives, int64_t d,
                             int64_t num_nodes);

/// `pairs` (indices of training pairs) in epoch `epoch`'s order: sorted by a random key of (seed, epoch,
/// pair), the same order whichever rank or mode shuffles them.
std::vector<int64_t> shuffled_pairs(uint64_t seed, int64_t epoch, const std::vector<int64_t>& pairs);

/// How a LinkLoss trains and scores.
struct LinkLossOptions {
  uint64_t seed = 0;      ///< keys the negatives drawn each step
  int64_t negatives = 1;  ///< negatives drawn per training pair each step
  /// The metric of evaluation: Auto is MRR where the splits give per-pair negatives, else ROC-AUC;
  /// hits\@20, hits\@50 and hits\@100 need a shared negative set, mrr per-pair negatives.
  MetricKind metric = MetricKind::Auto;
  /// Training pairs per step (0: every pair, one step per epoch): each epoch shuffles the pairs (keyed by
  /// the seed and the epoch) and steps through them in batches of this many, the batch source running
  /// steps_per_epoch() full forwards.
  int64_t batch = 0;
};

/// Link prediction with the dot-product decoder. Each step, every training pair (u, v) is a positive
/// (label 1) and `negatives` pairs (u, w) with w drawn uniformly over the nodes are negatives (label 0),
/// keyed by (seed, the step's key, pair), so that every grid draws the same (w is not checked against the
/// graph's edges: on a sparse graph a drawn edge is rare). The loss is the sum over those pairs of
/// log(1 + e^s) - y s, counted per pair. Where the batch names the step's pairs as rows (LossInput::pairs,
/// sampled training: one replica per rank, its rows whole) those are scored instead. Rows a step needs live
/// on other ranks: they are gathered over the rows' axis (their local columns, 4 bytes each, recorded in the
/// communication statistics as "link gather"); every rank of that axis scores every pair.
class LinkLoss final : public Loss {
 public:
  /// A loss over `task`; throws Error where `options` asks what the task cannot give (a metric its splits
  /// lack negatives for, negatives below 1).
  LinkLoss(std::shared_ptr<const LinkTask> task, LinkLossOptions options);
  LossSum sum_and_gradient(const LossInput& input, const Matrix<float>& grad) override;
  std::string name() const override { return "link_binary_cross_entropy"; }
  /// Steps an epoch takes: the training pairs over LinkLossOptions::batch, rounded up (1 without a batch).
  int64_t steps_per_epoch() const;
  /// Node metrics do not apply: throws Error (a link task is scored by score_splits).
  std::unique_ptr<Metric> metric() const override;
  /// Collective: train, valid and test scores in the task's metric: each split's positives ranked against
  /// its negatives; train: an evenly spaced subset of the training pairs as large as the validation split,
  /// ranked against the validation negatives (MRR: against as many targets per pair drawn once). The
  /// validation loss is the mean over the validation positives and their negatives.
  std::optional<SplitScores> score_splits(const LossInput& every_node) override;
  /// "roc_auc", "hits\@50", "mrr": what the scores measure.
  std::string metric_name() const;
  /// Scores pairs with `decoder` (null: the dot product) in training and evaluation; its parameters are
  /// then the loss's (parameters()), and the model trained with it must list them (Sequential::attach).
  void set_decoder(std::shared_ptr<MlpLinkDecoder> decoder);
  /// The decoder's parameters (none with the dot product): sum_and_gradient writes their gradients.
  std::vector<ParameterRef> parameters() override;

 private:
  /// The training pairs of step `key` (LossInput::step_key: epoch x steps_per_epoch() + step), as indices
  /// among the task's training pairs.
  std::vector<int64_t> step_pairs(int64_t key);
  std::shared_ptr<const LinkTask> task_;
  LinkLossOptions options_;
  int64_t order_epoch_ = -1;                 // the epoch order_ shuffles
  std::vector<int64_t> order_;               // that epoch's order of the training pairs
  MetricKind metric_ = MetricKind::RocAuc;   // resolved
  std::shared_ptr<MlpLinkDecoder> decoder_;  // null: the dot product
};

}  // namespace tessera
