// SPDX-License-Identifier: BSD-3-Clause
// Layers and models: backward against central finite differences (double precision), the whole model's
// gradient against a dense reference written here, and the trainer's determinism, resume and errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "reference/dense.hpp"
#include "support/fixtures.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/kernels/loss.hpp"
#include "tessera/models/checkpoint.hpp"
#include "tessera/models/model.hpp"
#include "tessera/models/trainer.hpp"

using namespace tessera;
using namespace tessera::reference;

namespace {

// A random undirected graph with a few isolated nodes, as in-edge CSR (pattern).
CsrMatrix<float, HostSpace> random_graph(int64_t n, int64_t edges, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::set<int64_t>> in(static_cast<size_t>(n));
  for (int64_t e = 0; e < edges; ++e) {
    const int64_t u = int64_t(gen() % uint64_t(n - 2)),
                  v = int64_t(gen() % uint64_t(n - 2));  // n-2, n-1 isolated
    if (u == v) continue;
    in[size_t(v)].insert(u);
    in[size_t(u)].insert(v);
  }
  CsrMatrix<float, HostSpace> a;
  a.num_rows = a.num_cols = n;
  a.row_ptr = HostVector<int64_t>("p", size_t(n + 1));
  std::vector<int64_t> idx;
  for (int64_t v = 0; v < n; ++v) {
    idx.insert(idx.end(), in[size_t(v)].begin(), in[size_t(v)].end());
    a.row_ptr(v + 1) = int64_t(idx.size());
  }
  a.col_idx = HostVector<int64_t>("i", idx.size());
  for (size_t k = 0; k < idx.size(); ++k) a.col_idx(k) = idx[k];
  return a;
}

template <class Scalar>
CsrMatrix<Scalar, HostSpace> with_scalar(const CsrMatrix<float, HostSpace>& a) {
  CsrMatrix<Scalar, HostSpace> out;
  out.num_rows = a.num_rows;
  out.num_cols = a.num_cols;
  out.row_ptr = a.row_ptr;
  out.col_idx = a.col_idx;
  out.values = HostVector<Scalar>("values", size_t(a.nnz()));
  for (int64_t k = 0; k < a.nnz(); ++k) out.values(k) = a.is_pattern() ? Scalar(1) : Scalar(a.values(k));
  return out;
}

template <class Scalar>
GraphOps<Scalar> make_ops(ModelKind kind, const CsrMatrix<float, HostSpace>& graph) {
  const CsrMatrix<float, HostSpace> a = kind == ModelKind::Gcn ? gcn_normalize(graph) : mean_normalize(graph);
  GraphOps<Scalar> ops;
  ops.num_nodes = graph.num_rows;
  ops.aggregate = CsrSpmm<Scalar>(csr_to_space<Scalar, DeviceSpace>(with_scalar<Scalar>(a)));
  ops.aggregate_transpose =
      CsrSpmm<Scalar>(csr_to_space<Scalar, DeviceSpace>(with_scalar<Scalar>(csr_transpose(a))));
  return ops;
}

double weighted_sum(const Matrix<double>& out, const Dense& r) {
  const Dense o = from_view(out);
  double s = 0;
  for (size_t k = 0; k < o.a.size(); ++k) s += o.a[k] * r.a[k];
  return s;
}

using fixtures::scratch_dir;

}  // namespace

