// SPDX-License-Identifier: BSD-3-Clause
// Graph attention (GatConv) against the dense double-precision reference (reference/attention.hpp): the
// reference's backward against finite differences; the layer on one rank on every kernel path, with
// attention and output dropout, kept and recomputed attention; and a GAT model's training step on every grid
// of this run's rank count (a graph of 9 nodes too, whose blocks are empty on some ranks) equal to the
// reference, and, with every dropout on, its runs equal to one rank's.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "reference/attention.hpp"
#include "reference/dense.hpp"
#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "support/predicted_bytes.hpp"
#include "support/random_graph.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/models/modes/full_graph.hpp"
#include "tessera/models/nn/attention.hpp"
#include "tessera/models/nn/model.hpp"
#include "tessera/models/nn/random_streams.hpp"
#include "tessera/models/train.hpp"

using namespace tessera;
using namespace tessera::reference;

namespace {

// A graph as the reference sees it: features, every in-edge plus the self loop as a dense mask, labels and
// the training mask.
struct DenseGraph {
  Dense x, mask;
  std::vector<int64_t> labels;
  std::vector<uint8_t> train;
  int64_t classes = 0;
};

DenseGraph read_dense(const std::string& path) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const GraphFileReader reader(self, path);
  const int64_t n = reader.meta().num_nodes, f = reader.meta().num_features;
  DenseGraph g;
  g.classes = reader.meta().num_classes;
  const std::vector<int64_t> indptr = reader.read_indptr(0, n + 1);
  const std::vector<int64_t> indices = reader.read_indices(0, indptr.back());
  g.mask = Dense(n, n);
  for (int64_t v = 0; v < n; ++v) {
    g.mask(v, v) = 1;
    for (int64_t k = indptr[size_t(v)]; k < indptr[size_t(v + 1)]; ++k) g.mask(v, indices[size_t(k)]) = 1;
  }
  const std::vector<float> x = reader.read_features(0, n);
  g.x = Dense(n, f);
  for (size_t k = 0; k < x.size(); ++k) g.x.a[k] = x[k];
  g.labels = reader.read_labels(0, n);
  g.train.assign(size_t(n), 0);
  for (const SplitInfo& split : reader.splits())
    if (split.name == "train")
      for (int64_t v : reader.read_split("train", 0, split.size)) g.train[size_t(v)] = 1;
  return g;
}

Dense dense_of(const Parameter& p) {
  return from_view(p.matrix());
}

// A random undirected graph's in-edge lists (no self loops; the last node isolated).
std::vector<std::set<int64_t>> random_graph(int64_t n, int64_t edges, uint64_t seed) {
  return fixtures::random_in_edges(n, edges, seed, 1);
}

Graph3D graph_from(const ProcessGrid& grid, const std::vector<std::set<int64_t>>& in, const Dense& x) {
  GraphRows r;
  r.num_nodes = int64_t(in.size());
  r.num_features = x.cols;
  r.num_classes = 2;
  for (const std::set<int64_t>& sources : in) {
    r.indices.insert(r.indices.end(), sources.begin(), sources.end());
    r.indptr.push_back(int64_t(r.indices.size()));
  }
  for (double v : x.a) r.features.push_back(float(v));
  r.labels.assign(in.size(), 0);
  r.splits.assign(in.size(), GraphRows::kTrain);
  Graph3DOptions load;
  load.layers = 1;
  load.permute = PermuteMode::None;
  return build_graph_3d(r, grid, load);
}

Dense mask_of(const std::vector<std::set<int64_t>>& in) {
  const int64_t n = int64_t(in.size());
  Dense m(n, n);
  for (int64_t v = 0; v < n; ++v) {
    m(v, v) = 1;
    for (int64_t u : in[size_t(v)]) m(v, u) = 1;
  }
  return m;
}

double weighted_sum(const Dense& out, const Dense& r) {
  double s = 0;
  for (size_t k = 0; k < out.a.size(); ++k) s += out.a[k] * r.a[k];
  return s;
}

}  // namespace

