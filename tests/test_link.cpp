// SPDX-License-Identifier: BSD-3-Clause
// Link prediction (LinkLoss) against a plain double-precision reference: the loss, its gradient and every
// split's score on embeddings spread over every grid of the world's ranks (rows over one axis in a shuffled
// order with padding, columns over another, blocks of one row or none), and a full-graph training epoch on
// a graph file's link splits that equals one rank's on every grid. Refusals of link splits that cannot be
// trained or scored.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tessera/tessera.hpp>

#include "support/fixtures.hpp"
#include "support/link_files.hpp"
#include "support/link_reference.hpp"
#include "tessera/graph/hdf5_io.hpp"
#include "tessera/models/nn/random_streams.hpp"

namespace tessera {
namespace {

double dot(const Embeddings& h, int64_t u, int64_t v) {
  double s = 0;
  for (size_t j = 0; j < h[size_t(u)].size(); ++j) s += h[size_t(u)][j] * h[size_t(v)][j];
  return s;
}

// The ROC area by its definition, ties half.
double pairwise_auc(const std::vector<double>& pos, const std::vector<double>& neg) {
  double above = 0;
  for (double p : pos)
    for (double q : neg) above += p > q ? 1.0 : p == q ? 0.5 : 0.0;
  return pos.empty() || neg.empty() ? 0.0 : above / double(pos.size() * neg.size());
}

// Hits@K by its definition: positives above the K-th highest negative (every positive where fewer).
double hits(const std::vector<double>& pos, std::vector<double> neg, size_t k) {
  if (neg.size() < k) return 1.0;
  std::sort(neg.rbegin(), neg.rend());
  return double(std::count_if(pos.begin(), pos.end(), [&](double p) { return p > neg[k - 1]; })) /
         double(pos.size());
}

struct SplitReference {
  std::vector<double> pos, shared, own;
};
SplitReference reference_split(const Embeddings& h, const LinkEvaluationSplit& s) {
  SplitReference r;
  for (int64_t e = 0; e < s.positives.size(); ++e) {
    r.pos.push_back(dot(h, s.positives.source[size_t(e)], s.positives.target[size_t(e)]));
    for (int64_t j = 0; j < s.negatives_per_edge; ++j)
      r.own.push_back(
          dot(h, s.positives.source[size_t(e)], s.negative_targets[size_t(e * s.negatives_per_edge + j)]));
  }
  for (int64_t e = 0; e < s.shared_negatives.size(); ++e)
    r.shared.push_back(dot(h, s.shared_negatives.source[size_t(e)], s.shared_negatives.target[size_t(e)]));
  return r;
}

}  // namespace

// The loss and its gradient, and every split's score in each metric, against the reference, on every grid
// (13 nodes: on 8 ranks, blocks of one row or none).
TEST(LinkLoss, LossGradientAndScoresEqualTheReferenceOnEveryGrid) {
  const Communicator world = Communicator::world();
  for (const int64_t n : {13, 40}) {
    const int64_t width = 5, step_key = 3;
    const Embeddings h = random_embeddings(n, width, uint64_t(n));
    const std::shared_ptr<LinkTask> task = random_task(n, 11);
    // The reference: the step's negatives drawn as the loss documents (its source, a uniform target).
    const int64_t k = 2;
    NodePairs pairs = task->train;
    const CounterRng rng(7, streams::kLinkNegatives);
    for (int64_t i = 0; i < task->train.size(); ++i)
      for (int64_t d = 0; d < k; ++d)
        pairs.source.push_back(task->train.source[size_t(i)]),
            pairs.target.push_back(int64_t(rng.below(step_key, uint64_t(i * k + d), uint64_t(n))));
    double loss = 0;
    Embeddings grad(size_t(n), std::vector<double>(size_t(width), 0.0));
    for (int64_t e = 0; e < pairs.size(); ++e) {
      const int64_t u = pairs.source[size_t(e)], v = pairs.target[size_t(e)];
      const double y = e < task->train.size() ? 1 : 0, s = dot(h, u, v), d = 1 / (1 + std::exp(-s)) - y;
      loss += bce(s, y);
      for (int64_t j = 0; j < width; ++j)
        grad[size_t(u)][size_t(j)] += d * h[size_t(v)][size_t(j)],
            grad[size_t(v)][size_t(j)] += d * h[size_t(u)][size_t(j)];
    }
    const SplitReference valid = reference_split(h, task->valid), test = reference_split(h, task->test);
    for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
      SCOPED_TRACE(std::to_string(n) + " nodes on " + shape.str());
      const ProcessGrid grid(world, shape);
      const Block b = block_of(h, grid);
      const LogitsLayout layout{&grid.axis(Axis::X), &grid.axis(Axis::Y), b.col_begin, width};
      HostVector<int64_t> nodes("nodes", b.nodes.size());
      std::copy(b.nodes.begin(), b.nodes.end(), nodes.data());
      const LossInput in{
          layout, b.logits, {}, {}, {}, Kokkos::create_mirror_view_and_copy(DeviceSpace(), nodes), step_key};
      LinkLoss link(task, LinkLossOptions{7, k, MetricKind::Auto});
      const Matrix<float> g("grad", b.logits.extent(0), b.logits.extent(1));
      const LossSum s = link.sum_and_gradient(in, g);
      EXPECT_EQ(s.count, pairs.size());
      EXPECT_NEAR(s.sum, loss, 1e-9 * loss);
      EXPECT_LT(gradient_error(b, g, grad), 1e-5);
      // Scores: mrr by default (the splits give per-pair negatives), and each metric asked for.
      const SplitScores auto_scores = *link.score_splits(in);
      EXPECT_EQ(auto_scores.metric, "mrr");
      EXPECT_NEAR(auto_scores.valid, mrr(valid.pos, valid.own, 4), 1e-12);
      EXPECT_NEAR(auto_scores.test, mrr(test.pos, test.own, 4), 1e-12);
      double valid_loss = 0;
      for (double p : valid.pos) valid_loss += bce(p, 1);
      for (const auto* list : {&valid.shared, &valid.own})
        for (double q : *list) valid_loss += bce(q, 0);
      EXPECT_NEAR(auto_scores.valid_loss,
                  valid_loss / double(valid.pos.size() + valid.shared.size() + valid.own.size()), 1e-9);
      EXPECT_GT(auto_scores.train, 0.0);
      LinkLoss by_hits(task, LinkLossOptions{7, 1, MetricKind::Hits20});
      const SplitScores h20 = *by_hits.score_splits(in);
      EXPECT_EQ(h20.metric, "hits@20");
      EXPECT_NEAR(h20.valid, hits(valid.pos, valid.shared, 20), 1e-12);
      EXPECT_NEAR(h20.test, hits(test.pos, test.shared, 20), 1e-12);
      LinkLoss by_auc(task, LinkLossOptions{7, 1, MetricKind::RocAuc});
      const SplitScores auc = *by_auc.score_splits(in);
      std::vector<double> negatives = valid.shared;
      negatives.insert(negatives.end(), valid.own.begin(), valid.own.end());
      EXPECT_NEAR(auc.valid, pairwise_auc(valid.pos, negatives), 1e-12);
      // Training pairs: evenly spaced, as many as the validation positives, against its negatives.
      std::vector<double> train;
      for (int64_t i = 0; i < 9; ++i) {
        const size_t at = size_t(i * task->train.size() / 9);
        train.push_back(dot(h, task->train.source[at], task->train.target[at]));
      }
      EXPECT_NEAR(auc.train, pairwise_auc(train, negatives), 1e-12);
      EXPECT_NEAR(h20.train, hits(train, valid.shared, 20), 1e-12);
    }
  }
}