// dL/dθ of L = sum(out * R) for every parameter entry and every input entry, against (L(θ+h) - L(θ-h)) / 2h.
TEST(LayerGradients, MatchCentralFiniteDifferences) {
  const int64_t n = 14;
  const CsrMatrix<float, HostSpace> graph = random_graph(n, 30, 4);
  std::mt19937_64 gen(8);
  for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage})
    for (NormKind norm : {NormKind::None, NormKind::Batch, NormKind::Rms})
      for (const LayerShape shape :
           {LayerShape{5, 3, false}, LayerShape{3, 5, false}, LayerShape{4, 3, true}}) {
        SCOPED_TRACE(std::string(model_kind_name(kind)) + " norm " + norm_name(norm) + " " +
                     std::to_string(shape.in) + "->" + std::to_string(shape.out) +
                     (shape.last ? " last" : ""));
        const GraphOps<double> ops = make_ops<double>(kind, graph);
        GnnLayer<double> layer(kind, 1, shape, norm, 0.25f, 99);
        const PassInfo pass{true, 7, 3};
        const Dense x = random_dense(n, shape.in, gen), r = random_dense(n, shape.out, gen);
        const Matrix<double> input = to_view<double>(x);
        auto loss = [&] { return weighted_sum(layer.forward(ops, input, pass), r); };
        loss();
        Matrix<double> grad_out = to_view<double>(r);
        const Dense grad_in = from_view(layer.backward(ops, grad_out, true, pass));
        const double h = 1e-6;
        for (Parameter<double>* p : layer.parameters()) {
          const auto analytic = Kokkos::create_mirror_view_and_copy(HostSpace(), p->grad);
          auto value = Kokkos::create_mirror_view_and_copy(HostSpace(), p->value);
          for (int64_t k = 0; k < p->size(); ++k) {
            const double saved = value(k);
            value(k) = saved + h;
            Kokkos::deep_copy(p->value, value);
            const double up = loss();
            value(k) = saved - h;
            Kokkos::deep_copy(p->value, value);
            const double down = loss();
            value(k) = saved;
            Kokkos::deep_copy(p->value, value);
            const double numeric = (up - down) / (2 * h);
            EXPECT_NEAR(analytic(k), numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
                << p->name << "[" << k << "]";
          }
        }
        Dense xp = x;
        for (size_t k = 0; k < xp.a.size(); ++k) {
          const double saved = xp.a[k];
          xp.a[k] = saved + h;
          const double up = weighted_sum(layer.forward(ops, to_view<double>(xp), pass), r);
          xp.a[k] = saved - h;
          const double down = weighted_sum(layer.forward(ops, to_view<double>(xp), pass), r);
          xp.a[k] = saved;
          EXPECT_NEAR(grad_in.a[k], (up - down) / (2 * h), 1e-6 * std::max(1.0, std::abs(grad_in.a[k])))
              << "input " << k;
        }
      }
}

