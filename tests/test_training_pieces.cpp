// SPDX-License-Identifier: BSD-3-Clause
// The training loop's replaceable pieces through the public API, as an application uses them: a loss of its
// own (squared error on the one-hot labels, written here against the Loss interface), the library's
// learning-rate schedules, and gradient clipping. Each is checked against an independent reference in
// double (formulas written out here, the logits and gradients gathered from the run), on one rank and on
// every grid of the world's ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tessera/tessera.hpp>

#include "support/fixtures.hpp"
#include "support/final_weights.hpp"

namespace tessera {
namespace {

constexpr double kPi = 3.14159265358979323846;

// An application's loss: sum over the covered rows of sum_j (z_j - onehot_j)^2 over the real classes.
class SquaredError : public Loss {
 public:
  LossSum sum_and_gradient(const LossInput& in, const Matrix<float>& grad) override {
    const auto z = in.logits;
    const auto labels = in.labels;
    const auto mask = in.mask;
    const int64_t cols = int64_t(z.extent(1)), real = in.real_columns(), first = in.layout.col_begin;
    double partial = 0;
    int64_t rows = 0;
    Kokkos::parallel_reduce(
        "app::squared_error", Kokkos::RangePolicy<ExecSpace>(0, int64_t(z.extent(0))),
        KOKKOS_LAMBDA(int64_t i, double& sum, int64_t& n) {
          const bool covered = mask(i) != 0 && labels(i) >= 0;
          for (int64_t j = 0; j < cols; ++j) {
            const double d =
                covered && j < real ? double(z(i, j)) - (first + j == labels(i) ? 1.0 : 0.0) : 0.0;
            sum += d * d;
            grad(i, j) = float(2.0 * d);
          }
          n += covered ? 1 : 0;
        },
        partial, rows);
    return sum_over_grid(in.layout, partial, rows);
  }
  std::string name() const override { return "squared_error"; }
};

// Every node's label and training mark, read from the file.
struct Truth {
  std::vector<int64_t> labels;
  std::vector<uint8_t> train;
};
Truth truth_of(const std::string& path, const Communicator& world) {
  const GraphFileReader reader(world, path);
  const int64_t n = reader.meta().num_nodes;
  Truth t{reader.read_labels(0, n), std::vector<uint8_t>(size_t(n), 0)};
  for (const SplitInfo& split : reader.splits())
    if (split.name == "train")
      for (int64_t v : reader.read_split("train", 0, split.size)) t.train[size_t(v)] = 1;
  return t;
}

// SquaredError's mean in double from the logits of every node (nodes x classes).
double squared_error_reference(const std::vector<float>& logits, const Truth& t, int64_t classes) {
  double sum = 0;
  int64_t count = 0;
  for (size_t v = 0; v < t.labels.size(); ++v) {
    if (!t.train[v] || t.labels[v] < 0) continue;
    ++count;
    for (int64_t j = 0; j < classes; ++j) {
      const double d = double(logits[v * size_t(classes) + size_t(j)]) - (j == t.labels[v] ? 1.0 : 0.0);
      sum += d * d;
    }
  }
  return sum / double(count);
}

double max_relative(const std::vector<float>& x, const std::vector<float>& y) {
  double diff = 0, top = 1e-30;
  for (size_t k = 0; k < x.size(); ++k) {
    diff = std::max(diff, double(std::abs(x[k] - y[k])));
    top = std::max(top, double(std::abs(y[k])));
  }
  return diff / top;
}

struct PieceRun {
  fixtures::RunWithWeights result;
  // After the run: the global norm of the model's gradients (the last step's, as the update left them),
  // then after clip_gradient_norm to a quarter of it.
  double norm_before = 0, norm_after = 0;
};

// A 2-layer GCN on the small CSBM graph on `grid`, trained through the public API with the application's
// loss, a cosine schedule after a warm-up, and (clip > 0) clipping.
// `path` on `grid` for a 2-layer GCN, its permutations keyed by `seed`.
Graph3D gcn_graph(const std::string& path, const ProcessGrid& grid, const Communicator& comm, uint64_t seed) {
  Graph3DOptions load;
  load.layers = 2;
  load.seed = seed;
  load.normalize_features = true;
  return load_graph_3d(GraphFileReader(comm, path), grid, load);
}

PieceRun train_pieces(const Communicator& comm, const GridShape& shape, int64_t epochs, double clip,
                      const std::string& path = fixtures::small_csbm_file()) {
  const ProcessGrid grid(comm, shape);
  const Graph3D graph = gcn_graph(path, grid, comm, 5);
  Sequential model(grid, graph.num_features, RunOptions{}, 5);
  ConvOptions hidden;
  hidden.relu = true;
  model.add<GcnConv>(12, hidden);
  model.add<GcnConv>(graph.num_classes);
  FullGraphSource source(graph, grid, comm, model);
  TrainerOptions options;
  options.optimizer.lr = 0.02f;
  options.epochs = epochs;
  options.seed = 5;
  options.keep_last_step = true;
  options.clip_grad_norm = clip;
  Trainer trainer(model, source, comm, options);
  trainer.set_loss(std::make_unique<SquaredError>());
  trainer.set_schedule(std::make_unique<WarmupSchedule>(2.0, std::make_unique<CosineSchedule>(0.1)));
  PieceRun run;
  run.result = fixtures::run_with_weights(trainer);
  run.norm_before = global_gradient_norm(model.parameters(), comm);
  clip_gradient_norm(model.parameters(), comm, run.norm_before / 4);
  run.norm_after = global_gradient_norm(model.parameters(), comm);
  return run;
}

// The gradients' global norm in double from the gathered global matrices.
double reference_norm(const std::vector<float>& gradients) {
  double s = 0;
  for (float g : gradients) s += double(g) * double(g);
  return std::sqrt(s);
}

}  // namespace

TEST(Schedule, FactorsFollowTheirFormulas) {
  const StepSchedule step(3, 0.5);
  EXPECT_EQ(step.factor({0.0, 0.25, 10}), 1.0);
  EXPECT_EQ(step.factor({2.75, 0.25, 10}), 1.0);
  EXPECT_EQ(step.factor({3.0, 0.25, 10}), 0.5);
  EXPECT_EQ(step.factor({9.5, 0.25, 10}), 0.125);
  const CosineSchedule cosine(0.2);
  for (double t : {0.0, 1.0, 3.3, 7.0, 9.9})
    EXPECT_NEAR(cosine.factor({t, 0.1, 10}), 0.2 + 0.8 * 0.5 * (1 + std::cos(kPi * t / 10)), 1e-15) << t;
  // Four steps per epoch, two epochs of warm-up: steps 0..7 get 1/8 .. 8/8 of the decay's start; the decay's
  // clock starts at epoch 2 and spans the 8 remaining epochs.
  const WarmupSchedule warm(2, std::make_unique<CosineSchedule>(0.0));
  for (int k = 0; k < 8; ++k) EXPECT_NEAR(warm.factor({k * 0.25, 0.25, 10}), (k + 1) / 8.0, 1e-15) << k;
  EXPECT_NEAR(warm.factor({6.0, 0.25, 10}), 0.5 * (1 + std::cos(kPi * 4 / 8)), 1e-15);
  EXPECT_EQ(ConstantSchedule().factor({5, 1, 10}), 1.0);
  ScheduleSettings s;
  s.kind = ScheduleKind::Cosine;
  s.min_lr = 0.001;
  s.warmup_epochs = 1;
  // lr_min is reached at the end of the run; the last step (epoch 10) is 8/9 of the cosine's way there.
  EXPECT_NEAR(make_schedule(s, 0.01)->factor({10, 1, 10}), 0.1, 1e-12);
  EXPECT_NEAR(make_schedule(s, 0.01)->factor({9, 1, 10}), 0.1 + 0.9 * 0.5 * (1 + std::cos(kPi * 8 / 9)),
              1e-12);
  EXPECT_EQ(make_schedule(s, 0.01)->describe(), "linear warm-up over 1 epochs, then cosine to 0.1x");
}

TEST(Schedule, BadSettingsNameTheOption) {
  ScheduleSettings s;
  s.min_lr = 0.5;
  EXPECT_THROW(s.validate(0.01, 10), Error);
  s = ScheduleSettings();
  s.warmup_epochs = 10;
  EXPECT_THROW(s.validate(0.01, 10), Error);
  s = ScheduleSettings();
  s.gamma = 0;
  EXPECT_THROW(s.validate(0.01, 10), Error);
  s = ScheduleSettings();
  s.step_every = -1;
  EXPECT_THROW(s.validate(0.01, 10), Error);
  EXPECT_THROW(StepSchedule(0, 0.5), Error);
  EXPECT_THROW(CosineSchedule(1.5), Error);
  EXPECT_THROW(WarmupSchedule(1, nullptr), Error);
}

// A run with a schedule or clipping is identified by them (a checkpoint resumes only the same run); runs
// without them keep the identity they had, so their checkpoints still resume.
TEST(Schedule, RunIdentityNamesScheduleAndClipping) {
  TrainOptions o;
  const nlohmann::json plain = run_identity(o, 1);
  EXPECT_FALSE(plain.contains("lr_schedule"));
  EXPECT_FALSE(plain.contains("clip_grad_norm"));
  EXPECT_FALSE(plain.contains("epochs"));
  o.schedule.kind = ScheduleKind::Cosine;
  o.trainer.clip_grad_norm = 1.0;
  const nlohmann::json cosine = run_identity(o, 1);
  EXPECT_EQ(cosine["lr_schedule"], "cosine");
  EXPECT_EQ(cosine["epochs"], o.trainer.epochs);  // the cosine's length
  EXPECT_EQ(cosine["clip_grad_norm"], 1.0);
}

// The application's loss and the schedule through the Trainer: the learning rate of every epoch is the
// formula's, the reported loss of the last step is the reference's mean squared error of that step's
// logits, the loss falls, and every grid of the world's ranks trains the one-rank run.
TEST(TrainingPieces, UserLossAndCosineScheduleOnEveryGrid) {
  const Communicator world = Communicator::world();
  const Communicator self = world.split(world.rank(), 0);
  const int64_t epochs = 12;
  const PieceRun reference = train_pieces(self, GridShape{}, epochs, 0.0);
  const Truth truth = truth_of(fixtures::small_csbm_file(), world);
  const auto& h = reference.result.history;
  ASSERT_EQ(int64_t(h.size()), epochs);
  for (int64_t e = 0; e < epochs; ++e) {
    const double factor = e < 2 ? (e + 1) / 2.0 : 0.1 + 0.9 * 0.5 * (1 + std::cos(kPi * (e - 2) / 10.0));
    EXPECT_NEAR(h[size_t(e)].lr, double(0.02f) * factor, 1e-8) << "epoch " << e + 1;
  }
  EXPECT_NEAR(h.back().loss, squared_error_reference(reference.result.last_logits, truth, 5),
              1e-5 * h.back().loss);
  EXPECT_LT(h.back().loss, 0.7 * h.front().loss);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const PieceRun run = train_pieces(world, shape, epochs, 0.0);
    const fixtures::RunWithWeights& r = run.result;
    ASSERT_EQ(r.history.size(), h.size());
    for (size_t e = 0; e < h.size(); ++e) {
      EXPECT_NEAR(r.history[e].loss, h[e].loss, 1e-5 * h[e].loss) << "epoch " << e + 1;
      EXPECT_EQ(r.history[e].lr, h[e].lr);
    }
    EXPECT_NEAR(r.history.back().loss, squared_error_reference(r.last_logits, truth, 5),
                1e-5 * r.history.back().loss);
    EXPECT_LT(max_relative(r.final_weights, reference.result.final_weights), 1e-4);
    EXPECT_LT(max_relative(r.last_gradients, reference.result.last_gradients), 1e-4);
  }
}