// d(sum(out * R)) of the reference layer against central finite differences, for every input it has.
TEST(ReferenceGat, BackwardMatchesCentralFiniteDifferences) {
  std::mt19937_64 gen(3);
  const auto in = random_graph(7, 12, 5);
  for (const bool concat : {true, false})
    for (const Act act : {Act::None, Act::Relu, Act::Elu}) {
      SCOPED_TRACE(std::string(concat ? "concat " : "mean ") + std::to_string(int(act)));
      GatSpec s;
      s.mask = mask_of(in), s.heads = 2, s.concat = concat, s.act = act;
      for (int h = 0; h < 2; ++h) {
        Dense scale(7, 7, 1.0);
        for (double& v : scale.a) v = gen() % 4 == 0 ? 0.0 : 1.25;
        s.edge_scale.push_back(scale);
      }
      const int64_t width = concat ? 6 : 3;
      s.out_scale = Dense(7, width, 1.0);
      for (double& v : s.out_scale.a) v = gen() % 5 == 0 ? 0.0 : 1.5;
      GatWeights p{random_dense(4, 6, gen), random_dense(2, 3, gen), random_dense(2, 3, gen),
                   random_dense(1, width, gen)};
      Dense x = random_dense(7, 4, gen);
      const Dense r = random_dense(7, width, gen);
      GatTape t;
      gat_forward(s, p, x, t);
      const GatGrads g = gat_backward(s, p, t, r);
      const auto check = [&](Dense& m, const Dense& grad, const char* what) {
        for (size_t k = 0; k < m.a.size(); ++k) {
          const double saved = m.a[k], h = 1e-6;
          GatTape scratch;
          m.a[k] = saved + h;
          const double up = weighted_sum(gat_forward(s, p, x, scratch), r);
          m.a[k] = saved - h;
          const double down = weighted_sum(gat_forward(s, p, x, scratch), r);
          m.a[k] = saved;
          EXPECT_NEAR(grad.a[k], (up - down) / (2 * h), 1e-6 * std::max(1.0, std::abs(grad.a[k])))
              << what << k;
        }
      };
      check(x, g.x, "x");
      check(p.w, g.w, "w");
      check(p.att_src, g.att_src, "att_src");
      check(p.att_dst, g.att_dst, "att_dst");
      check(p.bias, g.bias, "bias");
    }
}

// One GatConv on one rank, forward and backward, against the reference with the library's dropout masks
// and initial weights, on every kernel path, with the attention kept and recomputed.
TEST(GatConv, MatchesTheDenseReferenceOnEveryKernelPath) {
  const Communicator world = Communicator::world();
  if (world.size() > 1) GTEST_SKIP() << "one rank";
  const ProcessGrid grid(world, GridShape{});
  const int64_t n = 13;
  const auto in = random_graph(n, 26, 4);
  std::mt19937_64 gen(8);
  std::vector<KernelPath> paths{KernelPath::Auto};
  for (KernelPath path : {KernelPath::Host, KernelPath::Team})
    if (kernel_path_available(path, KernelKind::Gemm) && kernel_path_available(path, KernelKind::Spmm))
      paths.push_back(path);
  for (KernelPath path : paths)
    for (const bool recompute : {false, true})
      for (const bool concat : {true, false})
        for (const Activation act : {Activation::None, Activation::Elu, Activation::Relu}) {
          SCOPED_TRACE(std::string(kernel_path_name(path)) + (recompute ? " recompute " : " kept ") +
                       (concat ? "concat " : "mean ") + activation_name(act));
          const Dense x = random_dense(n, 5, gen);
          const Graph3D g = graph_from(grid, in, x);
          RunOptions run{path, 0, CommDtype::F32};
          run.recompute_aggregation = recompute;
          Sequential model(grid, 5, run, 99);
          GatOptions o;
          o.heads = 3, o.concat = concat, o.activation = act, o.attention_dropout = 0.3f, o.dropout = 0.25f;
          model.add<GatConv>(2, o);
          const int64_t width = concat ? 6 : 2;
          const Dense r = random_dense(n, width, gen);
          const GraphBatch batch = full_graph_batch(g, model.batch_needs());
          const PassInfo pass{true, 7, 3};
          const Dense out = from_view(model.layer(0).forward(g.features, batch, pass));
          const Dense grad_in = from_view(model.layer(0).backward(to_view<float>(r), true, pass));
          // The reference with the library's weights and masks (keyed by node ids: no permutation here).
          const std::vector<ParameterRef> params = model.parameters();
          ASSERT_EQ(params.size(), 4u);
          GatSpec s;
          s.mask = mask_of(in), s.heads = 3, s.concat = concat;
          s.act = act == Activation::Elu ? Act::Elu : act == Activation::Relu ? Act::Relu : Act::None;
          const EdgeDropout edges(0.3f, 7, streams::attention_dropout(3, 0), 3, {}, {});
          for (int64_t h = 0; h < 3; ++h) {
            Dense scale(n, n);
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < n; ++j) scale(i, j) = edges.factor_of_nodes(i, j, h);
            s.edge_scale.push_back(scale);
          }
          const DropoutMask outputs(0.25f, 7, streams::dropout(3, 0));
          s.out_scale = Dense(n, width);
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < width; ++j) s.out_scale(i, j) = outputs.keep(i, j) ? 1.0 / 0.75 : 0.0;
          const GatWeights p{dense_of(*params[0].param), dense_of(*params[1].param),
                             dense_of(*params[2].param), dense_of(*params[3].param)};
          GatTape t;
          EXPECT_LT(relative_error(out, gat_forward(s, p, x, t)), 1e-5);
          const GatGrads expect = gat_backward(s, p, t, r);
          EXPECT_LT(relative_error(grad_in, expect.x), 1e-5) << "input";
          size_t k = 0;
          for (const Dense* e : {&expect.w, &expect.att_src, &expect.att_dst, &expect.bias}) {
            EXPECT_LT(relative_error(from_view(params[k].param->grad_matrix()), *e), 1e-5)
                << params[k].param->name;
            ++k;
          }
        }
}