// What the task's splits cannot give is refused when the loss is made.
TEST(LinkLoss, RefusesMetricsItsSplitsCannotScore) {
  std::shared_ptr<LinkTask> task = random_task(10, 3);
  task->valid.negative_targets.clear(), task->valid.negatives_per_edge = 0;
  EXPECT_THROW(LinkLoss(task, LinkLossOptions{0, 1, MetricKind::Mrr}), Error);
  EXPECT_THROW(LinkLoss(task, LinkLossOptions{0, 1, MetricKind::Accuracy}), Error);
  EXPECT_THROW(LinkLoss(task, LinkLossOptions{0, 0, MetricKind::Auto}), Error);
  EXPECT_EQ(LinkLoss(task, LinkLossOptions{}).metric_name(), "roc_auc");
  task->test.shared_negatives = {};
  task->valid.shared_negatives = {};
  task->valid.negatives_per_edge = 4, task->valid.negative_targets.assign(4 * 9, 1);
  EXPECT_THROW(LinkLoss(task, LinkLossOptions{0, 1, MetricKind::Hits50}), Error);
  EXPECT_THROW(make_metric(MetricKind::Mrr, false), Error);
}

// A training epoch (learning rate 0) of a GCN encoder on a graph file's link splits: the same loss and
// scores on every grid as on one rank, and the scores (MRR: each split gives per-pair negatives, as
// ogbl-citation2's) those of the reference on the run's embeddings.
TEST(LinkLoss, FullGraphEpochIsTheSameOnEveryGrid) {
  const Communicator world = Communicator::world();
  const std::vector<std::vector<int64_t>> targets = three_targets_each(8);
  const std::string path = link_file("links.h5", {{"/link/train/edges", pair_rows(60, 1)},
                                                  {"/link/valid/edges", pair_rows(8, 2)},
                                                  {"/link/valid/negative_targets", targets},
                                                  {"/link/test/edges", pair_rows(8, 3)},
                                                  {"/link/test/negative_targets", targets},
                                                  {"/link/test/negatives", pair_rows(12, 4)}});
  const auto run = [&](const Communicator& comm, const GridShape& shape) {
    const ProcessGrid grid(comm, shape);
    const GraphFileReader reader(comm, path);
    auto task = std::make_shared<const LinkTask>(read_link_task(reader, comm));
    const Graph3D graph = load_graph_3d(reader, grid, Graph3DOptions{});
    auto model = std::make_unique<Sequential>(grid, graph.num_features, RunOptions{}, 7);
    ConvOptions hidden;
    hidden.relu = true;
    model->add<GcnConv>(8, hidden);
    model->add<GcnConv>(4);
    FullGraphSource source(graph, grid, comm, *model);
    TrainerOptions options;
    options.epochs = 1;
    options.optimizer.lr = 0;
    options.keep_last_step = true;
    Trainer trainer(*model, source, comm, options);
    trainer.set_loss(std::make_unique<LinkLoss>(task, LinkLossOptions{3, 1, MetricKind::Auto}));
    return trainer.run();
  };
  const Communicator self = world.split(world.rank(), 0);
  const TrainResult one = run(self, GridShape{});
  const EpochRecord& first = one.history.at(0);
  EXPECT_EQ(first.metric, "mrr");
  EXPECT_GT(first.valid_acc, 0.0);
  // The test split's score from the run's embeddings (node x 4, node order).
  const GraphFileReader reader(world, path);
  const LinkTask task = read_link_task(reader, world);
  Embeddings h(37, std::vector<double>(4));
  for (size_t v = 0; v < 37; ++v)
    for (size_t j = 0; j < 4; ++j) h[v][j] = one.last_logits[v * 4 + j];
  const SplitReference valid = reference_split(h, task.valid), test = reference_split(h, task.test);
  EXPECT_NEAR(first.valid_acc, mrr(valid.pos, valid.own, 3), 1e-6);
  EXPECT_NEAR(first.test_acc, mrr(test.pos, test.own, 3), 1e-6);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const EpochRecord e = run(world, shape).history.at(0);
    EXPECT_NEAR(e.loss, first.loss, 1e-6 * first.loss);
    EXPECT_NEAR(e.valid_acc, first.valid_acc, 1e-6);
    EXPECT_NEAR(e.test_acc, first.test_acc, 1e-6);
    EXPECT_NEAR(e.valid_loss, first.valid_loss, 1e-6 * first.valid_loss);
  }
}