// The model's gradient of the mean training cross-entropy against dense double back-propagation written here.
TEST(ModelGradient, MatchesDenseReference) {
  const int64_t n = 20, f = 6, hidden = 5, classes = 3;
  const CsrMatrix<float, HostSpace> graph = random_graph(n, 45, 12);
  // Dense aggregation matrices computed independently of gcn_normalize / mean_normalize.
  Dense adj = to_dense(graph), gcn(n, n), mean(n, n);
  for (int64_t v = 0; v < n; ++v) adj(v, v) += 0.0;
  std::vector<double> deg(static_cast<size_t>(n)), indeg(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t u = 0; u < n; ++u) indeg[size_t(v)] += adj(v, u);
    deg[size_t(v)] = indeg[size_t(v)] + 1;
  }
  for (int64_t v = 0; v < n; ++v)
    for (int64_t u = 0; u < n; ++u) {
      gcn(v, u) = (adj(v, u) + (u == v ? 1.0 : 0.0)) / std::sqrt(deg[size_t(v)] * deg[size_t(u)]);
      mean(v, u) = indeg[size_t(v)] > 0 ? adj(v, u) / indeg[size_t(v)] : 0.0;
    }
  std::mt19937_64 gen(21);
  const Dense x = random_dense(n, f, gen);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::vector<uint8_t> train(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v)
    labels[size_t(v)] = v % 9 == 4 ? -1 : int64_t(gen() % classes), train[size_t(v)] = v % 3 != 0;
  HostVector<int64_t> hl("labels", size_t(n));
  HostVector<uint8_t> hm("train", size_t(n));
  int64_t count = 0;
  for (int64_t v = 0; v < n; ++v)
    hl(v) = labels[size_t(v)], hm(v) = train[size_t(v)], count += train[size_t(v)] && labels[size_t(v)] >= 0;

  for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage}) {
    SCOPED_TRACE(model_kind_name(kind));
    ModelConfig config;
    config.kind = kind;
    config.layers = 2;
    config.in = f;
    config.hidden = hidden;
    config.out = classes;
    config.dropout = config.input_dropout = 0.0f;
    config.seed = 5;
    GnnModel<double> model(config);
    const GraphOps<double> ops = make_ops<double>(kind, graph);
    const PassInfo pass{true, 5, 0};
    const Matrix<double> logits = model.forward(ops, to_view<double>(x), pass);
    Matrix<double> grad("grad", size_t(n), size_t(classes));
    masked_softmax_cross_entropy<double>(logits, Kokkos::create_mirror_view_and_copy(DeviceSpace(), hl),
                                         Kokkos::create_mirror_view_and_copy(DeviceSpace(), hm),
                                         1.0 / double(count), grad);
    model.backward(ops, grad, pass);

    // Reference forward and backward with the model's initial weights.
    const std::vector<Parameter<double>*> p = model.parameters();
    auto weights = [&](size_t i) { return from_view(p[i]->matrix()); };
    auto bias_rows = [](const Dense& z, const Dense& b) {
      Dense out = z;
      for (int64_t i = 0; i < z.rows; ++i)
        for (int64_t j = 0; j < z.cols; ++j) out(i, j) += b(0, j);
      return out;
    };
    auto col_sums = [](const Dense& z) {
      Dense s(1, z.cols);
      for (int64_t i = 0; i < z.rows; ++i)
        for (int64_t j = 0; j < z.cols; ++j) s(0, j) += z(i, j);
      return s;
    };
    std::vector<Dense> expected;  // in parameter order
    if (kind == ModelKind::Gcn) {
      const Dense w1 = weights(0), b1 = weights(1), w2 = weights(2), b2 = weights(3);
      const Dense ax = matmul(gcn, x), z1 = bias_rows(matmul(ax, w1), b1);
      Dense h1 = z1;
      for (double& v : h1.a) v = std::max(v, 0.0);
      const Dense ah1 = matmul(gcn, h1), z2 = bias_rows(matmul(ah1, w2), b2);
      Dense dz2;
      softmax_cross_entropy(z2, labels, train, &dz2);
      Dense dh1 = matmul(matmul(transpose(gcn), dz2), transpose(w2));
      for (size_t k = 0; k < dh1.a.size(); ++k) dh1.a[k] *= z1.a[k] > 0 ? 1.0 : 0.0;
      expected = {matmul(transpose(ax), dh1), col_sums(dh1), matmul(transpose(ah1), dz2), col_sums(dz2)};
    } else {
      const Dense wn1 = weights(0), wr1 = weights(1), b1 = weights(2), wn2 = weights(3), wr2 = weights(4),
                  b2 = weights(5);
      const Dense mx = matmul(mean, x), z1 = bias_rows(add(matmul(x, wr1), matmul(mx, wn1)), b1);
      Dense h1 = z1;
      for (double& v : h1.a) v = std::max(v, 0.0);
      const Dense mh1 = matmul(mean, h1), z2 = bias_rows(add(matmul(h1, wr2), matmul(mh1, wn2)), b2);
      Dense dz2;
      softmax_cross_entropy(z2, labels, train, &dz2);
      Dense dh1 = add(matmul(dz2, transpose(wr2)), matmul(matmul(transpose(mean), dz2), transpose(wn2)));
      for (size_t k = 0; k < dh1.a.size(); ++k) dh1.a[k] *= z1.a[k] > 0 ? 1.0 : 0.0;
      expected = {matmul(transpose(mx), dh1),  matmul(transpose(x), dh1),  col_sums(dh1),
                  matmul(transpose(mh1), dz2), matmul(transpose(h1), dz2), col_sums(dz2)};
    }
    ASSERT_EQ(p.size(), expected.size());
    // The model's aggregation values are normalized in float (as stored for training), the reference's in
    // double: 1e-7 covers that rounding and nothing more (a wrong term is off by O(1)).
    for (size_t i = 0; i < p.size(); ++i)
      EXPECT_LT(relative_error(from_view(p[i]->grad_matrix()), expected[i]), 1e-7) << p[i]->name;
  }
}

TEST(ModelConfig, RejectsImpossibleSettings) {
  ModelConfig c;
  c.in = 4;
  c.out = 2;
  c.layers = 0;
  EXPECT_THROW(c.validate(), Error);
  c.layers = 2;
  c.dropout = 1.0f;
  EXPECT_THROW(c.validate(), Error);
  c.dropout = 0.5f;
  EXPECT_NO_THROW(c.validate());
}

