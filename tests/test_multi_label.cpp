// SPDX-License-Identifier: BSD-3-Clause
// Multi-label graphs through the public API: the graph file's label matrix and edge features (version 2)
// written, read and validated; the multi-label loss and its metrics against formulas in double; full-graph
// training on every grid of the world's ranks against a reference computed from the run's logits, and the
// one-rank run where blocks are empty.
#include <gtest/gtest.h>

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tessera/tessera.hpp>

#include "support/fixtures.hpp"

namespace tessera {
namespace {

constexpr int64_t kTasks = 5;

SynthOptions multi_label_options() {
  SynthOptions o;
  o.num_nodes = 603;
  o.num_edges = 2700;
  o.num_features = 7;
  o.num_classes = 3;
  o.tasks = kTasks;
  o.unobserved_fraction = 0.1;
  o.seed = 12;
  o.feature_signal = 0.6;
  o.train_fraction = 0.4;
  o.valid_fraction = 0.3;
  return o;
}

// 603 nodes in 3 blocks, 5 tasks leaning on the blocks, a tenth of the labels unobserved.
const std::string& multi_label_file() {
  static std::string path;
  if (path.empty()) path = fixtures::synthetic_file("multi_label.h5", multi_label_options());
  return path;
}

// Every node's label row and split, read from the file.
struct Truth {
  std::vector<int8_t> labels;  // nodes x tasks
  std::vector<std::string> split;
};
Truth truth_of(const std::string& path) {
  const GraphFileReader reader(Communicator::world(), path);
  const int64_t n = reader.meta().num_nodes;
  Truth t{reader.read_label_matrix(0, n), std::vector<std::string>(size_t(n))};
  for (const SplitInfo& s : reader.splits())
    for (int64_t v : reader.read_split(s.name, 0, s.size)) t.split[size_t(v)] = s.name;
  return t;
}

// The area under the ROC curve by its definition, over (positive, negative) pairs, ties counting half.
double pairwise_auc(const std::vector<double>& score, const std::vector<int>& positive) {
  double above = 0, pairs = 0;
  for (size_t p = 0; p < score.size(); ++p)
    for (size_t n = 0; n < score.size(); ++n)
      if (positive[p] && !positive[n])
        above += score[p] > score[n] ? 1.0 : score[p] == score[n] ? 0.5 : 0.0, ++pairs;
  return pairs > 0 ? above / pairs : 0.0;
}

// Average precision by its definition: at each distinct score, highest first, precision times the recall
// gained there.
double direct_average_precision(const std::vector<double>& score, const std::vector<int>& positive) {
  std::vector<double> thresholds(score);
  std::sort(thresholds.rbegin(), thresholds.rend());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  const double positives = double(std::count(positive.begin(), positive.end(), 1));
  double area = 0, recall_before = 0;
  for (double t : thresholds) {
    double hits = 0, taken = 0;
    for (size_t i = 0; i < score.size(); ++i)
      if (score[i] >= t) ++taken, hits += positive[i];
    area += (hits / positives - recall_before) * (hits / taken);
    recall_before = hits / positives;
  }
  return area;
}

// What the reference says of logits (nodes x tasks, node order) on one split.
struct Reference {
  double loss = 0, auc = 0, ap = 0, f1_micro = 0, f1_macro = 0;
};
Reference reference_on(const std::vector<float>& logits, const Truth& t, const std::string& split,
                       const std::vector<double>& weight) {
  Reference r;
  double entries = 0, tp_all = 0, fp_all = 0, fn_all = 0, tasks_scored = 0;
  for (int64_t task = 0; task < kTasks; ++task) {
    std::vector<double> score;
    std::vector<int> positive;
    double tp = 0, fp = 0, fn = 0;
    for (size_t v = 0; v < t.split.size(); ++v) {
      const int y = t.labels[v * kTasks + size_t(task)];
      if (t.split[v] != split || y < 0) continue;
      const double z = logits[v * kTasks + size_t(task)], s = 1 / (1 + std::exp(-z));
      r.loss += y == 1 ? -weight[size_t(task)] * std::log(s) : -std::log(1 - s);
      entries += 1;
      score.push_back(z), positive.push_back(y);
      tp += z > 0 && y == 1, fp += z > 0 && y == 0, fn += z <= 0 && y == 1;
    }
    const auto positives = std::count(positive.begin(), positive.end(), 1);
    if (positives > 0 && positives < int64_t(positive.size())) {
      r.auc += pairwise_auc(score, positive), r.ap += direct_average_precision(score, positive);
      tasks_scored += 1;
    }
    r.f1_macro += tp + fp + fn > 0 ? 2 * tp / (2 * tp + fp + fn) : 0.0;
    tp_all += tp, fp_all += fp, fn_all += fn;
  }
  r.loss /= entries;
  r.auc /= tasks_scored, r.ap /= tasks_scored;
  r.f1_macro /= double(kTasks);
  r.f1_micro = 2 * tp_all / (2 * tp_all + fp_all + fn_all);
  return r;
}

std::unique_ptr<Sequential> task_gcn(const ProcessGrid& grid, int64_t features) {
  auto model = std::make_unique<Sequential>(grid, features, RunOptions{}, 5);
  ConvOptions hidden;
  hidden.relu = true;
  model->add<GcnConv>(8, hidden);
  model->add<GcnConv>(kTasks);
  return model;
}

// Epochs at learning rate `lr` with the multi-label loss scored by `metric`.
TrainResult run_epochs(Model& model, BatchSource& source, const Communicator& world, MetricKind metric,
                       std::vector<float> weight = {}, int64_t epochs = 1, float lr = 0) {
  TrainerOptions options;
  options.epochs = epochs;
  options.optimizer.lr = lr;
  options.keep_last_step = true;
  Trainer trainer(model, source, world, options);
  trainer.set_loss(std::make_unique<MultiLabelBinaryCrossEntropy>(std::move(weight), metric));
  return trainer.run();
}

}  // namespace

// The synthetic generator's matrix is what the file holds; the row-level labels say which rows have an
// observed task; validation counts what it read; a single-label file stays version 1.
TEST(GraphFileVersion2, LabelMatrixRoundTrip) {
  const Communicator world = Communicator::world();
  const SynthOptions o = multi_label_options();
  const GraphFileReader reader(world, multi_label_file());
  ASSERT_TRUE(reader.meta().multi_label);
  EXPECT_EQ(reader.meta().num_classes, kTasks);
  EXPECT_EQ(reader.meta().version(), 2);
  const int64_t n = o.num_nodes;
  const std::vector<int8_t> matrix = reader.read_label_matrix(0, n);
  const std::vector<int64_t> rows = reader.read_labels(0, n);
  int64_t observed = 0, positive = 0, labeled = 0;
  for (int64_t v = 0; v < n; ++v) {
    bool any = false;
    for (int64_t t = 0; t < kTasks; ++t) {
      const int8_t y = matrix[size_t(v * kTasks + t)];
      ASSERT_EQ(y, synthetic_task_label(o, csbm_class(o, v), v, t)) << "node " << v << " task " << t;
      observed += y >= 0, positive += y == 1, any = any || y >= 0;
    }
    EXPECT_EQ(rows[size_t(v)], any ? 0 : -1) << "node " << v;
    labeled += any;
  }
  EXPECT_GT(observed, 0.8 * double(n * kTasks));
  EXPECT_LT(observed, double(n * kTasks));
  const GraphSummary s = validate_graph(reader, world);
  EXPECT_EQ(s.observed_labels, observed);
  EXPECT_EQ(s.positive_labels, positive);
  EXPECT_EQ(s.labeled_nodes, labeled);
  EXPECT_EQ(GraphFileReader(world, fixtures::small_csbm_file()).meta().version(), 1);
  EXPECT_FALSE(GraphFileReader(world, fixtures::small_csbm_file()).meta().multi_label);
}

// Edge features are written in the adjacency's order and read back; a value that is not finite, a label
// entry outside {1, 0, -1} and version 2's attributes in a version 1 file are refused with one line.
TEST(GraphFileVersion2, EdgeFeaturesAndBadValues) {
  const Communicator world = Communicator::world();
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const std::string dir = fixtures::scratch_dir();
  const auto write = [&](const std::string& name, float edge_value, int8_t label) {
    const std::string path = dir + "/" + name;
    world.run_on(0, [&] {
      GraphMeta m;
      m.num_nodes = 3, m.num_edges = 4, m.num_features = 2, m.num_classes = 2;
      m.multi_label = true, m.num_edge_features = 3;
      GraphFileWriter w(self, path, m, {{"train", 2}});
      const int64_t indptr[] = {0, 1, 3, 4}, indices[] = {1, 0, 2, 1}, train[] = {0, 2};
      const float features[] = {1, 2, 3, 4, 5, 6};
      float edges[12];
      for (int k = 0; k < 12; ++k) edges[k] = float(k);
      edges[7] = edge_value;
      const int8_t labels[] = {1, 0, -1, -1, 0, label};
      w.write_indptr(0, 4, indptr), w.write_indices(0, 4, indices), w.write_features(0, 3, features);
      w.write_label_matrix(0, 3, labels), w.write_edge_features(0, 4, edges),
          w.write_split("train", 0, 2, train);
      w.commit();
    });
    return path;
  };
  const std::string good = write("edges.h5", 7.0f, 1);
  const GraphFileReader reader(world, good);
  EXPECT_EQ(reader.meta().num_edge_features, 3);
  const std::vector<float> edges = reader.read_edge_features(1, 2);
  EXPECT_EQ(edges, (std::vector<float>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(reader.read_labels(0, 3), (std::vector<int64_t>{0, -1, 0}));
  EXPECT_NO_THROW(validate_graph(reader, world));
  const auto refused = [&](const std::string& path, const std::string& words) {
    try {
      validate_graph(GraphFileReader(world, path), world);
      ADD_FAILURE() << path << ": no error";
    } catch (const CollectiveError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(write("nan-edge.h5", NAN, 1), "dataset /edge/features: edge 2, column 1 is nan");
  refused(write("bad-label.h5", 7.0f, 2), "dataset /node/labels: row 2, task 1 is 2 (1, 0, or -1");
  // A version 1 file that names a task: the attribute belongs to version 2.
  const std::string old = write("old.h5", 7.0f, 1);
  world.run_on(0, [&] {
    const hid_t file = H5Fopen(old.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Aopen(file, "version", H5P_DEFAULT);
    const int64_t one = 1;
    H5Awrite(attr, H5T_NATIVE_INT64, &one);
    H5Aclose(attr), H5Sclose(space), H5Fclose(file);
  });
  try {
    GraphFileReader r(world, old);
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("root attribute 'task' in a version 1 file"), std::string::npos)
        << e.what();
  }
}

// The loss of one block against the formula: unobserved entries and uncovered rows add nothing, positive
// weights scale the positive entries, padding columns get no gradient, large logits do not overflow.
TEST(MultiLabelBinaryCrossEntropy, SumAndGradientFollowTheFormula) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const std::vector<float> z = {0.3f, -2.0f, 100.0f, -100.0f, 1.5f, 0.0f};
  const std::vector<int8_t> y = {1, 0, 0, 1, -1, 1};
  const std::vector<uint8_t> covered = {1, 1, 1, 0, 1, 1};  // rows of 2 tasks
  const std::vector<float> weight = {2.0f, 0.5f};
  HostMatrix<float> host_z("z", 3, 3);  // a padding column beside the two tasks
  HostMatrix<int8_t> host_y("y", 3, 2);
  HostVector<int64_t> rows("rows", 3);
  HostVector<uint8_t> host_mask("mask", 3);
  for (size_t i = 0; i < 3; ++i) {
    host_z(i, 0) = z[2 * i], host_z(i, 1) = z[2 * i + 1], host_z(i, 2) = 9;
    host_y(i, 0) = y[2 * i], host_y(i, 1) = y[2 * i + 1];
    host_mask(i) = covered[2 * i];
  }
  const auto logits = Kokkos::create_mirror_view_and_copy(DeviceSpace(), host_z);
  const auto targets = Kokkos::create_mirror_view_and_copy(DeviceSpace(), host_y);
  const auto labels = Kokkos::create_mirror_view_and_copy(DeviceSpace(), rows);
  const auto mask = Kokkos::create_mirror_view_and_copy(DeviceSpace(), host_mask);
  const Matrix<float> grad("grad", 3, 3);
  MultiLabelBinaryCrossEntropy loss(weight);
  const LogitsLayout layout{&self, &self, 0, 2};
  const LossSum s = loss.sum_and_gradient(LossInput{layout, logits, labels, mask, targets}, grad);
  double want = 0;
  int64_t count = 0;
  const auto g = Kokkos::create_mirror_view_and_copy(HostSpace(), grad);
  for (size_t k = 0; k < 6; ++k) {
    const size_t i = k / 2, j = k % 2;
    const double x = z[k], sig = 1 / (1 + std::exp(-x));
    const bool counted = covered[2 * i] && y[k] >= 0;
    double expect = 0;
    if (counted) {
      ++count;
      // log(1 + e^-x) and log(1 + e^x), written so that |x| = 100 stays finite.
      const double above = std::max(-x, 0.0) + std::log1p(std::exp(-std::abs(x)));
      const double below = std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x)));
      want += y[k] == 1 ? weight[j] * above : below;
      expect = y[k] == 1 ? weight[j] * (sig - 1) : sig;
    }
    EXPECT_NEAR(g(i, j), expect, 1e-7) << "entry " << k;
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(g(i, 2), 0.0f);
  EXPECT_EQ(s.count, count);
  EXPECT_NEAR(s.sum, want, 1e-9 * want);
  EXPECT_EQ(loss.metric()->name(), "roc_auc");
  EXPECT_EQ(MultiLabelBinaryCrossEntropy({}, MetricKind::F1Micro).metric()->name(), "f1_micro");
  EXPECT_THROW(MultiLabelBinaryCrossEntropy({}, MetricKind::Accuracy), Error);
  EXPECT_THROW(MultiLabelBinaryCrossEntropy({-1.0f}), Error);
  EXPECT_THROW(make_metric(MetricKind::RocAuc, false), Error);
  // Weights for another number of tasks, or targets of another width, are refused.
  MultiLabelBinaryCrossEntropy three({1, 1, 1});
  EXPECT_THROW(three.sum_and_gradient(LossInput{layout, logits, labels, mask, targets}, grad), Error);
  EXPECT_THROW(
      loss.sum_and_gradient(LossInput{LogitsLayout{&self, &self, 0, 3}, logits, labels, mask, targets}, grad),
      Error);
}

// Average precision against its definition on scores with many ties.
TEST(AveragePrecision, EqualsTheDefinition) {
  std::mt19937_64 gen(5);
  for (int trial = 0; trial < 30; ++trial) {
    const size_t n = 2 + gen() % 50;
    std::vector<float> scores(n);
    std::vector<uint8_t> positive(n);
    std::vector<double> s(n);
    std::vector<int> p(n);
    for (size_t i = 0; i < n; ++i) {
      scores[i] = float(int(gen() % 6) - 3) * 0.5f;
      positive[i] = gen() % 3 == 0;
      s[i] = scores[i], p[i] = positive[i];
    }
    const auto positives = std::count(p.begin(), p.end(), 1);
    const double want = positives > 0 && positives < int64_t(n) ? direct_average_precision(s, p) : 0.0;
    EXPECT_NEAR(average_precision(scores, positive), want, 1e-12) << "trial " << trial;
  }
  EXPECT_EQ(average_precision({0.9f, 0.1f}, {1, 0}), 1.0);
  EXPECT_EQ(average_precision({0.9f, 0.1f}, {0, 1}), 0.5);
}

// Full graph on every grid of the world's ranks: the epoch's loss is the reference's mean over the observed
// training entries of the logits the step saw (with positive weights), and each metric is the reference's on
// the same logits (learning rate 0: evaluation sees the step's weights).
TEST(MultiLabel, FullGraphOnEveryGridEqualsTheReference) {
  const Communicator world = Communicator::world();
  const Truth truth = truth_of(multi_label_file());
  const std::vector<float> weight = {1.0f, 2.0f, 0.5f, 3.0f, 1.0f};
  const std::vector<double> weight_d(weight.begin(), weight.end()), ones(kTasks, 1.0);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const ProcessGrid grid(world, shape);
    const Graph3D graph = load_graph_3d(GraphFileReader(world, multi_label_file()), grid, Graph3DOptions{});
    ASSERT_TRUE(graph.multi_label);
    for (const MetricKind metric :
         {MetricKind::RocAuc, MetricKind::AveragePrecision, MetricKind::F1Micro, MetricKind::F1Macro}) {
      SCOPED_TRACE(name_of(kMetricKindNames, metric));
      const std::unique_ptr<Sequential> model = task_gcn(grid, graph.num_features);
      FullGraphSource source(graph, grid, world, *model);
      const bool weighted = metric == MetricKind::RocAuc;
      const TrainResult r =
          run_epochs(*model, source, world, metric, weighted ? weight : std::vector<float>{});
      ASSERT_EQ(r.last_logits.size(), truth.split.size() * kTasks);
      const EpochRecord& e = r.history.at(0);
      const std::vector<double>& w = weighted ? weight_d : ones;
      const Reference train = reference_on(r.last_logits, truth, "train", w);
      const Reference valid = reference_on(r.last_logits, truth, "valid", w);
      const Reference test = reference_on(r.last_logits, truth, "test", w);
      EXPECT_NEAR(e.loss, train.loss, 1e-6 * train.loss);
      EXPECT_NEAR(e.valid_loss, valid.loss, 1e-6 * valid.loss);
      const auto pick = [&](const Reference& ref) {
        return metric == MetricKind::RocAuc             ? ref.auc
               : metric == MetricKind::AveragePrecision ? ref.ap
               : metric == MetricKind::F1Micro          ? ref.f1_micro
                                                        : ref.f1_macro;
      };
      EXPECT_NEAR(e.train_acc, pick(train), 1e-12);
      EXPECT_NEAR(e.valid_acc, pick(valid), 1e-12);
      EXPECT_NEAR(e.test_acc, pick(test), 1e-12);
    }
  }
}

// Eight nodes on the world's ranks (blocks of one row or none; tasks split over the classes' axis): every
// rank enters every collective of the loss and the metrics, and every grid gives the one-rank run's numbers.
TEST(MultiLabel, EmptyBlocksGiveTheOneRankRun) {
  const Communicator world = Communicator::world();
  SynthOptions o;
  o.num_nodes = 8, o.num_edges = 8, o.num_features = 4, o.num_classes = 2, o.tasks = kTasks;
  o.train_fraction = 0.5, o.valid_fraction = 0.25;
  const std::string path = fixtures::synthetic_file("eight-nodes-multi.h5", o);
  const auto run = [&](const Communicator& comm, const GridShape& shape, MetricKind metric) {
    const ProcessGrid grid(comm, shape);
    const Graph3D graph = load_graph_3d(GraphFileReader(comm, path), grid, Graph3DOptions{});
    const std::unique_ptr<Sequential> model = task_gcn(grid, graph.num_features);
    FullGraphSource source(graph, grid, comm, *model);
    return run_epochs(*model, source, comm, metric).history.at(0);
  };
  const Communicator self = world.split(world.rank(), 0);
  for (const MetricKind metric : {MetricKind::RocAuc, MetricKind::F1Macro}) {
    const EpochRecord one = run(self, GridShape{}, metric);
    for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
      SCOPED_TRACE(shape.str());
      const EpochRecord e = run(world, shape, metric);
      EXPECT_NEAR(e.loss, one.loss, 1e-6 * one.loss);
      EXPECT_NEAR(e.train_acc, one.train_acc, 1e-12);
      EXPECT_NEAR(e.valid_acc, one.valid_acc, 1e-12);
      EXPECT_NEAR(e.test_acc, one.test_acc, 1e-12);
    }
  }
}