// Pairs the batch names as rows (the sampled mode's steps): the loss and gradient against the reference, on
// every grid whose rows axis is one rank (columns split over the others; padding rows unnamed).
TEST(LinkLoss, PairsNamedAsRowsEqualTheReference) {
  const Communicator world = Communicator::world();
  const int64_t n = 13, width = 5;
  const Embeddings h = random_embeddings(n, width, 21);
  std::mt19937_64 gen(4);
  const NodePairs named = random_pairs(30, n, gen);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    const ProcessGrid grid(world, shape);
    if (grid.axis(Axis::X).size() > 1) continue;
    SCOPED_TRACE(shape.str());
    const Block b = block_of(h, grid);  // every row here, in a shuffled order
    std::vector<double> labels;
    for (int64_t e = 0; e < named.size(); ++e) labels.push_back(e % 3 == 0 ? 1 : 0);
    const RowPairs pairs = pairs_as_rows(b, named, labels);
    double loss = 0;
    Embeddings grad(size_t(n), std::vector<double>(size_t(width), 0.0));
    for (int64_t e = 0; e < named.size(); ++e) {
      const int64_t u = named.source[size_t(e)], v = named.target[size_t(e)];
      const double y = labels[size_t(e)], s = dot(h, u, v), d = 1 / (1 + std::exp(-s)) - y;
      loss += bce(s, y);
      for (int64_t j = 0; j < width; ++j)
        grad[size_t(u)][size_t(j)] += d * h[size_t(v)][size_t(j)],
            grad[size_t(v)][size_t(j)] += d * h[size_t(u)][size_t(j)];
    }
    const LogitsLayout layout{&grid.axis(Axis::X), &grid.axis(Axis::Y), b.col_begin, width};
    LossInput in{layout, b.logits, {}, {}, {}};
    in.pairs = &pairs;
    LinkLoss link(random_task(n, 1), LinkLossOptions{});
    const Matrix<float> g("grad", b.logits.extent(0), b.logits.extent(1));
    const LossSum s = link.sum_and_gradient(in, g);
    EXPECT_EQ(s.count, 30);
    EXPECT_NEAR(s.sum, loss, 1e-9 * loss);
    EXPECT_LT(gradient_error(b, g, grad), 1e-5);
  }
}