// Clipping: the global norm is the gathered gradients' norm on every grid (each entry once: padding and
// replicas left out), clipping scales it to the bound, and a bound the gradients never reach changes
// nothing; a bound they reach changes the run, the same way on every grid.
TEST(TrainingPieces, ClippingUsesTheGlobalNormOnEveryGrid) {
  const Communicator world = Communicator::world();
  const Communicator self = world.split(world.rank(), 0);
  const PieceRun free = train_pieces(self, GridShape{}, 4, 0.0);
  const PieceRun loose = train_pieces(self, GridShape{}, 4, 1e6);
  EXPECT_EQ(loose.result.final_weights, free.result.final_weights);
  const PieceRun tight = train_pieces(self, GridShape{}, 4, 0.05);
  EXPECT_GT(tight.result.history.front().grad_norm, 0.05);
  EXPECT_GT(max_relative(tight.result.final_weights, free.result.final_weights), 1e-3);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const PieceRun run = train_pieces(world, shape, 4, 0.05);
    // The run's last gradients were gathered before the update clipped them to 0.05.
    const double norm = reference_norm(run.result.last_gradients);
    ASSERT_GT(norm, 0.05);
    EXPECT_NEAR(run.result.history.back().grad_norm, norm, 1e-6 * norm);
    EXPECT_NEAR(run.norm_before, 0.05, 1e-6);
    EXPECT_NEAR(run.norm_after, run.norm_before / 4, 1e-6);
    EXPECT_LT(max_relative(run.result.final_weights, tight.result.final_weights), 1e-4);
  }
}