// Mini-batches of a multi-label graph through the program's path (the loss chosen from the file): every 3D
// grid of one replica cuts the same batches as one rank and gives its losses and scores up to float
// round-off; several replicas train too.
TEST(MultiLabel, MinibatchGridsGiveTheOneRankRun) {
  const Communicator world = Communicator::world();
  const auto run = [&](const Communicator& comm, const GridShape& shape) {
    TrainOptions o;
    o.data = multi_label_file();
    o.mode = TrainMode::Minibatch;
    o.grid.shape = shape;
    o.minibatch.batch_size = 100;
    o.trainer.epochs = 4;
    o.task.metric = MetricKind::AveragePrecision;
    o.task.positive_weight = {1.5f};
    o.outputs.quiet = true;
    return run_training(o, comm);
  };
  const Communicator self = world.split(world.rank(), 0);
  const TrainResult one = run(self, GridShape{1, 1, 1, 1});
  ASSERT_EQ(one.history.back().metric, "average_precision");
  EXPECT_LT(one.history.back().loss, one.history.front().loss);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), true)) {
    SCOPED_TRACE(shape.str());
    const TrainResult r = run(world, shape);
    ASSERT_EQ(r.history.size(), one.history.size());
    if (shape.d > 1) {
      EXPECT_GT(r.best_valid, 0.5);
      continue;
    }
    for (size_t e = 0; e < r.history.size(); ++e) {
      EXPECT_NEAR(r.history[e].loss, one.history[e].loss, 1e-5 * one.history[e].loss) << "epoch " << e;
      EXPECT_NEAR(r.history[e].valid_acc, one.history[e].valid_acc, 1e-5) << "epoch " << e;
    }
  }
}

