// SPDX-License-Identifier: BSD-3-Clause
// Binary cross-entropy and its metric, the area under the ROC curve, through the public API: the loss and
// its gradient against formulas in double, the area against counting every (positive, negative) pair, and
// evaluation in the loss's metric in all three modes (full graph on every grid of the world's ranks, mini-
// batches, sampled with exact and sampled evaluation) against the reference computed from the run's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tessera/tessera.hpp>

#include "support/fixtures.hpp"

namespace tessera {
namespace {

// The area under the ROC curve by its definition: the share of (positive, negative) pairs the positive
// scores above, ties counting half.
double pairwise_auc(const std::vector<double>& score, const std::vector<int>& positive) {
  double above = 0, pairs = 0;
  for (size_t p = 0; p < score.size(); ++p)
    for (size_t n = 0; n < score.size(); ++n)
      if (positive[p] && !positive[n]) {
        above += score[p] > score[n] ? 1.0 : score[p] == score[n] ? 0.5 : 0.0;
        pairs += 1;
      }
  return pairs > 0 ? above / pairs : 0.0;
}

// 257 nodes in two classes, splits of 30% / 30% / 40%.
const std::string& two_class_file() {
  static std::string path;
  if (path.empty()) {
    SynthOptions o;
    o.num_nodes = 257;
    o.num_edges = 1200;
    o.num_features = 9;
    o.num_classes = 2;
    o.seed = 4;
    o.feature_signal = 0.3;
    o.train_fraction = 0.3;
    o.valid_fraction = 0.3;
    path = fixtures::synthetic_file("two_class.h5", o);
  }
  return path;
}

// Every node's label and its split, read from the file.
struct Truth {
  std::vector<int64_t> labels;
  std::vector<std::string> split;  // "train", "valid", "test" or ""
};
Truth truth_of(const std::string& path) {
  const GraphFileReader reader(Communicator::world(), path);
  const int64_t n = reader.meta().num_nodes;
  Truth t{reader.read_labels(0, n), std::vector<std::string>(size_t(n))};
  for (const SplitInfo& s : reader.splits())
    for (int64_t v : reader.read_split(s.name, 0, s.size)) t.split[size_t(v)] = s.name;
  return t;
}

// What the reference says of one-logit outputs (nodes x 1, node order) on one split.
struct Reference {
  double auc = 0, loss = 0;
};
Reference reference_on(const std::vector<float>& logits, const Truth& t, const std::string& split) {
  std::vector<double> score;
  std::vector<int> positive;
  double loss = 0;
  for (size_t v = 0; v < t.labels.size(); ++v) {
    if (t.split[v] != split || t.labels[v] < 0) continue;
    const double z = logits[v], y = double(t.labels[v]);
    score.push_back(z);
    positive.push_back(t.labels[v] == 1);
    loss += std::log(1 + std::exp(z)) - y * z;
  }
  return {pairwise_auc(score, positive), loss / double(score.size())};
}

// A two-layer GCN with one output (the logit of class 1) on `grid`, the run's seed fixed.
std::unique_ptr<Sequential> one_logit_gcn(const ProcessGrid& grid, int64_t features) {
  auto model = std::make_unique<Sequential>(grid, features, RunOptions{}, 7);
  ConvOptions hidden;
  hidden.relu = true;
  model->add<GcnConv>(8, hidden);
  model->add<GcnConv>(1);
  return model;
}

// One epoch at learning rate 0 with binary cross-entropy: evaluation sees the weights the step saw.
TrainResult frozen_epoch(Model& model, BatchSource& source, const Communicator& world) {
  TrainerOptions options;
  options.epochs = 1;
  options.optimizer.lr = 0;
  options.keep_last_step = true;
  Trainer trainer(model, source, world, options);
  trainer.set_loss(std::make_unique<BinaryCrossEntropy>());
  return trainer.run();
}

}  // namespace

TEST(RocAuc, EqualsThePairwiseCount) {
  std::mt19937_64 gen(3);
  for (int trial = 0; trial < 20; ++trial) {
    const size_t n = 1 + gen() % 60;
    std::vector<float> scores(n);
    std::vector<uint8_t> positive(n);
    std::vector<double> s(n);
    std::vector<int> p(n);
    for (size_t i = 0; i < n; ++i) {
      scores[i] = float(int(gen() % 7) - 3) * 0.5f;  // few values: many ties
      positive[i] = gen() % 3 == 0;
      s[i] = scores[i], p[i] = positive[i];
    }
    EXPECT_NEAR(roc_auc(scores, positive), pairwise_auc(s, p), 1e-12) << "trial " << trial;
  }
  EXPECT_EQ(roc_auc({0.5f, 0.1f}, {1, 0}), 1.0);
  EXPECT_EQ(roc_auc({0.5f, 0.1f}, {0, 1}), 0.0);
  EXPECT_EQ(roc_auc({0.3f, 0.3f}, {1, 0}), 0.5);
  EXPECT_EQ(roc_auc({0.3f, 0.2f}, {1, 1}), 0.0);  // undefined without a negative
  EXPECT_EQ(roc_auc({}, {}), 0.0);
}

// Hits@K and MRR against their definitions counted in double: a positive hits where fewer than K negatives
// score at least as high; its rank is 1 + the negatives above + half the tied ones.
TEST(LinkRanking, HitsAndMrrEqualTheirDefinitions) {
  std::mt19937_64 gen(5);
  for (int trial = 0; trial < 20; ++trial) {
    const size_t edges = gen() % 30, per_edge = 1 + gen() % 12, k = 1 + gen() % 20;
    std::vector<float> pos(edges), neg(edges * per_edge), shared(gen() % 40);
    for (float& s : pos) s = float(int(gen() % 9) - 4) * 0.25f;  // few values: many ties
    for (float& s : neg) s = float(int(gen() % 9) - 4) * 0.25f;
    for (float& s : shared) s = float(int(gen() % 9) - 4) * 0.25f;
    double hits = 0, reciprocal = 0;
    for (size_t e = 0; e < edges; ++e) {
      const double at_least =
          double(std::count_if(shared.begin(), shared.end(), [&](float s) { return s >= pos[e]; }));
      hits += at_least < double(k);
      double above = 0, tied = 0;
      for (size_t j = 0; j < per_edge; ++j)
        above += neg[e * per_edge + j] > pos[e], tied += neg[e * per_edge + j] == pos[e];
      reciprocal += 1.0 / (1.0 + above + tied / 2);
    }
    const double want_hits = shared.size() < k ? 1.0 : edges ? hits / double(edges) : 0.0;
    EXPECT_NEAR(hits_at_k(pos, shared, int64_t(k)), want_hits, 1e-12) << "trial " << trial;
    EXPECT_NEAR(mean_reciprocal_rank(pos, neg, int64_t(per_edge)), edges ? reciprocal / double(edges) : 0.0,
                1e-12);
  }
  EXPECT_EQ(hits_at_k({0.9f, 0.5f, 0.1f}, {0.8f, 0.5f, 0.2f}, 2), 1.0 / 3);  // only 0.9 beats the 2nd (0.5)
  EXPECT_EQ(hits_at_k({0.1f}, {0.8f}, 2), 1.0);                              // fewer negatives than K
  EXPECT_EQ(mean_reciprocal_rank({0.5f, 0.5f}, {0.9f, 0.1f, 0.5f, 0.5f}, 2), (1.0 / 2 + 1.0 / 2) / 2);
  EXPECT_THROW(hits_at_k({0.1f}, {0.2f}, 0), Error);
  EXPECT_THROW(mean_reciprocal_rank({0.1f}, {0.2f, 0.3f, 0.4f}, 2), Error);
}

// The loss and gradient of one block against the formulas: covered rows only, padding columns zero, a large
// logit without overflow.
TEST(BinaryCrossEntropy, SumAndGradientFollowTheFormula) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const std::vector<float> z = {0.3f, -2.0f, 100.0f, -100.0f, 1.5f};
  const std::vector<int64_t> y = {1, 0, 0, 1, -1};
  const std::vector<uint8_t> covered = {1, 1, 1, 1, 1};
  HostMatrix<float> host_z("z", 5, 2);  // a padding column beside the logit
  HostVector<int64_t> host_y("y", 5);
  HostVector<uint8_t> host_mask("mask", 5);
  for (size_t i = 0; i < 5; ++i)
    host_z(i, 0) = z[i], host_z(i, 1) = 9, host_y(i) = y[i], host_mask(i) = covered[i];
  const auto logits = Kokkos::create_mirror_view_and_copy(DeviceSpace(), host_z);
  const auto labels = Kokkos::create_mirror_view_and_copy(DeviceSpace(), host_y);
  const auto mask = Kokkos::create_mirror_view_and_copy(DeviceSpace(), host_mask);
  const Matrix<float> grad("grad", 5, 2);
  BinaryCrossEntropy bce;
  const LogitsLayout layout{&self, &self, 0, 1};
  const LossSum s = bce.sum_and_gradient(LossInput{layout, logits, labels, mask, {}}, grad);
  EXPECT_EQ(s.count, 4);
  double want = 0;
  for (size_t i = 0; i < 4; ++i)
    want += std::max(double(z[i]), 0.0) - double(y[i]) * z[i] + std::log1p(std::exp(-std::abs(double(z[i]))));
  EXPECT_NEAR(s.sum, want, 1e-9 * want);
  const auto g = Kokkos::create_mirror_view_and_copy(HostSpace(), grad);
  for (size_t i = 0; i < 5; ++i) {
    const double expect = y[i] >= 0 ? 1 / (1 + std::exp(-double(z[i]))) - double(y[i]) : 0.0;
    EXPECT_NEAR(g(i, 0), expect, 1e-7) << "row " << i;
    EXPECT_EQ(g(i, 1), 0.0f) << "row " << i;
  }
  EXPECT_EQ(bce.metric()->name(), "roc_auc");
  EXPECT_EQ(SoftmaxCrossEntropy().metric()->name(), "accuracy");
  // Another label than 0 or 1, or a second logit column, is refused.
  host_y(1) = 2;
  const auto three = Kokkos::create_mirror_view_and_copy(DeviceSpace(), host_y);
  EXPECT_THROW(bce.sum_and_gradient(LossInput{layout, logits, three, mask, {}}, grad), Error);
  EXPECT_THROW(
      bce.sum_and_gradient(LossInput{LogitsLayout{&self, &self, 0, 2}, logits, labels, mask, {}}, grad),
      Error);
}