// Empty blocks: one node per rank (4 on 4: blocks of one row or none, as the grid splits them), two
// classes on up to four ranks of the classes' axis (some hold padding only), and ranks with no training row.
// Each still enters every collective of the application's loss (sum_over_grid) and of clipping, so every
// grid trains the one-rank run (a rank that skipped one would hang the others).
TEST(TrainingPieces, EmptyBlocksEnterEveryCollective) {
  const Communicator world = Communicator::world();
  const Communicator self = world.split(world.rank(), 0);
  const std::string path = fixtures::four_node_file("four-nodes.h5");
  const PieceRun reference = train_pieces(self, GridShape{}, 5, 0.05, path);
  const auto& h = reference.result.history;
  ASSERT_GT(h.front().grad_norm, 0.05);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const fixtures::RunWithWeights r = train_pieces(world, shape, 5, 0.05, path).result;
    ASSERT_EQ(r.history.size(), h.size());
    for (size_t e = 0; e < h.size(); ++e) {
      EXPECT_NEAR(r.history[e].loss, h[e].loss, 1e-5 * h[e].loss) << "epoch " << e + 1;
      EXPECT_NEAR(r.history[e].grad_norm, h[e].grad_norm, 1e-5 * h[e].grad_norm) << "epoch " << e + 1;
    }
    EXPECT_LT(max_relative(r.final_weights, reference.result.final_weights), 1e-4);
  }
}