// The sampled mode at learning rate 0: its exact (layer-wise) evaluation scores the full graph's logits up
// to the rounding of another summation order, its sampled evaluation is a score, and its steps train on
// the seeds' task labels (the loss's mean over their observed entries).
TEST(MultiLabel, SampledModeScoresTheTasks) {
  const Communicator world = Communicator::world();
  const ProcessGrid one(world, GridShape{1, 1, 1, world.size()});
  const Graph3D graph = load_graph_3d(GraphFileReader(world, multi_label_file()), one, Graph3DOptions{});
  const std::unique_ptr<Sequential> full_model = task_gcn(one, graph.num_features);
  FullGraphSource full(graph, one, world, *full_model);
  const EpochRecord reference = run_epochs(*full_model, full, world, MetricKind::RocAuc).history.at(0);

  const ProcessGrid sampled_grid(world, GridShape{world.size(), 1, 1, 1});
  const PartitionedGraph parts = load_partitioned(world, multi_label_file(), "block");
  ASSERT_TRUE(parts.multi_label);
  ASSERT_EQ(parts.targets.size(), size_t(parts.count * kTasks));
  for (const bool exact : {true, false}) {
    SCOPED_TRACE(exact ? "exact evaluation" : "sampled evaluation");
    const std::unique_ptr<Sequential> model = task_gcn(sampled_grid, parts.num_features);
    SampledOptions o;
    o.batch_size = 32;
    o.thread = StepThread::Off;
    o.exact_eval = exact;
    SampledSource sampled(parts, sampled_grid, world, o, *model, Normalization::Symmetric);
    const EpochRecord s = run_epochs(*model, sampled, world, MetricKind::RocAuc).history.at(0);
    EXPECT_EQ(s.metric, "roc_auc");
    if (exact) {
      EXPECT_NEAR(s.valid_acc, reference.valid_acc, 0.002);
      EXPECT_NEAR(s.valid_loss, reference.valid_loss, 1e-4 * reference.valid_loss);
    } else {
      EXPECT_GT(s.valid_acc, 0.0);
      EXPECT_LE(s.valid_acc, 1.0);
    }
    EXPECT_GT(s.loss, 0.0);
  }
  // On one rank the device-built steps (run on the host here) give the host sampler's run.
  if (world.size() == 1) {
    std::vector<double> losses[2];
    for (const SamplePlace place : {SamplePlace::Host, SamplePlace::Device}) {
      TrainOptions o;
      o.data = multi_label_file();
      o.mode = TrainMode::Sampled;
      o.sampled.batch_size = 64;
      o.sampled.sample_on = place;
      o.trainer.epochs = 3;
      o.outputs.quiet = true;
      for (const EpochRecord& e : run_training(o, world).history)
        losses[place == SamplePlace::Device].push_back(e.loss);
    }
    EXPECT_EQ(losses[0], losses[1]);
  }
}