// Full graph on every grid of the world's ranks: the epoch's loss is the reference's mean over the training
// nodes of the logits the step saw, and train, valid and test scores are their ROC areas (the evaluation at
// learning rate 0 sees the same logits); the validation loss is the loss's mean there.
TEST(BinaryCrossEntropy, FullGraphScoresAreTheReferenceRocAreas) {
  const Communicator world = Communicator::world();
  const Truth truth = truth_of(two_class_file());
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const ProcessGrid grid(world, shape);
    const Graph3D graph = load_graph_3d(GraphFileReader(world, two_class_file()), grid, Graph3DOptions{});
    const std::unique_ptr<Sequential> model = one_logit_gcn(grid, graph.num_features);
    FullGraphSource source(graph, grid, world, *model);
    const TrainResult r = frozen_epoch(*model, source, world);
    ASSERT_EQ(r.history.size(), 1u);
    ASSERT_EQ(r.last_logits.size(), truth.labels.size());
    const EpochRecord& e = r.history[0];
    EXPECT_EQ(e.metric, "roc_auc");
    const Reference train = reference_on(r.last_logits, truth, "train");
    const Reference valid = reference_on(r.last_logits, truth, "valid");
    EXPECT_NEAR(e.loss, train.loss, 1e-6 * std::max(1.0, train.loss));
    EXPECT_NEAR(e.train_acc, train.auc, 1e-12);
    EXPECT_NEAR(e.valid_acc, valid.auc, 1e-12);
    EXPECT_NEAR(e.test_acc, reference_on(r.last_logits, truth, "test").auc, 1e-12);
    EXPECT_NEAR(e.valid_loss, valid.loss, 1e-6 * std::max(1.0, valid.loss));
    EXPECT_GT(valid.auc, 0.0);
  }
}