namespace {
// The message of the Error `fn` throws ("" when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// A source built from the model asks it what it needs and refuses a graph it cannot run on: SAGE layers on
// a symmetric-normalized graph, GCN layers on a mean-weighted one, another depth; one model cannot mix GCN
// and SAGE layers (one graph carries one weighting). A model that fits trains.
TEST(GraphForModel, SourcesRefuseAGraphTheModelCannotUse) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, ProcessGrid::factorizations(world.size(), false).front());
  const auto load = [&](Normalization normalization, int layers) {
    Graph3DOptions o;
    o.layers = layers;
    o.normalization = normalization;
    return load_graph_3d(GraphFileReader(world, fixtures::small_csbm_file()), grid, o);
  };
  const Graph3D symmetric = load(Normalization::Symmetric, 2), mean = load(Normalization::Mean, 2);
  Sequential sage(grid, symmetric.num_features);
  sage.add<SageConv>(8);
  sage.add<SageConv>(symmetric.num_classes);
  EXPECT_EQ(sage.aggregation(), Normalization::Mean);
  EXPECT_EQ(error_of([&] { FullGraphSource(symmetric, grid, world, sage); }),
            "the model's layers aggregate with mean weights but the graph was built with symmetric ones "
            "(Graph3DOptions::normalization: Mean for SageConv)");
  Sequential gcn(grid, mean.num_features);
  gcn.add<GcnConv>(8);
  gcn.add<GcnConv>(mean.num_classes);
  EXPECT_NE(error_of([&] {
              MinibatchSource(mean, grid, world, MinibatchOptions{}, gcn);
            }).find("aggregate with symmetric weights but the graph was built with mean ones"),
            std::string::npos);
  Sequential deep(grid, mean.num_features);
  for (int l = 0; l < 3; ++l) deep.add<SageConv>(l < 2 ? 8 : mean.num_classes);
  EXPECT_EQ(error_of([&] { FullGraphSource(mean, grid, world, deep); }),
            "the model has 3 graph layers but the graph serves at most 2 (Graph3DOptions::layers; 0 serves "
            "any depth)");
  Sequential mixed(grid, mean.num_features);
  mixed.add<GcnConv>(8);
  EXPECT_EQ(
      error_of([&] { mixed.add<SageConv>(mean.num_classes); }),
      "model: sage (graph layer 1) aggregates with mean weights but gcn (graph layer 0) with symmetric: "
      "one graph carries one weighting of its adjacency, so a model's layers must agree");
  FullGraphSource fits(mean, grid, world, sage);
  TrainerOptions options;
  options.epochs = 2;
  Trainer trainer(sage, fits, world, options);
  EXPECT_EQ(trainer.run().history.size(), 2u);
}