namespace {

// A two-layer GAT (3 concatenated heads of 4, ELU, then 2 averaged heads) of the model builder.
TrainOptions gat_run(const std::string& data, bool dropout) {
  TrainOptions o;
  o.data = data;
  o.model.kind = ModelKind::Gat;
  o.model.layers = 2;
  o.model.hidden = 4;
  o.model.heads = 3;
  o.model.output_heads = 2;
  o.model.dropout = o.model.input_dropout = dropout ? 0.3f : 0.0f;
  o.model.attention_dropout = dropout ? 0.4f : 0.0f;
  o.model.seed = 11;
  o.trainer.optimizer.lr = 0.02f;
  o.trainer.keep_last_step = true;
  o.outputs.quiet = true;
  return o;
}

// The reference step of gat_run (no dropout) from the model's initial weights: the logits and every
// parameter's gradient of the mean training cross-entropy, in parameter order.
std::pair<Dense, std::vector<Dense>> reference_step(const DenseGraph& g,
                                                    const std::vector<ParameterRef>& params) {
  std::vector<GatWeights> w(2);
  for (size_t l = 0; l < 2; ++l)
    w[l] = {dense_of(*params[4 * l].param), dense_of(*params[4 * l + 1].param),
            dense_of(*params[4 * l + 2].param), dense_of(*params[4 * l + 3].param)};
  GatSpec first, second;
  first.mask = second.mask = g.mask;
  first.heads = 3, first.concat = true, first.act = Act::Elu;
  second.heads = 2, second.concat = false;
  GatTape t1, t2;
  const Dense h1 = gat_forward(first, w[0], g.x, t1);
  const Dense logits = gat_forward(second, w[1], h1, t2);
  Dense d_logits;
  softmax_cross_entropy(logits, g.labels, g.train, &d_logits);
  const GatGrads g2 = gat_backward(second, w[1], t2, d_logits);
  const GatGrads g1 = gat_backward(first, w[0], t1, g2.x);
  return {logits, {g1.w, g1.att_src, g1.att_dst, g1.bias, g2.w, g2.att_src, g2.att_dst, g2.bias}};
}

std::vector<double> concatenated(const std::vector<Dense>& parts) {
  std::vector<double> all;
  for (const Dense& d : parts) all.insert(all.end(), d.a.begin(), d.a.end());
  return all;
}

double relative_difference(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0, top = 1e-30;
  for (size_t k = 0; k < want.size(); ++k) {
    diff = std::max(diff, std::abs(double(got[k]) - want[k]));
    top = std::max(top, std::abs(want[k]));
  }
  return diff / top;
}

const std::string& tiny_file() {
  static std::string path;
  if (path.empty()) {
    SynthOptions o;
    o.num_nodes = 9;
    o.num_edges = 10;
    o.num_features = 3;
    o.num_classes = 2;
    o.seed = 4;
    path = fixtures::synthetic_file("tiny.h5", o);
  }
  return path;
}

}  // namespace