// Mini-batches evaluate on the full graph in the loss's metric; the sampled mode in it too, exact
// (layer-wise: every neighbour, so the reference's areas up to the rounding of another summation order) and
// on sampled neighbourhoods.
TEST(BinaryCrossEntropy, MinibatchAndSampledEvaluateInRocArea) {
  const Communicator world = Communicator::world();
  const Truth truth = truth_of(two_class_file());
  const ProcessGrid one(world, GridShape{1, 1, 1, world.size()});
  const Graph3D graph = load_graph_3d(GraphFileReader(world, two_class_file()), one, Graph3DOptions{});
  const std::unique_ptr<Sequential> full_model = one_logit_gcn(one, graph.num_features);
  FullGraphSource full(graph, one, world, *full_model);
  const TrainResult reference = frozen_epoch(*full_model, full, world);
  const Reference valid = reference_on(reference.last_logits, truth, "valid");

  const std::unique_ptr<Sequential> batch_model = one_logit_gcn(one, graph.num_features);
  MinibatchOptions batches;
  batches.batch_size = 64;
  MinibatchSource minibatch(graph, one, world, batches, *batch_model);
  const EpochRecord m = frozen_epoch(*batch_model, minibatch, world).history.at(0);
  EXPECT_EQ(m.metric, "roc_auc");
  EXPECT_NEAR(m.valid_acc, valid.auc, 1e-12);

  const ProcessGrid sampled_grid(world, GridShape{world.size(), 1, 1, 1});
  const PartitionedGraph parts = load_partitioned(world, two_class_file(), "block");
  for (const bool exact : {true, false}) {
    SCOPED_TRACE(exact ? "exact evaluation" : "sampled evaluation");
    const std::unique_ptr<Sequential> model = one_logit_gcn(sampled_grid, parts.num_features);
    SampledOptions o;
    o.batch_size = 16;
    o.thread = StepThread::Off;
    o.exact_eval = exact;
    // The weighting given for a model whose layers name none must be the one they name where they do.
    EXPECT_THROW(SampledSource(parts, sampled_grid, world, o, *model, Normalization::Mean), Error);
    SampledSource sampled(parts, sampled_grid, world, o, *model, Normalization::Symmetric);
    const EpochRecord s = frozen_epoch(*model, sampled, world).history.at(0);
    EXPECT_EQ(s.metric, "roc_auc");
    if (exact) {
      EXPECT_NEAR(s.valid_acc, valid.auc, 0.01);
      EXPECT_NEAR(s.valid_loss, valid.loss, 1e-4 * std::max(1.0, valid.loss));
    } else {
      EXPECT_GT(s.valid_acc, 0.0);
      EXPECT_LE(s.valid_acc, 1.0);
    }
    EXPECT_GT(s.train_acc, 0.0);  // the steps' own seeds, scored as they trained
  }
}