namespace {
// A run's record for comparing two runs: every epoch's loss and accuracies, and the final weights.
struct DepthRun {
  std::vector<double> numbers;
  std::vector<float> weights;
  bool operator==(const DepthRun& o) const { return numbers == o.numbers && weights == o.weights; }
};

DepthRun train_depth(const Graph3D& graph, const ProcessGrid& grid, int depth, bool minibatch) {
  const Communicator& world = Communicator::world();
  Sequential model(grid, graph.num_features, RunOptions{}, 3);
  ConvOptions hidden;
  hidden.relu = true;
  for (int l = 0; l + 1 < depth; ++l) model.add<GcnConv>(6, hidden);
  model.add<GcnConv>(graph.num_classes);
  std::unique_ptr<BatchSource> source;
  if (minibatch) {
    MinibatchOptions batches;
    batches.batch_size = 40;
    source = std::make_unique<MinibatchSource>(graph, grid, world, batches, model);
  } else {
    source = std::make_unique<FullGraphSource>(graph, grid, world, model);
  }
  TrainerOptions options;
  options.epochs = 2;
  Trainer trainer(model, *source, world, options);
  const fixtures::RunWithWeights r = fixtures::run_with_weights(trainer);
  DepthRun run{{}, r.final_weights};
  for (const EpochRecord& e : r.history)
    run.numbers.insert(run.numbers.end(), {e.loss, e.train_acc, e.valid_acc, e.test_acc, e.valid_loss});
  return run;
}
}  // namespace

// One graph built without a depth (Graph3DOptions::layers = 0) serves models of every depth: each trains,
// in full-graph and mini-batch mode, the run of a graph built for exactly its depth, bit for bit. Depth 7
// wraps around the six layouts (its logits rows are in layout 0's order); a graph built for 2 serves 1.
TEST(GraphForModel, OneGraphServesEveryDepth) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const ProcessGrid grid(world, shape);
    const auto load = [&](int layers) {
      Graph3DOptions o;
      o.layers = layers;
      o.seed = 4;
      return load_graph_3d(GraphFileReader(world, fixtures::small_csbm_file()), grid, o);
    };
    const Graph3D any = load(0);
    EXPECT_EQ(any.adjacency.size(), 6u);
    for (int depth : {1, 2, 3, 7}) {
      const Graph3D exact = load(depth == 1 ? 2 : depth);
      // A graph for at most k graph layers holds only the k layouts such models use.
      EXPECT_EQ(exact.adjacency.size(), size_t(std::min(depth == 1 ? 2 : depth, 6)));
      for (bool minibatch : {false, true}) {
        SCOPED_TRACE("depth " + std::to_string(depth) + (minibatch ? " mini-batch" : " full graph"));
        EXPECT_TRUE(train_depth(any, grid, depth, minibatch) == train_depth(exact, grid, depth, minibatch));
      }
    }
  }
}