// Every grid of this run's ranks computes the reference's logits and gradients of the first step (within
// float round-off: 1e-5 of the largest entry), the attention kept and recomputed.
TEST(GatModel, EveryGridMatchesTheDenseReference) {
  const Communicator world = Communicator::world();
  for (const std::string& path : {fixtures::small_csbm_file(), tiny_file()}) {
    const DenseGraph g = read_dense(path);
    TrainOptions o = gat_run(path, false);
    o.trainer.epochs = 1;
    // The initial weights, as every grid draws them, from a model on one rank.
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    const ProcessGrid one(self, GridShape{});
    ModelConfig config = o.model;
    config.in = g.x.cols, config.out = g.classes;
    const std::unique_ptr<Sequential> model = build_model(config, one, RunOptions{}, true);
    const auto [logits, grads] = reference_step(g, model->parameters());
    const std::vector<double> expected = concatenated(grads);
    for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false))
      for (const bool recompute : {false, true}) {
        if (shape.x > g.x.rows || shape.y > g.x.rows || shape.z > g.x.rows) continue;
        SCOPED_TRACE(path + " " + shape.str() + (recompute ? " recompute" : " kept"));
        o.grid.shape = shape;
        o.compute.recompute_aggregation = recompute;
        const TrainResult r = run_training(o, world);
        ASSERT_EQ(int64_t(r.last_logits.size()), logits.rows * logits.cols);
        EXPECT_LT(relative_difference(r.last_logits, logits.a), 1e-5) << "logits";
        ASSERT_EQ(r.last_gradients.size(), expected.size());
        EXPECT_LT(relative_difference(r.last_gradients, expected), 1e-5) << "gradients";
      }
  }
}

// With input, attention and output dropout on, three epochs on every grid equal the run on one rank: the
// same losses, final weights and last step (masks keyed by node ids, not by where the rows are).
TEST(GatModel, EveryGridTrainsLikeOneRankWithDropout) {
  const Communicator world = Communicator::world();
  TrainOptions o = gat_run(fixtures::small_csbm_file(), true);
  o.trainer.epochs = 3;
  fixtures::RunWithWeights alone;
  if (world.rank() == 0)
    alone = fixtures::run_training_with_weights(o, Communicator(MPI_COMM_SELF, false, nullptr));
  // Rank 0's run, shared.
  int64_t sizes[3] = {int64_t(alone.final_weights.size()), int64_t(alone.last_logits.size()),
                      int64_t(alone.history.size())};
  MPI_Bcast(sizes, 3, MPI_INT64_T, 0, MPI_COMM_WORLD);
  alone.final_weights.resize(size_t(sizes[0]));
  alone.last_logits.resize(size_t(sizes[1]));
  std::vector<double> losses(static_cast<size_t>(sizes[2]));
  for (size_t e = 0; e < alone.history.size(); ++e) losses[e] = alone.history[e].loss;
  MPI_Bcast(alone.final_weights.data(), int(sizes[0]), MPI_FLOAT, 0, MPI_COMM_WORLD);
  MPI_Bcast(alone.last_logits.data(), int(sizes[1]), MPI_FLOAT, 0, MPI_COMM_WORLD);
  MPI_Bcast(losses.data(), int(sizes[2]), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    o.grid.shape = shape;
    const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world);
    ASSERT_EQ(r.history.size(), losses.size());
    for (size_t e = 0; e < losses.size(); ++e)
      EXPECT_NEAR(r.history[e].loss, losses[e], 1e-5 * losses[e]) << "epoch " << e + 1;
    EXPECT_LT(relative_difference(r.final_weights, std::vector<double>(alone.final_weights.begin(),
                                                                       alone.final_weights.end())),
              1e-5);
    EXPECT_LT(relative_difference(r.last_logits,
                                  std::vector<double>(alone.last_logits.begin(), alone.last_logits.end())),
              1e-5);
  }
}