// A graph whose link splits cannot train or be scored is refused on every rank, naming the file.
TEST(LinkLoss, RefusesSplitsItCannotUse) {
  const Communicator world = Communicator::world();
  const auto refused = [&](const std::string& name,
                           const std::map<std::string, std::vector<std::vector<int64_t>>>& parts,
                           const std::string& words) {
    const std::string path = link_file(name, parts);
    try {
      read_link_task(GraphFileReader(world, path), world);
      ADD_FAILURE() << name << " was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("no-train.h5", {{"/link/valid/edges", pair_rows(3, 1)}, {"/link/valid/negatives", pair_rows(3, 2)}},
          "has no /link/train/edges");
  refused("no-negatives.h5", {{"/link/train/edges", pair_rows(3, 1)}, {"/link/valid/edges", pair_rows(3, 2)}},
          "/link/valid has no negatives");
  refused("no-eval.h5", {{"/link/train/edges", pair_rows(3, 1)}}, "neither /link/valid nor /link/test");
}

}  // namespace tessera

namespace tessera {

// The performance model's bytes per epoch of a link run (the gather of the rows its pairs name, the
// partial scores' sum) against the busiest rank's measured bytes of the second epoch, on every grid: within
// 10% (the model counts a uniform share of the rows per rank; 400 pairs over 37 nodes name every node).
TEST(LinkLoss, PredictedBytesPerEpochAreTheMeasured) {
  const Communicator world = Communicator::world();
  const std::vector<std::vector<int64_t>> targets = three_targets_each(8);
  const std::string path = link_file("bytes.h5", {{"/link/train/edges", pair_rows(200, 5)},
                                                  {"/link/valid/edges", pair_rows(8, 2)},
                                                  {"/link/valid/negative_targets", targets}});
  TrainOptions o;
  o.data = path;
  o.task.kind = TaskKind::Link;
  o.model.hidden = 12;
  o.model.out = 12;
  o.trainer.epochs = 2;
  o.trainer.eval_every = 0;
  o.outputs.quiet = true;
  o.grid.memory_per_rank = 0;
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const GraphMeta meta = GraphFileReader(self, path).meta();
  ASSERT_EQ(meta.link_train_pairs, 200);
  ProblemSize problem = problem_size(meta, o.model);
  problem.link_pairs = 400;
  // The dot product, then an MLP decoder (its first layer's partial sums over the columns' axis).
  for (const LinkDecoderKind decoder : {LinkDecoderKind::Dot, LinkDecoderKind::Mlp}) {
    o.task.link_decoder = decoder;
    if (decoder == LinkDecoderKind::Mlp) problem.link_decoder_layers = 2, problem.link_decoder_hidden = 12;
    for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
      SCOPED_TRACE(shape.str() + " " + name_of(kLinkDecoderKindNames, decoder));
      o.grid.shape = shape;
      const TrainResult r = run_training(o, world);
      const double measured = r.history.at(1).metrics.value("bytes_max_rank", 0.0);
      const double predicted = predict_epoch(problem, shape, builtin_machine("local")).comm_bytes;
      EXPECT_NEAR(measured, predicted, 0.1 * predicted + 16);
    }
  }
}

}  // namespace tessera