namespace {

const std::string& small_graph() {
  static std::string path;
  if (path.empty()) {
    SynthOptions o;
    o.num_nodes = 600;
    o.num_edges = 3000;
    o.num_features = 12;
    o.num_classes = 4;
    o.seed = 3;
    path = fixtures::synthetic_file("csbm600.h5", o);
  }
  return path;
}

TrainOptions small_run(int64_t epochs) {
  TrainOptions o;
  o.data = small_graph();
  o.model.hidden = 8;
  o.model.seed = 4;
  o.model.norm = NormKind::Batch;  // running statistics must survive a resume too
  o.epochs = epochs;
  o.quiet = true;
  return o;
}

}  // namespace

TEST(Trainer, SameSeedGivesBitIdenticalLosses) {
  const Communicator world = Communicator::world();
  const TrainResult a = train_full_graph(small_run(30), world), b = train_full_graph(small_run(30), world);
  ASSERT_EQ(a.history.size(), 30u);
  for (size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].loss, b.history[e].loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].valid_acc, b.history[e].valid_acc);
  }
  EXPECT_EQ(a.final_weights, b.final_weights);
  EXPECT_LT(a.history.back().loss, a.history.front().loss);  // and it learns
  TrainOptions other = small_run(30);
  other.model.seed = 5;
  EXPECT_NE(train_full_graph(other, world).history.back().loss, a.history.back().loss);
}

TEST(Trainer, ResumeFromHalfwayGivesIdenticalFinalWeights) {
  const Communicator world = Communicator::world();
  const TrainResult straight = train_full_graph(small_run(200), world);
  TrainOptions first = small_run(100);
  first.checkpoint_dir = scratch_dir();
  first.checkpoint_every = 50;
  train_full_graph(first, world);
  TrainOptions second = small_run(200);
  second.checkpoint_dir = scratch_dir();
  second.resume = true;
  const TrainResult resumed = train_full_graph(second, world);
  ASSERT_EQ(resumed.history.size(), 100u);
  EXPECT_EQ(resumed.history.front().epoch, 101);
  EXPECT_EQ(resumed.final_weights, straight.final_weights);
  EXPECT_EQ(resumed.history.back().loss, straight.history.back().loss);
  EXPECT_EQ(resumed.best_epoch, straight.best_epoch);
  EXPECT_EQ(resumed.test_at_best, straight.test_at_best);
}

TEST(Trainer, WritesMetricsAndPredictions) {
  TrainOptions o = small_run(5);
  o.metrics_path = scratch_dir() + "/metrics.jsonl";
  o.predictions_path = scratch_dir() + "/predictions.txt";
  train_full_graph(o, Communicator::world());
  std::ifstream metrics(o.metrics_path), predictions(o.predictions_path);
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) {
    ++lines;
    EXPECT_NE(line.find("\"epoch\":" + std::to_string(lines)), std::string::npos) << line;
    EXPECT_NE(line.find("\"valid_acc\""), std::string::npos);
  }
  EXPECT_EQ(lines, 5);
  int nodes = 0;
  while (std::getline(predictions, line)) {
    const int label = std::stoi(line);
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 4);
    ++nodes;
  }
  EXPECT_EQ(nodes, 600);
}

TEST(Trainer, BadCheckpointsAndSettingsAreClearErrors) {
  const Communicator world = Communicator::world();
  const std::string dir = scratch_dir() + "/bad";
  mkdir(dir.c_str(), 0755);
  TrainOptions o = small_run(3);
  o.checkpoint_dir = dir;
  train_full_graph(o, world);
  auto message = [&](TrainOptions run) {
    try {
      train_full_graph(run, world);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  TrainOptions wider = o;
  wider.model.hidden = 16;
  wider.resume = true;
  wider.epochs = 6;
  EXPECT_NE(message(wider).find(
                "written for model gcn 2x8 (in 12, out 4, norm batch), but this run builds gcn 2x16"),
            std::string::npos)
      << message(wider);
  {
    std::ofstream corrupt(dir + "/checkpoint.h5", std::ios::trunc);
    corrupt << "garbage";
  }
  TrainOptions resume = o;
  resume.resume = true;
  resume.epochs = 6;
  EXPECT_NE(message(resume).find("cannot open the checkpoint"), std::string::npos) << message(resume);
  TrainOptions none = small_run(3);
  none.model.layers = 0;
  EXPECT_EQ(message(none), "--layers must be at least 1, not 0");
  TrainOptions missing = small_run(3);
  missing.data = dir + "/nothing.h5";
  EXPECT_NE(message(missing).find("cannot read"), std::string::npos);
}