// Empty blocks: four nodes on the world's ranks (blocks of one row or none, the one logit column on one rank
// of the classes' axis, ranks with no training or validation row). Every rank still enters the loss's and
// the ROC area's collectives, so every grid gives the one-rank run's loss and scores.
TEST(BinaryCrossEntropy, EmptyBlocksEnterEveryCollective) {
  const Communicator world = Communicator::world();
  const std::string path = fixtures::four_node_file("four-nodes-bce.h5");
  const auto run = [&](const Communicator& comm, const GridShape& shape) {
    const ProcessGrid grid(comm, shape);
    const Graph3D graph = load_graph_3d(GraphFileReader(comm, path), grid, Graph3DOptions{});
    const std::unique_ptr<Sequential> model = one_logit_gcn(grid, graph.num_features);
    FullGraphSource source(graph, grid, comm, *model);
    return frozen_epoch(*model, source, comm).history.at(0);
  };
  const Communicator self = world.split(world.rank(), 0);
  const EpochRecord one = run(self, GridShape{});
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const EpochRecord e = run(world, shape);
    EXPECT_NEAR(e.loss, one.loss, 1e-6 * std::max(1.0, one.loss));
    EXPECT_EQ(e.train_acc, one.train_acc);
    EXPECT_EQ(e.valid_acc, one.valid_acc);
    EXPECT_EQ(e.test_acc, one.test_acc);
  }
}

// A two-class loss on a graph of five classes stops the run with one message on every rank.
TEST(BinaryCrossEntropy, RefusesLabelsPastOne) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, ProcessGrid::factorizations(world.size(), false).back());
  const Graph3D graph =
      load_graph_3d(GraphFileReader(world, fixtures::small_csbm_file()), grid, Graph3DOptions{});
  const std::unique_ptr<Sequential> model = one_logit_gcn(grid, graph.num_features);
  FullGraphSource source(graph, grid, world, *model);
  try {
    frozen_epoch(*model, source, world);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("binary_cross_entropy: "), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find("covered nodes have a label other than 0 or 1"), std::string::npos);
  }
}

}  // namespace tessera