namespace tessera {

// Pair batches: an epoch of link-batch steps scores every training pair once (the steps' counts add up to
// the pairs and their negatives), and a run of them is the same on every grid as on one rank.
TEST(LinkLoss, PairBatchesCoverTheEpochOnEveryGrid) {
  const Communicator world = Communicator::world();
  const std::string path = link_file("batches.h5", {{"/link/train/edges", pair_rows(50, 6)},
                                                    {"/link/valid/edges", pair_rows(8, 2)},
                                                    {"/link/valid/negatives", pair_rows(9, 3)}});
  auto task = std::make_shared<const LinkTask>(read_link_task(GraphFileReader(world, path), world));
  LinkLoss loss(task, LinkLossOptions{1, 2, MetricKind::Auto, 16});
  ASSERT_EQ(loss.steps_per_epoch(), 4);
  {  // one epoch's steps on one rank's embeddings: 16, 16, 16 and 2 pairs, each with 2 negatives
    const Communicator alone = world.split(world.rank(), 0);
    const ProcessGrid grid(alone, GridShape{});
    const Block b = block_of(random_embeddings(37, 6, 3), grid);
    HostVector<int64_t> nodes("nodes", b.nodes.size());
    std::copy(b.nodes.begin(), b.nodes.end(), nodes.data());
    const auto device_nodes = Kokkos::create_mirror_view_and_copy(DeviceSpace(), nodes);
    const Matrix<float> g("grad", b.logits.extent(0), b.logits.extent(1));
    const LogitsLayout layout{&grid.axis(Axis::X), &grid.axis(Axis::Y), 0, 6};
    std::vector<int64_t> counts;
    for (int64_t step = 4; step < 8; ++step)  // epoch 1
      counts.push_back(
          loss.sum_and_gradient(LossInput{layout, b.logits, {}, {}, {}, device_nodes, step}, g).count);
    EXPECT_EQ(counts, (std::vector<int64_t>{48, 48, 48, 6}));
  }
  TrainOptions o;
  o.data = path;
  o.task.kind = TaskKind::Link;
  o.task.link_batch = 16;
  o.task.link_negatives = 2;
  o.model.hidden = o.model.out = 6;
  o.trainer.epochs = 3;
  o.outputs.quiet = true;
  o.grid.memory_per_rank = 0;
  o.trainer.keep_last_step = true;
  const Communicator self = world.split(world.rank(), 0);
  const TrainResult one = run_training(o, self);
  ASSERT_EQ(one.history.size(), 3u);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    o.grid.shape = shape;
    const TrainResult r = run_training(o, world);
    for (size_t e = 0; e < 3; ++e) EXPECT_NEAR(r.history[e].loss, one.history[e].loss, 1e-5);
    EXPECT_NEAR(r.best_valid, one.best_valid, 1e-6);
  }
}

}  // namespace tessera