// Training learns the tasks as well as knowing each node's class would: the oracle scores a validation node
// by its class's rate of positives among the training nodes.
TEST(MultiLabel, TrainingLearnsTheTasks) {
  const Communicator world = Communicator::world();
  const SynthOptions o = multi_label_options();
  const Truth truth = truth_of(multi_label_file());
  double oracle = 0, tasks = 0;
  for (int64_t t = 0; t < kTasks; ++t) {
    std::vector<double> positives(size_t(o.num_classes)), observed(size_t(o.num_classes));
    for (int64_t v = 0; v < o.num_nodes; ++v) {
      const int y = truth.labels[size_t(v * kTasks + t)];
      if (truth.split[size_t(v)] != "train" || y < 0) continue;
      positives[size_t(csbm_class(o, v))] += y, observed[size_t(csbm_class(o, v))] += 1;
    }
    std::vector<double> score;
    std::vector<int> positive;
    for (int64_t v = 0; v < o.num_nodes; ++v) {
      const int y = truth.labels[size_t(v * kTasks + t)];
      if (truth.split[size_t(v)] != "valid" || y < 0) continue;
      const size_t c = size_t(csbm_class(o, v));
      score.push_back(positives[c] / std::max(1.0, observed[c])), positive.push_back(y);
    }
    const auto count = std::count(positive.begin(), positive.end(), 1);
    if (count > 0 && count < int64_t(positive.size())) oracle += pairwise_auc(score, positive), tasks += 1;
  }
  oracle /= tasks;
  const ProcessGrid grid(world, ProcessGrid::factorizations(world.size(), false).back());
  const Graph3D graph = load_graph_3d(GraphFileReader(world, multi_label_file()), grid, Graph3DOptions{});
  const std::unique_ptr<Sequential> model = task_gcn(grid, graph.num_features);
  FullGraphSource source(graph, grid, world, *model);
  const TrainResult r = run_epochs(*model, source, world, MetricKind::RocAuc, {}, 100, 0.03f);
  EXPECT_LT(r.history.back().loss, 0.8 * r.history.front().loss);
  EXPECT_GT(r.best_valid, oracle - 0.02) << "the oracle scores " << oracle;
  EXPECT_GT(r.best_valid, 0.6);
}

}  // namespace tessera