namespace {

// Rank 0's run of `o` on the first `ranks` ranks (the others idle), shared with every rank: losses and
// final weights.
std::pair<std::vector<double>, std::vector<float>> run_on_first(const TrainOptions& o, int ranks) {
  const Communicator world = Communicator::world();
  const Communicator part = world.split(world.rank() < ranks ? 0 : 1, world.rank());
  std::vector<double> losses;
  std::vector<float> weights;
  if (world.rank() < ranks) {
    const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, part);
    for (const EpochRecord& e : r.history) losses.push_back(e.loss);
    weights = r.final_weights;
  }
  int64_t sizes[2] = {int64_t(losses.size()), int64_t(weights.size())};
  MPI_Bcast(sizes, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
  losses.resize(static_cast<size_t>(sizes[0]));
  weights.resize(static_cast<size_t>(sizes[1]));
  MPI_Bcast(losses.data(), int(sizes[0]), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Bcast(weights.data(), int(sizes[1]), MPI_FLOAT, 0, MPI_COMM_WORLD);
  return {losses, weights};
}

}  // namespace

// Mini-batch GAT attends over each batch's induced block: a batch of every node is the whole graph, whose
// first step is the reference's.
TEST(GatModel, MinibatchOfEveryNodeIsTheFullGraphStep) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const DenseGraph g = read_dense(fixtures::small_csbm_file());
  TrainOptions o = gat_run(fixtures::small_csbm_file(), false);
  o.mode = TrainMode::Minibatch;
  o.grid.shape = GridShape{};
  o.minibatch.batch_size = g.x.rows;
  o.minibatch.steps_per_epoch = 1;
  o.trainer.epochs = 1;
  const TrainResult r = run_training(o, self);
  const ProcessGrid one(self, GridShape{});
  ModelConfig config = o.model;
  config.in = g.x.cols, config.out = g.classes;
  const std::unique_ptr<Sequential> model = build_model(config, one, RunOptions{}, false);
  const std::vector<double> expected = concatenated(reference_step(g, model->parameters()).second);
  ASSERT_EQ(r.last_gradients.size(), expected.size());
  EXPECT_LT(relative_difference(r.last_gradients, expected), 1e-5);
}

// Every 4D grid trains as its D replicas do alone (D x 1 x 1 x 1): the same samples, every dropout on, the
// same losses and weights within float round-off; tiny batches leave some blocks empty.
// Adam's eps is raised from 1e-8: in a batch of a few nodes a row's scores often share one side of the
// LeakyReLU, where the destination term's gradient is zero up to round-off (about 1e-8), and Adam,
// scale-free, turns such round-off into full learning-rate steps whose sign the summation order decides.
TEST(GatModel, MinibatchOnEveryGridEqualsItsReplicasAlone) {
  const Communicator world = Communicator::world();
  for (const int64_t batch : {int64_t(60), int64_t(5)}) {
    TrainOptions o = gat_run(fixtures::small_csbm_file(), true);
    o.trainer.optimizer.eps = 1e-4f;
    o.mode = TrainMode::Minibatch;
    o.minibatch.batch_size = batch;
    o.minibatch.steps_per_epoch = 2;
    o.trainer.epochs = 2;
    for (int d = 1; d <= world.size(); d *= 2) {
      if (world.size() % d != 0) continue;
      o.grid.shape = GridShape{d, 1, 1, 1};
      const auto [losses, weights] = run_on_first(o, d);
      for (const GridShape& shape : ProcessGrid::factorizations(world.size(), true)) {
        if (shape.d != d) continue;
        SCOPED_TRACE(shape.str() + " batch " + std::to_string(batch));
        o.grid.shape = shape;
        const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world);
        ASSERT_EQ(r.history.size(), losses.size());
        for (size_t e = 0; e < losses.size(); ++e)
          EXPECT_NEAR(r.history[e].loss, losses[e], 1e-5 * std::abs(losses[e])) << "epoch " << e + 1;
        EXPECT_LT(relative_difference(r.final_weights, std::vector<double>(weights.begin(), weights.end())),
                  1e-5);
      }
    }
  }
}

// The bytes the busiest rank moves in a GAT training epoch on every grid are what the performance model
// predicts, to the byte but for the epoch reports' own sums, with the attention kept and recomputed.
TEST(GatModel, EveryGridMovesTheBytesThePerformanceModelPredicts) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false))
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE(shape.str() + (recompute ? " recompute" : " kept"));
      fixtures::expect_predicted_epoch_bytes(gat_run(fixtures::small_csbm_file(), false), shape, recompute,
                                             world);
    }
}