// Labels and masks are node data looked up by name, in the order of a model's logits rows: a split of the
// application's own ("holdout") arrives as a mask of that name holding exactly its nodes, for every depth;
// an unknown name is refused with the names there are.
TEST(GraphForModel, MasksAreNamedNodeData) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, ProcessGrid::factorizations(world.size(), false).back());
  const GraphFileReader reader(world, fixtures::small_csbm_file());
  GraphRows rows = read_graph_rows(reader, world);
  rows.split_names.push_back("holdout");
  for (int64_t i = 0; i < rows.rows(); ++i)
    if ((rows.first_row + i) % 5 == 0) rows.splits[size_t(i)] |= 8;
  const Graph3D g = build_graph_3d(rows, grid, Graph3DOptions{});
  const std::vector<int64_t> labels = reader.read_labels(0, g.layout.num_nodes());
  for (int depth = 1; depth <= 6; ++depth) {
    SCOPED_TRACE("depth " + std::to_string(depth));
    const NodeData& data = g.node_data_for(depth);
    const auto ids = Kokkos::create_mirror_view_and_copy(HostSpace(), g.output_ids[size_t(depth - 1)]);
    const auto y = Kokkos::create_mirror_view_and_copy(HostSpace(), data.labels);
    const auto holdout = Kokkos::create_mirror_view_and_copy(HostSpace(), data.mask("holdout"));
    int64_t held = 0;
    for (size_t i = 0; i < ids.extent(0); ++i) {
      const int64_t v = ids(i);
      EXPECT_EQ(y(i), v >= 0 ? labels[size_t(v)] : -1) << "row " << i;
      EXPECT_EQ(holdout(i), v >= 0 && v % 5 == 0 ? 1 : 0) << "row " << i;
      held += holdout(i);
    }
    EXPECT_GT(all_reduce_value(world, held, ReduceOp::Sum, "test"), 0);
  }
  EXPECT_EQ(error_of([&] { g.node_data_for(1).mask("extra"); }),
            "no node mask named 'extra' (the graph has train, valid, test, holdout)");
  Graph3DOptions two;
  two.layers = 2;
  const Graph3D shallow = build_graph_3d(rows, grid, two);
  EXPECT_EQ(error_of([&] { shallow.node_data_for(3); }),
            "the graph serves models of at most 2 graph layers, not 3 (Graph3DOptions::layers; 0 serves any "
            "depth)");
}

namespace {
// An application's step from the library's pieces: the update after every second epoch only. With no
// dropout the weights, and so the gradients, of the two epochs are the same: 2k epochs train the k-epoch run.
class UpdateEveryOtherEpoch : public TrainStep {
 public:
  double run(Trainer& trainer, const Batch& batch, const StepInfo& at, EpochRecord& record) override {
    const StepForward forward = trainer.forward_and_loss(batch, at, record);
    trainer.backward(forward, at, record);
    if (at.epoch % 2 == 1) trainer.update(StepInfo{at.epoch / 2, at.step, at.pass}, record);
    return forward.loss;
  }
};

// The pieces in the default order, as DefaultStep runs them.
class PiecesInOrder : public TrainStep {
 public:
  double run(Trainer& trainer, const Batch& batch, const StepInfo& at, EpochRecord& record) override {
    const StepForward forward = trainer.forward_and_loss(batch, at, record);
    trainer.backward(forward, at, record);
    trainer.update(at, record);
    return forward.loss;
  }
};

std::vector<float> weights_after(const Communicator& comm, const GridShape& shape, int64_t epochs,
                                 std::unique_ptr<TrainStep> step) {
  const ProcessGrid grid(comm, shape);
  const Graph3D graph = gcn_graph(fixtures::small_csbm_file(), grid, comm, 7);
  Sequential model(grid, graph.num_features, RunOptions{}, 7);
  ConvOptions hidden;
  hidden.relu = true;
  model.add<GcnConv>(10, hidden);
  model.add<GcnConv>(graph.num_classes);
  FullGraphSource source(graph, grid, comm, model);
  TrainerOptions options;
  options.epochs = epochs;
  options.eval_every = 0;
  Trainer trainer(model, source, comm, options);
  if (step) trainer.set_step(std::move(step));
  return fixtures::run_with_weights(trainer).final_weights;
}
}  // namespace

// A step of the application's own composes the trainer's public pieces: in the default order it is the
// default step, bit for bit; updating every other epoch trains the half-length run, on every grid.
TEST(TrainingPieces, ReplacedStepComposesThePieces) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const std::vector<float> three = weights_after(world, shape, 3, nullptr);
    EXPECT_EQ(weights_after(world, shape, 3, std::make_unique<PiecesInOrder>()), three);
    EXPECT_EQ(weights_after(world, shape, 6, std::make_unique<UpdateEveryOtherEpoch>()), three);
    EXPECT_NE(weights_after(world, shape, 6, nullptr), three);
  }
}

}  // namespace tessera
