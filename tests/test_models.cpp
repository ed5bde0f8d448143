// SPDX-License-Identifier: BSD-3-Clause
// Layers and models on one rank (the 1x1x1 grid): every library layer against a dense double-precision
// reference (tests/reference/layers.hpp, whose own backward is checked here by central finite differences),
// on every kernel path; a whole model's gradient against dense back-propagation written here; and the
// trainer's determinism, resume, outputs, hooks and errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "reference/layers.hpp"
#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "support/random_graph.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/stop_signals.hpp"
#include "tessera/graph/hdf5_io.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/kernels/loss.hpp"
#include "tessera/models/modes/full_graph.hpp"
#include "tessera/models/nn/activation.hpp"
#include "tessera/models/nn/conv.hpp"
#include "tessera/models/nn/model.hpp"
#include "tessera/models/nn/optimizer.hpp"
#include "tessera/models/nn/random_streams.hpp"
#include "tessera/models/nn/workspace.hpp"
#include "tessera/models/train.hpp"
#include "tessera/models/training/checkpoint.hpp"
#include "tessera/models/training/hooks.hpp"

using namespace tessera;
using namespace tessera::reference;

namespace {

// A random undirected graph with a few isolated nodes, as in-edge lists (no self loops).
std::vector<std::set<int64_t>> random_graph(int64_t n, int64_t edges, uint64_t seed) {
  return fixtures::random_in_edges(n, edges, seed, 2);
}

// Dense aggregation operators computed here, independently of the loader: GCN's D^-1/2 (A + I) D^-1/2 and
// the neighbour mean D^-1 A.
Dense dense_operator(const std::vector<std::set<int64_t>>& in, Normalization normalization) {
  const int64_t n = int64_t(in.size());
  Dense a(n, n);
  for (int64_t v = 0; v < n; ++v) {
    const double dv = double(in[size_t(v)].size());
    if (normalization == Normalization::Symmetric) a(v, v) = 1.0 / (dv + 1.0);
    for (int64_t u : in[size_t(v)])
      a(v, u) = normalization == Normalization::Symmetric
                    ? 1.0 / std::sqrt((dv + 1.0) * (double(in[size_t(u)].size()) + 1.0))
                    : 1.0 / dv;
  }
  return a;
}

// The graph on one rank, built from rows in memory (GraphRows): every node labeled `labels`, in `train`.
Graph3D graph_from(const ProcessGrid& grid, const std::vector<std::set<int64_t>>& in, const Dense& x,
                   const std::vector<int64_t>& labels, const std::vector<uint8_t>& train, int64_t classes,
                   Normalization normalization, int layers, bool transposes = true) {
  GraphRows r;
  r.num_nodes = int64_t(in.size());
  r.num_features = x.cols;
  r.num_classes = classes;
  for (const std::set<int64_t>& sources : in) {
    r.indices.insert(r.indices.end(), sources.begin(), sources.end());
    r.indptr.push_back(int64_t(r.indices.size()));
  }
  for (double v : x.a) r.features.push_back(float(v));
  r.labels = labels;
  for (uint8_t t : train) r.splits.push_back(t ? GraphRows::kTrain : 0);
  return build_graph_3d(r, grid,
                        Graph3DOptions{layers, PermuteMode::None, 0, normalization, false, {}, transposes});
}

// A parameter's block as a dense matrix.
Dense dense_of(const Parameter& p) {
  return from_view(p.matrix());
}

// Central finite differences of f at every entry of m, against the analytic gradient g.
template <class F>
void expect_finite_differences(Dense& m, const Dense& g, const F& f, const char* what) {
  const double h = 1e-6;
  for (size_t k = 0; k < m.a.size(); ++k) {
    const double saved = m.a[k];
    m.a[k] = saved + h;
    const double up = f();
    m.a[k] = saved - h;
    const double down = f();
    m.a[k] = saved;
    EXPECT_NEAR(g.a[k], (up - down) / (2 * h), 1e-6 * std::max(1.0, std::abs(g.a[k])))
        << what << "[" << k << "]";
  }
}

using fixtures::scratch_dir;

double weighted_sum(const Dense& out, const Dense& r) {
  double s = 0;
  for (size_t k = 0; k < out.a.size(); ++k) s += out.a[k] * r.a[k];
  return s;
}

}  // namespace

// d(sum(out * R))/d(everything) of the dense reference layer against central finite differences: the
// reference's backward is what the library's layers are held to below.
TEST(ReferenceLayer, BackwardMatchesCentralFiniteDifferences) {
  const auto in = random_graph(9, 20, 4);
  std::mt19937_64 gen(8);
  for (Normalization normalization : {Normalization::Symmetric, Normalization::Mean})
    for (Norm norm : {Norm::None, Norm::Batch, Norm::Rms}) {
      SCOPED_TRACE(std::string(normalization_name(normalization)) + " norm " + std::to_string(int(norm)));
      LayerSpec s;
      s.a = dense_operator(in, normalization);
      s.norm = norm;
      s.relu = true;
      s.scale = Dense(9, 3, 1.0 / 0.75);
      for (int64_t k = 0; k < 27; k += 4) s.scale.a[size_t(k)] = 0;
      LayerWeights p{random_dense(4, 3, gen), random_dense(4, 3, gen), random_dense(1, 3, gen),
                     random_dense(1, 3, gen, 2.0), random_dense(1, 3, gen)};
      Dense x = random_dense(9, 4, gen);
      const Dense r = random_dense(9, 3, gen);
      LayerTape t;
      forward(s, p, x, t);
      const LayerGrads g = backward(s, p, t, r);
      auto loss = [&] {
        LayerTape u;
        return weighted_sum(forward(s, p, x, u), r);
      };
      expect_finite_differences(p.w, g.w, loss, "w");
      expect_finite_differences(p.root, g.root, loss, "root");
      expect_finite_differences(p.bias, g.bias, loss, "bias");
      if (norm != Norm::None) {
        expect_finite_differences(p.gamma, g.gamma, loss, "gamma");
        expect_finite_differences(p.beta, g.beta, loss, "beta");
      }
      expect_finite_differences(x, g.x, loss, "x");
    }
}

// Every library layer stack a hidden or last layer can be (GCN / GraphSAGE, with BatchNorm or RMSNorm or
// none, ReLU, dropout), both schedules ((A H) W and transform-first), on every kernel path: the output and
// every gradient against the dense reference.
TEST(LayerGradients, MatchTheDenseReferenceOnEveryKernelPath) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  const auto in = random_graph(14, 30, 4);
  std::mt19937_64 gen(8);
  struct Shape {
    int64_t in, out;
    bool last;
  };
  std::vector<KernelPath> paths{KernelPath::Auto};  // a device build's auto: vendor GEMM and SpMM, team
  for (KernelPath path : {KernelPath::Host, KernelPath::Team})  // the host path has no GEMM on a device
    if (kernel_path_available(path, KernelKind::Gemm) && kernel_path_available(path, KernelKind::Spmm))
      paths.push_back(path);
  for (KernelPath path : paths)
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage})
      for (NormKind norm : {NormKind::None, NormKind::Batch, NormKind::Rms})
        for (const Shape shape : {Shape{5, 3, false}, Shape{3, 5, false}, Shape{4, 3, true}}) {
          SCOPED_TRACE(std::string(kernel_path_name(path)) + " " + model_kind_name(kind) + " norm " +
                       norm_name(norm) + " " + std::to_string(shape.in) + "->" + std::to_string(shape.out) +
                       (shape.last ? " last" : ""));
          const Dense x = random_dense(14, shape.in, gen), r = random_dense(14, shape.out, gen);
          const Normalization normalization = normalization_for(kind);
          const Graph3D g = graph_from(grid, in, x, std::vector<int64_t>(14, 0), std::vector<uint8_t>(14, 1),
                                       2, normalization, 1);
          const bool normed = !shape.last && norm != NormKind::None;
          Sequential model(grid, shape.in, RunOptions{path, 0, CommDtype::F32}, 99);
          ConvOptions conv;
          conv.bias = !(normed && norm == NormKind::Batch);
          conv.relu = !shape.last && !normed;
          conv.dropout = !shape.last && !normed ? 0.25f : 0.0f;
          if (kind == ModelKind::Gcn)
            model.add<GcnConv>(shape.out, conv);
          else
            model.add<SageConv>(shape.out, conv);
          if (normed && norm == NormKind::Batch) model.add<BatchNorm>(NormOptions{true, 0.25f});
          if (normed && norm == NormKind::Rms) model.add<RmsNorm>(NormOptions{true, 0.25f});
          const GraphBatch batch = full_graph_batch(g, model.batch_needs());
          const PassInfo pass{true, 7, 3};
          Matrix<const float> h = g.features;
          for (size_t k = 0; k < model.size(); ++k) h = model.layer(k).forward(h, batch, pass);
          const Dense out = from_view(h);
          Matrix<float> grad = to_view<float>(r);
          for (size_t k = model.size(); k-- > 0;) grad = model.layer(k).backward(grad, true, pass);
          // The reference with the library's initial weights and its dropout mask.
          const std::vector<ParameterRef> params = model.parameters();
          LayerSpec s;
          s.a = dense_operator(in, normalization);
          s.norm = norm == NormKind::Batch && normed ? Norm::Batch
                   : norm == NormKind::Rms && normed ? Norm::Rms
                                                     : Norm::None;
          s.relu = !shape.last;
          if (!shape.last) {
            const DropoutMask mask(0.25f, 7, streams::dropout(3, 0));
            s.scale = Dense(14, shape.out);
            for (int64_t i = 0; i < 14; ++i)
              for (int64_t j = 0; j < shape.out; ++j) s.scale(i, j) = mask.keep(i, j) ? 1.0 / 0.75 : 0.0;
          }
          LayerWeights p;
          size_t k = 0;
          p.w = dense_of(*params[k++].param);
          if (kind == ModelKind::Sage) p.root = dense_of(*params[k++].param);
          if (conv.bias) p.bias = dense_of(*params[k++].param);
          if (normed) p.gamma = dense_of(*params[k++].param), p.beta = dense_of(*params[k++].param);
          ASSERT_EQ(k, params.size());
          LayerTape t;
          EXPECT_LT(relative_error(out, forward(s, p, x, t)), 1e-5);
          const LayerGrads expect = backward(s, p, t, r);
          EXPECT_LT(relative_error(from_view(grad), expect.x), 1e-5) << "input";
          k = 0;
          for (const Dense* e : {&expect.w, &expect.root, &expect.bias, &expect.gamma, &expect.beta}) {
            if (e->rows == 0) continue;
            EXPECT_LT(relative_error(from_view(params[k].param->grad_matrix()), *e), 1e-5)
                << params[k].param->name;
            ++k;
          }
        }
}

namespace {

// v as float, then rounded to bf16's 8 significant bits (nearest, ties to even): written here with frexp,
// apart from the library's bit manipulation (normal values only, which is all the test feeds it).
double bf16_rounded(double v) {
  int e = 0;
  const double m = std::frexp(double(float(v)), &e);  // |m| in [0.5, 1)
  return std::ldexp(std::nearbyint(m * 256.0), e - 8);
}

Dense bf16_rounded(Dense d) {
  for (double& v : d.a) v = bf16_rounded(v);
  return d;
}

}  // namespace

// RunOptions::activation_dtype Bf16: a layer that aggregates first keeps A H (and GraphSAGE's root term,
// H itself) as bf16 for its weight gradient. Its forward and input gradient are the fp32 layer's bit for bit;
// its weight gradients are the dense reference's with the kept values rounded to bf16 (and differ from the
// unrounded reference's). A transform-first layer keeps no aggregation: every number as in fp32.
TEST(LayerGradients, Bf16ActivationsRoundOnlyTheKeptAggregation) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  const auto in = random_graph(14, 30, 4);
  std::mt19937_64 gen(11);
  for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage})
    for (const auto& [width_in, width_out] : {std::pair<int64_t, int64_t>{3, 5}, {5, 3}}) {
      SCOPED_TRACE(std::string(model_kind_name(kind)) + " " + std::to_string(width_in) + "->" +
                   std::to_string(width_out));
      const bool aggregates_first = width_out > width_in;
      const Dense x = random_dense(14, width_in, gen), r = random_dense(14, width_out, gen);
      const Normalization normalization = normalization_for(kind);
      const Graph3D g = graph_from(grid, in, x, std::vector<int64_t>(14, 0), std::vector<uint8_t>(14, 1), 2,
                                   normalization, 1);
      struct Result {
        std::vector<double> out, grad_in;
        std::vector<Dense> weight_grads;
      };
      auto run = [&](StorageDtype activations) {
        RunOptions options;
        options.activation_dtype = activations;
        Sequential model(grid, width_in, options, 99);
        ConvOptions conv;
        conv.relu = true;
        if (kind == ModelKind::Gcn)
          model.add<GcnConv>(width_out, conv);
        else
          model.add<SageConv>(width_out, conv);
        const GraphBatch batch = full_graph_batch(g, model.batch_needs());
        const PassInfo pass{true, 7, 3};
        const Matrix<const float> out = model.layer(0).forward(g.features, batch, pass);
        const Matrix<const float> grad = model.layer(0).backward(to_view<float>(r), true, pass);
        Result result{from_view(out).a, from_view(grad).a, {}};
        for (const ParameterRef& p : model.parameters())
          result.weight_grads.push_back(from_view(p.param->grad_matrix()));
        // An evaluation forward computes the same output; under bf16 activations it keeps (and rounds)
        // nothing, so a backward after it is refused.
        const PassInfo evaluation{false, 7, 3};
        EXPECT_EQ(from_view(model.layer(0).forward(g.features, batch, evaluation)).a, result.out);
        if (activations == StorageDtype::Bf16 && aggregates_first) {
          EXPECT_THROW(model.layer(0).backward(to_view<float>(r), true, evaluation), Error);
        }
        return result;
      };
      const Result fp32 = run(StorageDtype::F32), bf16 = run(StorageDtype::Bf16);
      EXPECT_EQ(bf16.out, fp32.out);
      EXPECT_EQ(bf16.grad_in, fp32.grad_in);
      // The reference with the library's weights: its tape's kept values rounded as the layer keeps them.
      Sequential weights_of(grid, width_in, RunOptions{}, 99);
      LayerSpec s;
      s.a = dense_operator(in, normalization);
      s.relu = true;
      LayerWeights p;
      {
        ConvOptions conv;
        conv.relu = true;
        if (kind == ModelKind::Gcn)
          weights_of.add<GcnConv>(width_out, conv);
        else
          weights_of.add<SageConv>(width_out, conv);
        const std::vector<ParameterRef> params = weights_of.parameters();
        size_t k = 0;
        p.w = dense_of(*params[k++].param);
        if (kind == ModelKind::Sage) p.root = dense_of(*params[k++].param);
        p.bias = dense_of(*params[k++].param);
      }
      LayerTape t;
      forward(s, p, x, t);
      const LayerGrads exact = backward(s, p, t, r);
      LayerTape kept = t;
      kept.ax = bf16_rounded(t.ax);
      kept.x = bf16_rounded(t.x);
      const LayerGrads rounded = backward(s, p, kept, r);
      const LayerGrads& expect = aggregates_first ? rounded : exact;
      size_t k = 0;
      for (const Dense* e : {&expect.w, &expect.root, &expect.bias}) {
        if (e->rows == 0) continue;
        EXPECT_LT(relative_error(bf16.weight_grads[k], *e), 1e-5) << "weight gradient " << k;
        ++k;
      }
      if (aggregates_first) {  // the rounding is seen: off the unrounded reference by far more than fp32's
        EXPECT_GT(relative_error(bf16.weight_grads[0], exact.w), 1e-4);
      } else {
        for (size_t i = 0; i < fp32.weight_grads.size(); ++i)
          EXPECT_EQ(bf16.weight_grads[i].a, fp32.weight_grads[i].a) << "weight gradient " << i;
      }
    }
}

// Labels in [0, classes) drawn from gen, -1 (unlabeled) where unlabeled(v), and the training mask
// in_train(v); `count` is how many labeled training nodes the mean loss divides by.
struct Supervision {
  std::vector<int64_t> labels;
  std::vector<uint8_t> train;
  int64_t count = 0;
};

template <class Unlabeled, class InTrain>
Supervision random_supervision(int64_t n, int64_t classes, std::mt19937_64& gen, Unlabeled unlabeled,
                               InTrain in_train) {
  Supervision s;
  for (int64_t v = 0; v < n; ++v) {
    s.labels.push_back(unlabeled(v) ? -1 : int64_t(gen() % uint64_t(classes)));
    s.train.push_back(in_train(v));
    s.count += s.train.back() && s.labels.back() >= 0;
  }
  return s;
}

// A model without dropout, so its gradient is a function of the weights alone.
ModelConfig deterministic_config(ModelKind kind, int layers, int64_t in, int64_t hidden, int64_t out,
                                 uint64_t seed) {
  ModelConfig config;
  config.kind = kind;
  config.layers = layers;
  config.in = in;
  config.hidden = hidden;
  config.out = out;
  config.dropout = config.input_dropout = 0.0f;
  config.seed = seed;
  return config;
}

// Forward, the mean training cross-entropy's gradient of the logits, backward: the parameters' gradients.
void loss_backward(Sequential& model, const Graph3D& g, const GraphBatch& batch, const PassInfo& pass,
                   int64_t count) {
  const Matrix<const float> logits = model.forward(g.features, batch, pass);
  Matrix<float> grad("grad", logits.extent(0), logits.extent(1));
  const NodeData& data = g.node_data_for(model.graph_layers());
  masked_softmax_cross_entropy<float>(logits, data.labels, data.mask("train"), 1.0f / float(count), grad);
  model.backward(grad, pass);
}

// The model's gradient of the mean training cross-entropy against dense double back-propagation written here.
TEST(ModelGradient, MatchesDenseReference) {
  const int64_t n = 20, f = 6, hidden = 5, classes = 3;
  const auto in = random_graph(n, 45, 12);
  const Dense gcn = dense_operator(in, Normalization::Symmetric),
              mean = dense_operator(in, Normalization::Mean);
  std::mt19937_64 gen(21);
  const Dense x = random_dense(n, f, gen);
  const auto [labels, train, count] = random_supervision(
      n, classes, gen, [](int64_t v) { return v % 9 == 4; }, [](int64_t v) { return v % 3 != 0; });
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});

  for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage}) {
    SCOPED_TRACE(model_kind_name(kind));
    const Graph3D g = graph_from(grid, in, x, labels, train, classes, normalization_for(kind), 2);
    const std::unique_ptr<Sequential> model =
        build_model(deterministic_config(kind, 2, f, hidden, classes, 5), grid, RunOptions{}, true);
    const GraphBatch batch = full_graph_batch(g, model->batch_needs());
    loss_backward(*model, g, batch, PassInfo{true, 5, 0}, count);

    // Reference forward and backward with the model's initial weights.
    const std::vector<ParameterRef> p = model->parameters();
    auto weights = [&](size_t i) { return dense_of(*p[i].param); };
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
    // The model computes in float: 1e-5 covers that rounding and nothing more (a wrong term is off by O(1)).
    for (size_t i = 0; i < p.size(); ++i)
      EXPECT_LT(relative_error(from_view(p[i].param->grad_matrix()), expected[i]), 1e-5) << p[i].param->name;
  }
}

// The shared workspace: a call's scratch pieces are disjoint and 64-byte aligned; the input-gradient buffer
// grows to what was reserved, and when it must grow in a call, the previous matrix (an output gradient
// still to be read) stays readable until the next call (AddressSanitizer sees a read after free otherwise).
TEST(LayerWorkspace, PiecesDisjointAndOldGradientReadableAfterGrowth) {
  LayerWorkspace w;
  const LayerWorkspace::Pieces p = w.scratch({5, 0, 17});
  for (float* q : p) EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
  EXPECT_GE(p[1], p[0] + 5);
  EXPECT_GE(p[2], p[1]);
  EXPECT_EQ(w.allocated_floats(), 16 + 0 + 32);  // each piece rounded up to 16 floats; nothing else yet
  EXPECT_EQ(w.scratch({40})[1], nullptr);        // fits: no new buffer, no second piece
  EXPECT_EQ(w.allocated_floats(), 48);
  EXPECT_THROW(w.scratch({1, 1, 1, 1}), Error);
  w.reserve_input_gradient(12);
  const Matrix<float> small = w.input_gradient(3, 4);
  EXPECT_EQ(w.allocated_floats(), 48 + 12);
  const HostMatrix<float> pattern("pattern", 3, 4);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) pattern(i, j) = float(10 * i + j);
  Kokkos::deep_copy(small, pattern);
  const Matrix<float> large = w.input_gradient(10, 10);  // grows: `small` is the retired buffer now
  EXPECT_NE(large.data(), small.data());
  const HostMatrix<float> back("back", 3, 4);
  Kokkos::deep_copy(back, small);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(back(i, j), pattern(i, j));
  EXPECT_EQ(w.input_gradient(2, 2).data(), large.data());  // fits: the same buffer, the old one released
  EXPECT_EQ(w.allocated_floats(), 48 + 100);
}

// Four GCN layers (6 -> 5 -> 5 -> 5 -> 3): the widening-or-equal layers run (A H) W with an aggregation
// gradient, the last runs transform-first, and three input gradients pass down the chain. Every temporary
// and input gradient comes from the model's shared workspace (two input-gradient buffers alternate by
// layer parity), so a piece reused too early shows up here as a wrong gradient.
TEST(ModelGradient, DeepGcnMatchesDenseReference) {
  const int64_t n = 23, f = 6, hidden = 5, classes = 3;
  const int layers = 4;
  const auto in = random_graph(n, 50, 31);
  const Dense gcn = dense_operator(in, Normalization::Symmetric);
  std::mt19937_64 gen(8);
  const Dense x = random_dense(n, f, gen);
  const auto [labels, train, count] = random_supervision(
      n, classes, gen, [](int64_t) { return false; }, [](int64_t v) { return v % 4 != 1; });
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  const Graph3D g = graph_from(grid, in, x, labels, train, classes, Normalization::Symmetric, layers);
  const std::unique_ptr<Sequential> model = build_model(
      deterministic_config(ModelKind::Gcn, layers, f, hidden, classes, 9), grid, RunOptions{}, true);
  const GraphBatch batch = full_graph_batch(g, BatchNeeds{g.layers, false, {}});
  // The second step runs on buffers the first sized.
  for (int step = 0; step < 2; ++step) loss_backward(*model, g, batch, PassInfo{true, 9, 0}, count);
  const std::vector<ParameterRef> p = model->parameters();  // weight, bias per layer
  ASSERT_EQ(p.size(), size_t(2 * layers));
  std::vector<Dense> aggregated, pre;  // A H_l and Z_l per layer
  Dense h = x;
  for (int l = 0; l < layers; ++l) {
    aggregated.push_back(matmul(gcn, h));
    Dense z = matmul(aggregated.back(), dense_of(*p[size_t(2 * l)].param));
    const Dense b = dense_of(*p[size_t(2 * l + 1)].param);
    for (int64_t i = 0; i < z.rows; ++i)
      for (int64_t j = 0; j < z.cols; ++j) z(i, j) += b(0, j);
    pre.push_back(z);
    h = z;
    for (double& v : h.a) v = std::max(v, 0.0);
  }
  Dense dz;
  softmax_cross_entropy(pre.back(), labels, train, &dz);
  for (int l = layers - 1; l >= 0; --l) {
    const Dense dw = matmul(transpose(aggregated[size_t(l)]), dz);
    Dense db(1, dz.cols);
    for (int64_t i = 0; i < dz.rows; ++i)
      for (int64_t j = 0; j < dz.cols; ++j) db(0, j) += dz(i, j);
    EXPECT_LT(relative_error(from_view(p[size_t(2 * l)].param->grad_matrix()), dw), 1e-5) << "layer " << l;
    EXPECT_LT(relative_error(from_view(p[size_t(2 * l + 1)].param->grad_matrix()), db), 1e-5)
        << "layer " << l;
    if (l == 0) break;
    dz = matmul(matmul(transpose(gcn), dz), transpose(dense_of(*p[size_t(2 * l)].param)));
    for (size_t k = 0; k < dz.a.size(); ++k) dz.a[k] *= pre[size_t(l - 1)].a[k] > 0 ? 1.0 : 0.0;
  }
}

// A graph loaded without transposes (mini-batch mode's full-graph evaluation) gives the same logits, and
// a backward on it is refused with a message instead of multiplying by an empty matrix.
TEST(ModelGradient, ForwardOnlyGraphSameLogitsAndRefusesBackward) {
  const int64_t n = 17, f = 4, classes = 3;
  const auto in = random_graph(n, 40, 5);
  std::mt19937_64 gen(3);
  const Dense x = random_dense(n, f, gen);
  const auto [labels, train, count] = random_supervision(
      n, classes, gen, [](int64_t) { return false; }, [](int64_t) { return true; });
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  const Graph3D both = graph_from(grid, in, x, labels, train, classes, Normalization::Symmetric, 2);
  const Graph3D forward_only =
      graph_from(grid, in, x, labels, train, classes, Normalization::Symmetric, 2, false);
  const std::unique_ptr<Sequential> model =
      build_model(deterministic_config(ModelKind::Gcn, 2, f, 5, classes, 4), grid, RunOptions{}, true);
  const PassInfo pass{true, 4, 0};
  const GraphBatch full = full_graph_batch(both, BatchNeeds{2, false, {}}),
                   forward = full_graph_batch(forward_only, BatchNeeds{2, false, {}});
  const Dense expected = from_view(model->forward(both.features, full, pass));
  EXPECT_EQ(from_view(model->forward(forward_only.features, forward, pass)).a, expected.a);
  EXPECT_THROW(loss_backward(*model, forward_only, forward, pass, count), Error);
}

namespace {
// The views of `full`, each layer l's blocks copied without their transposes unless keep[l].
GraphBatch without_transposes(const GraphBatch& full, const std::vector<bool>& keep) {
  GraphBatch out;
  out.input = full.input;
  out.layers = full.layers;
  for (size_t l = 0; l < out.layers.size(); ++l) {
    if (keep[l]) continue;
    for (const AdjacencyBlock** block : {&out.layers[l].adjacency, &out.layers[l].self}) {
      if (!*block) continue;
      auto copy = std::make_unique<AdjacencyBlock>(**block);
      copy->transpose = CsrSpmm<float>();
      copy->has_transpose = false;
      *block = copy.get();
      out.blocks.push_back(std::move(copy));
    }
  }
  return out;
}
}  // namespace

// Sources that build blocks per step skip the transposes a model says its backward never reads (the sampled
// step's input layer holds most of its nonzeros). Without those transposes the gradients are the same to
// the bit; without one the model says it reads, backward throws.
TEST(ModelGradient, BackwardReadsNoTransposeTheModelSkips) {
  const int64_t n = 16, classes = 3;
  const auto in = random_graph(n, 40, 8);
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  struct Case {
    std::string name;
    ModelKind kind;
    int64_t f;
    bool norm_first;
    std::vector<bool> expected;
  };
  // Aggregate-first layer 0 has no input gradient; transform-first layer 0 needs A^T for dL/dW; a norm with
  // parameters before graph layer 0 asks it for an input gradient.
  for (const Case& c : {Case{"gcn aggregate-first", ModelKind::Gcn, 3, false, {false, true}},
                        Case{"sage aggregate-first", ModelKind::Sage, 3, false, {false, true}},
                        Case{"gcn transform-first", ModelKind::Gcn, 12, false, {true, true}},
                        Case{"norm before gcn", ModelKind::Gcn, 3, true, {true, true}}}) {
    SCOPED_TRACE(c.name);
    std::mt19937_64 gen(5);
    const Dense x = random_dense(n, c.f, gen);
    const auto [labels, train, count] = random_supervision(
        n, classes, gen, [](int64_t) { return false; }, [](int64_t v) { return v % 2 == 0; });
    const Graph3D g = graph_from(grid, in, x, labels, train, classes, normalization_for(c.kind), 2);
    auto build = [&] {
      auto model = std::make_unique<Sequential>(grid, c.f, RunOptions{}, 11);
      if (c.norm_first) model->add<BatchNorm>(NormOptions{true, 0.25f});
      ConvOptions hidden;
      hidden.relu = true;
      if (c.kind == ModelKind::Gcn) {
        model->add<GcnConv>(5, hidden);
        model->add<GcnConv>(classes);
      } else {
        model->add<SageConv>(5, hidden);
        model->add<SageConv>(classes);
      }
      return model;
    };
    const std::unique_ptr<Sequential> whole = build(), stripped = build();
    ASSERT_EQ(whole->backward_transposes(), c.expected);
    ASSERT_EQ(whole->batch_needs().transposes, c.expected);
    const GraphBatch full = full_graph_batch(g, whole->batch_needs());
    const PassInfo pass{true, 4, 0};
    loss_backward(*whole, g, full, pass, count);
    loss_backward(*stripped, g, without_transposes(full, c.expected), pass, count);
    const std::vector<ParameterRef> a = whole->parameters(), b = stripped->parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_EQ(from_view(a[k].param->grad_matrix()).a, from_view(b[k].param->grad_matrix()).a)
          << a[k].param->name;
    for (size_t l = 0; l < 2; ++l) {
      if (!c.expected[l]) continue;
      std::vector<bool> keep(2, true);
      keep[l] = false;
      EXPECT_THROW(loss_backward(*build(), g, without_transposes(full, keep), pass, count), Error)
          << "layer " << l;
    }
  }
}

// A batch that lends its input block (GraphBatch::scratch_input, as the mini-batch and sampled sources do)
// has the input dropout masked in place: the same logits and gradients, bit for bit, as the copy made for a
// block that must stay intact, and the lent block ends as the masked input (each value 0 or doubled).
TEST(ModelGradient, InputDropoutMasksALentInputInPlace) {
  const int64_t n = 19, f = 5, classes = 3;
  const auto in = random_graph(n, 40, 8);
  std::mt19937_64 gen(6);
  const Dense x = random_dense(n, f, gen);
  const auto [labels, train, count] = random_supervision(
      n, classes, gen, [](int64_t) { return false; }, [](int64_t v) { return v % 2 == 0; });
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  const Graph3D g = graph_from(grid, in, x, labels, train, classes, Normalization::Symmetric, 2);
  ModelConfig config = deterministic_config(ModelKind::Gcn, 2, f, 4, classes, 7);
  config.dropout = config.input_dropout = 0.5f;
  const PassInfo pass{true, 7, 0};
  std::vector<std::vector<double>> grads[2];
  std::vector<double> logits[2];
  const Matrix<float> lent("lent", g.features.extent(0), g.features.extent(1));
  Kokkos::deep_copy(lent, g.features);
  for (const bool lend : {false, true}) {
    const std::unique_ptr<Sequential> model = build_model(config, grid, RunOptions{}, true);
    GraphBatch batch = full_graph_batch(g, BatchNeeds{g.layers, false, {}});
    if (lend) batch.scratch_input = lent.data();
    const Matrix<const float> out =
        model->forward(lend ? Matrix<const float>(lent) : g.features, batch, pass);
    logits[lend] = from_view(out).a;
    Matrix<float> grad("grad", out.extent(0), out.extent(1));
    const NodeData& data = g.node_data_for(model->graph_layers());
    masked_softmax_cross_entropy<float>(out, data.labels, data.mask("train"), 1.0f / float(count), grad);
    model->backward(grad, pass);
    for (const ParameterRef& p : model->parameters())
      grads[lend].push_back(from_view(p.param->grad_matrix()).a);
  }
  EXPECT_EQ(logits[1], logits[0]);
  EXPECT_EQ(grads[1], grads[0]);
  const Dense before = from_view(g.features), after = from_view(lent);
  int64_t dropped = 0;
  for (size_t k = 0; k < after.a.size(); ++k) {
    EXPECT_TRUE(after.a[k] == 0 || after.a[k] == 2 * before.a[k]) << k;
    dropped += after.a[k] == 0 && before.a[k] != 0;
  }
  EXPECT_GT(dropped, 0);
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

// Issue 14: BatchNorm's batch statistics and RMSNorm's row scale on features whose mean is 1e4 spreads,
// against a two-pass double computation here (sum x^2 - n mean^2 in float returned garbage variances).
TEST(NormLayers, AccurateWhenTheMeanIsFarFromZero) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  const int64_t n = 64, f = 3;
  std::mt19937_64 gen(11);
  std::normal_distribution<double> spread(0.0, 1.0);
  Dense x(n, f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j) x(i, j) = double(float(1e4 + double(j) + spread(gen)));
  const Graph3D g = graph_from(grid, random_graph(n, 2 * n, 5), x, std::vector<int64_t>(size_t(n), 0),
                               std::vector<uint8_t>(size_t(n), 1), 2, Normalization::Symmetric, 1);
  for (NormKind norm : {NormKind::Batch, NormKind::Rms}) {
    SCOPED_TRACE(norm_name(norm));
    Sequential model(grid, f, RunOptions{KernelPath::Auto, 0, CommDtype::F32}, 3);
    const float eps = 1e-5f;
    if (norm == NormKind::Batch)
      model.add<BatchNorm>(NormOptions{false, 0.0f});
    else
      model.add<RmsNorm>(NormOptions{false, 0.0f});
    const GraphBatch batch = full_graph_batch(g, BatchNeeds{g.layers, false, {}});
    const Dense out = from_view(model.layer(0).forward(g.features, batch, PassInfo{true, 1, 1}));
    for (int64_t j = 0; j < f; ++j) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += x(i, j) / double(n);
      for (int64_t i = 0; i < n; ++i) var += (x(i, j) - mean) * (x(i, j) - mean) / double(n);
      for (int64_t i = 0; i < n; ++i) {
        double want = 0;
        if (norm == NormKind::Batch) {
          want = (x(i, j) - mean) / std::sqrt(var + eps);
        } else {
          double ms = 0;
          for (int64_t k = 0; k < f; ++k) ms += x(i, k) * x(i, k) / double(f);
          want = x(i, j) / std::sqrt(ms + eps);
        }
        ASSERT_NEAR(out(i, j), want, 2e-2 * (1.0 + std::abs(want))) << "row " << i << " column " << j;
      }
    }
  }
}

TEST(AdamSettings, RejectsNonFiniteAndNegativeValues) {
  const float nan = std::nanf(""), inf = HUGE_VALF;
  EXPECT_NO_THROW(AdamSettings().validate());
  for (float lr : {nan, inf, -0.01f}) {
    AdamSettings a;
    a.lr = lr;
    EXPECT_THROW(a.validate(), Error) << lr;
    EXPECT_THROW(Adam(std::vector<Parameter*>{}, a), Error) << "the library's own entry checks too";
  }
  for (float wd : {nan, inf, -1.0f}) {
    AdamSettings a;
    a.weight_decay = wd;
    EXPECT_THROW(a.validate(), Error) << wd;
  }
  AdamSettings b;
  b.beta2 = 1.0f;
  EXPECT_THROW(b.validate(), Error);
}

// A run that diverges stops at the epoch where the loss or the parameters stop being finite, on every rank
// alike, before the epoch is recorded.
TEST(Trainer, DivergenceStopsTheRunNamingTheEpoch) {
  TrainOptions o;
  SynthOptions g;
  g.num_nodes = 200;
  g.num_edges = 800;
  g.seed = 9;
  o.data = fixtures::synthetic_file("diverge200.h5", g);
  o.trainer.optimizer.lr = 1e30f;
  o.trainer.epochs = 5;
  o.outputs.quiet = true;
  try {
    run_training(o, Communicator::world());
    FAIL() << "a learning rate of 1e30 trained five epochs";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("diverged at epoch 1: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(no checkpoint was written)"), std::string::npos) << e.what();
  }
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
  o.trainer.epochs = epochs;
  o.outputs.quiet = true;
  return o;
}

}  // namespace

TEST(Trainer, SameSeedGivesBitIdenticalLosses) {
  const Communicator world = Communicator::world();
  const fixtures::RunWithWeights a = fixtures::run_training_with_weights(small_run(30), world),
                                 b = fixtures::run_training_with_weights(small_run(30), world);
  ASSERT_EQ(a.history.size(), 30u);
  for (size_t e = 0; e < a.history.size(); ++e) {
    EXPECT_EQ(a.history[e].loss, b.history[e].loss) << "epoch " << e + 1;
    EXPECT_EQ(a.history[e].valid_acc, b.history[e].valid_acc);
  }
  EXPECT_EQ(a.final_weights, b.final_weights);
  EXPECT_LT(a.history.back().loss, a.history.front().loss);  // and it learns
  TrainOptions other = small_run(30);
  other.model.seed = 5;
  EXPECT_NE(run_training(other, world).history.back().loss, a.history.back().loss);
}

TEST(Trainer, ResumeFromHalfwayGivesIdenticalFinalWeights) {
  const Communicator world = Communicator::world();
  const fixtures::RunWithWeights straight = fixtures::run_training_with_weights(small_run(200), world);
  TrainOptions first = small_run(100);
  first.checkpoint.dir = scratch_dir();
  first.checkpoint.every = 50;
  run_training(first, world);
  TrainOptions second = small_run(200);
  second.checkpoint.dir = scratch_dir();
  second.checkpoint.resume = true;
  const fixtures::RunWithWeights resumed = fixtures::run_training_with_weights(second, world);
  ASSERT_EQ(resumed.history.size(), 100u);
  EXPECT_EQ(resumed.history.front().epoch, 101);
  EXPECT_EQ(resumed.final_weights, straight.final_weights);
  EXPECT_EQ(resumed.history.back().loss, straight.history.back().loss);
  EXPECT_EQ(resumed.best_epoch, straight.best_epoch);
  EXPECT_EQ(resumed.test_at_best, straight.test_at_best);
}

// Early stopping counts evaluations without a new best: with lr = 0 (and no BatchNorm, whose running
// statistics would still move) nothing improves after epoch 1.
TEST(Trainer, EarlyStoppingAfterPatienceEvaluations) {
  TrainOptions o = small_run(50);
  o.trainer.optimizer.lr = 0;
  o.model.norm = NormKind::None;
  o.patience = 2;
  const TrainResult r = run_training(o, Communicator::world());
  ASSERT_EQ(r.history.size(), 3u);
  EXPECT_EQ(r.best_epoch, 1);
}

// The GAT paper's selection, replayed here from the run's own validation accuracies and losses: progress is
// an accuracy at least the highest or a loss at most the lowest; the best, the last evaluation where both
// held; the run stops after `patience` evaluations without progress. A resumed run selects and stops alike.
TEST(Trainer, AccuracyAndLossSelection) {
  TrainOptions o = small_run(300);
  o.model.norm = NormKind::None;
  o.model.dropout = o.model.input_dropout = 0.5f;
  o.trainer.optimizer.lr = 0.05f;  // over-fits: the validation loss turns
  o.trainer.selection = Selection::AccuracyAndLoss;
  o.patience = 6;
  const TrainResult r = run_training(o, Communicator::world());
  double max_acc = -1, min_loss = 1e300;
  int64_t best = -1, quiet = 0, stop = -1;
  for (const EpochRecord& e : r.history) {
    const bool acc = e.valid_acc >= max_acc, loss = e.valid_loss <= min_loss;
    max_acc = std::max(max_acc, e.valid_acc), min_loss = std::min(min_loss, e.valid_loss);
    if (acc && loss) best = e.epoch;
    quiet = acc || loss ? 0 : quiet + 1;
    EXPECT_EQ(e.best, acc && loss) << "epoch " << e.epoch;
    if (quiet == o.patience) {
      stop = e.epoch;
      break;
    }
  }
  EXPECT_EQ(r.best_epoch, best);
  EXPECT_EQ(r.epochs_done, stop < 0 ? o.trainer.epochs : stop);
  EXPECT_GT(stop, 0) << "the patience never ran out: the test shows nothing of it";
  // Resumed from a checkpoint of an earlier epoch: the same best and the same stop.
  const std::string dir = fixtures::scratch_dir() + "/selection";
  TrainOptions first = o;
  first.trainer.epochs = std::max<int64_t>(r.best_epoch - 1, 1);
  first.checkpoint.dir = dir;
  run_training(first, Communicator::world());
  TrainOptions rest = o;
  rest.checkpoint.dir = dir;
  rest.checkpoint.resume = true;
  const TrainResult resumed = run_training(rest, Communicator::world());
  EXPECT_EQ(resumed.best_epoch, r.best_epoch);
  EXPECT_EQ(resumed.epochs_done, r.epochs_done);
  EXPECT_EQ(resumed.test_at_best, r.test_at_best);
}

namespace {
// An application's hook: counts what it sees and stops the run after `stop_at` epochs.
struct CountingHook : TrainerHook {
  int64_t stop_at = 0, starts = 0, epochs = 0, finishes = 0;
  double last_loss = 0;
  void on_start(Trainer&) override { ++starts; }
  bool on_epoch(Trainer& trainer, const EpochRecord& r) override {
    ++epochs;
    last_loss = r.loss;
    return trainer.progress().epochs_done < stop_at;
  }
  void on_finish(Trainer&) override { ++finishes; }
};

// 40 nodes, 6 features, 3 classes, every node labelled and in the training set, for 2-layer models.
Graph3D forty_node_graph(const ProcessGrid& grid) {
  const auto in = random_graph(40, 120, 3);
  std::mt19937_64 gen(2);
  std::vector<int64_t> labels(40);
  for (int64_t v = 0; v < 40; ++v) labels[size_t(v)] = v % 3;
  return graph_from(grid, in, random_dense(40, 6, gen), labels, std::vector<uint8_t>(40, 1), 3,
                    Normalization::Symmetric, 2);
}
}  // namespace

// The library's pieces assembled by hand, as an application would: a graph from memory, a Sequential, a
// batch source, the trainer and a hook of its own.
TEST(Trainer, ApplicationHooksSeeEveryEpochAndCanStop) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  const Graph3D g = forty_node_graph(grid);
  Sequential model(grid, 6, RunOptions{}, 1);
  model.add<Dropout>(0.2f);
  model.add<GcnConv>(8, ConvOptions{true, true, 0.2f, false});
  model.add<GcnConv>(3);
  FullGraphSource source(g, grid, world, model);
  Trainer trainer(model, source, world, TrainerOptions{AdamSettings{}, 20, 1, 1, false});
  CountingHook& hook = trainer.emplace_hook<CountingHook>();
  hook.stop_at = 4;
  const TrainResult r = trainer.run();
  EXPECT_EQ(hook.starts, 1);
  EXPECT_EQ(hook.epochs, 4);
  EXPECT_EQ(hook.finishes, 1);
  ASSERT_EQ(r.history.size(), 4u);
  EXPECT_EQ(hook.last_loss, r.history.back().loss);
  EXPECT_EQ(model.describe(), "input dropout 0.20; gcn 6 -> 8, relu, dropout 0.20; gcn 8 -> 3");
}

namespace {
// Delivers a real signal to this process in the middle of a run, as a scheduler would.
struct RaiseAtEpoch : TrainerHook {
  int64_t epoch = 0;
  int signal = 0;
  bool on_epoch(Trainer&, const EpochRecord& r) override {
    if (r.epoch == epoch) std::raise(signal);
    return true;
  }
};
}  // namespace

namespace {
// A two-layer GCN (6 -> 5 -> 3) on forty_node_graph with its full-graph source, for the trainer's tests.
struct FortyNodeGcn {
  explicit FortyNodeGcn(const Communicator& world)
      : grid(world, GridShape{}), graph(forty_node_graph(grid)), model(grid, 6, RunOptions{}, 1) {
    model.add<GcnConv>(5);
    model.add<GcnConv>(3);
    source.emplace(graph, grid, world, model);
  }
  ProcessGrid grid;
  Graph3D graph;
  Sequential model;
  std::optional<FullGraphSource> source;
};
}  // namespace

// A signal stops the loop at the end of that epoch (stop_on_signal), the result names it, and the handler
// it replaced is back afterwards; without stop_on_signal the trainer installs nothing.
TEST(Trainer, StopSignalEndsTheRunAtTheEpochEnd) {
  const Communicator world = Communicator::world();
  FortyNodeGcn gcn(world);
  StopSignalWatch::clear();
  {
    TrainerOptions options{AdamSettings{}, 20, 1, 1, false, true};
    Trainer trainer(gcn.model, *gcn.source, world, options);
    RaiseAtEpoch& raise = trainer.emplace_hook<RaiseAtEpoch>();
    raise.epoch = 3, raise.signal = SIGUSR1;
    const TrainResult r = trainer.run();
    EXPECT_EQ(r.stop_signal, SIGUSR1);
    EXPECT_EQ(r.history.size(), 3u);
    EXPECT_EQ(trainer.stop_signal(), SIGUSR1);
    // The run consumed the signal: a second run in the same process trains every epoch.
    Trainer again(gcn.model, *gcn.source, world, options);
    const TrainResult all = again.run();
    EXPECT_EQ(all.stop_signal, 0);
    EXPECT_EQ(all.history.size(), 20u);
  }
  StopSignalWatch::clear();
  // Outside a watch SIGUSR1 has its previous disposition again: ignored here, so raising it is harmless.
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGUSR1, &ignore, &previous);
  {
    const StopSignalWatch watch;
    std::raise(SIGTERM);
    EXPECT_EQ(StopSignalWatch::received(), SIGTERM);
  }
  std::raise(SIGUSR1);  // ignored, not recorded
  EXPECT_EQ(StopSignalWatch::received(), SIGTERM);
  sigaction(SIGUSR1, &previous, nullptr);
  StopSignalWatch::clear();
  EXPECT_STREQ(stop_signal_name(SIGUSR1), "SIGUSR1");
}

namespace {
// Reads the epochs a checkpoint on disk records, while a later hook sees the epoch.
struct CheckpointOnDisk : TrainerHook {
  std::string path;
  std::vector<int64_t> seen;  // the checkpoint's epochs_done at each epoch's on_epoch (-1: none yet)
  bool on_epoch(Trainer&, const EpochRecord&) override {
    int64_t done = -1;
    H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (file.valid()) h5_read_attr(file.get(), "epochs_done", done);
    seen.push_back(done);
    return true;
  }
};
}  // namespace

// A checkpoint is saved after every hook has seen the epoch: a job killed between a hook's record of epoch
// 10 (a metrics line) and the checkpoint of epoch 10 resumes from 5 and records 6-10 again, never loses 10.
TEST(Trainer, CheckpointIsSavedAfterEveryHookSawTheEpoch) {
  const Communicator world = Communicator::world();
  FortyNodeGcn gcn(world);
  TrainerOptions options;
  options.epochs = 11;
  Trainer trainer(gcn.model, *gcn.source, world, options);
  CheckpointOptions c;
  c.dir = scratch_dir() + "/order";
  c.every = 5;
  mkdir(c.dir.c_str(), 0755);
  trainer.add_hook(std::make_unique<Checkpointer>(c));
  CheckpointOnDisk& later = trainer.emplace_hook<CheckpointOnDisk>();
  later.path = Checkpointer::path_in(c.dir);
  trainer.run();
  ASSERT_EQ(later.seen.size(), 11u);
  EXPECT_EQ(later.seen[4], -1) << "epoch 5's checkpoint was saved before a later hook saw epoch 5";
  EXPECT_EQ(later.seen[5], 5);
  EXPECT_EQ(later.seen[9], 5) << "epoch 10's checkpoint was saved before a later hook saw epoch 10";
  EXPECT_EQ(later.seen[10], 10);
}

TEST(Checkpoint, RunDifferencesNameEachKeyWithBothValues) {
  const nlohmann::json saved = {{"lr", 0.01}, {"mode", "full"}, {"graph_fingerprint", "ab"}};
  const nlohmann::json now = {{"lr", 0.1}, {"mode", "full"}, {"dropout", 0.5}};
  const std::vector<std::string> d = run_differences(saved, now);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], "dropout 0.5 (checkpoint: (none))");
  EXPECT_EQ(d[1], "graph_fingerprint (none) (checkpoint: ab)");
  EXPECT_EQ(d[2], "lr 0.1 (checkpoint: 0.01)");
  EXPECT_TRUE(run_differences(now, now).empty());
}

// Resumed from any epoch, a run is the same run: the best-validation parameters come back from the
// checkpoint (node outputs byte-identical), and so do the evaluations since the best (early stopping).
TEST(Trainer, ResumedRunWritesTheStraightRunsOutputsAndStopsAtTheSameEpoch) {
  const Communicator world = Communicator::world();
  const std::string dir = scratch_dir() + "/same-run";
  const auto outputs = [&](const std::string& tag, int64_t epochs, bool resume) {
    TrainOptions o = small_run(epochs);
    o.trainer.optimizer.lr = 0.05f;
    o.patience = 4;
    o.checkpoint.dir = dir + "/ck-" + tag;
    o.checkpoint.resume = resume;
    o.outputs.predictions = dir + "/p-" + tag + ".txt";
    o.outputs.embeddings = dir + "/e-" + tag + ".h5";
    return run_training(o, world);
  };
  const TrainResult straight = outputs("a", 200, false);
  ASSERT_LT(straight.epochs_done, 200) << "the patience must end the straight run early";
  ASSERT_LT(straight.best_epoch, straight.epochs_done);
  for (int64_t stop : {straight.best_epoch, straight.epochs_done - 1}) {
    const std::string tag = "b" + std::to_string(stop);
    outputs(tag, stop, false);
    const TrainResult resumed = outputs(tag, 200, true);
    EXPECT_EQ(resumed.epochs_done, straight.epochs_done) << "stopped at " << stop;
    EXPECT_EQ(resumed.best_epoch, straight.best_epoch);
    EXPECT_EQ(resumed.test_at_best, straight.test_at_best);
    for (const char* kind : {"/p-", "/e-"}) {
      const std::string ext = kind[1] == 'p' ? ".txt" : ".h5";
      std::ifstream a(dir + kind + "a" + ext, std::ios::binary), b(dir + kind + tag + ext, std::ios::binary);
      const std::string bytes_a((std::istreambuf_iterator<char>(a)), {}),
          bytes_b((std::istreambuf_iterator<char>(b)), {});
      EXPECT_FALSE(bytes_a.empty());
      EXPECT_TRUE(bytes_a == bytes_b) << kind << " differs after a stop at epoch " << stop;
    }
  }
}

TEST(Trainer, ResumeWithOtherSettingsIsRefusedUnlessForced) {
  const Communicator world = Communicator::world();
  TrainOptions o = small_run(3);
  o.checkpoint.dir = scratch_dir() + "/settings";
  run_training(o, world);
  TrainOptions other = o;
  other.trainer.epochs = 5;
  other.checkpoint.resume = true;
  other.trainer.optimizer.lr = 0.05f;
  std::string message;
  try {
    run_training(other, world);
  } catch (const CollectiveError& e) {
    message = e.what();
  }
  EXPECT_NE(
      message.find("this run differs from the one that wrote the checkpoint: lr 0.05 (checkpoint: 0.01)"),
      std::string::npos)
      << message;
  other.checkpoint.accept_run_differences = true;
  EXPECT_EQ(run_training(other, world).epochs_done, 5);
}

TEST(Trainer, WritesMetricsAndPredictions) {
  TrainOptions o = small_run(5);
  o.outputs.metrics = scratch_dir() + "/metrics.jsonl";
  o.outputs.predictions = scratch_dir() + "/predictions.txt";
  run_training(o, Communicator::world());
  std::ifstream metrics(o.outputs.metrics), predictions(o.outputs.predictions);
  std::string line;
  ASSERT_TRUE(std::getline(metrics, line));
  const nlohmann::json header = nlohmann::json::parse(line);
  EXPECT_EQ(header["kind"], "header");
  EXPECT_EQ(header["mode"], "full");
  EXPECT_EQ(header["ranks"], Communicator::world().size());
  EXPECT_EQ(header["dataset"]["nodes"], 600);
  int lines = 0;
  while (std::getline(metrics, line)) {
    ++lines;
    const nlohmann::json r = nlohmann::json::parse(line);
    EXPECT_EQ(r["kind"], "epoch");
    EXPECT_EQ(r["mode"], "full");
    EXPECT_EQ(r["epoch"], lines);
    EXPECT_TRUE(r.contains("valid_acc") && r.contains("valid_loss") && r.contains("throughput")) << line;
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
  o.checkpoint.dir = dir;
  run_training(o, world);
  auto message = [&](TrainOptions run) {
    try {
      run_training(run, world);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  TrainOptions wider = o;
  wider.model.hidden = 16;
  wider.checkpoint.resume = true;
  wider.trainer.epochs = 6;
  EXPECT_NE(message(wider).find(
                "written for model gcn 2x8 (in 12, out 4, norm batch), but this run builds gcn 2x16"),
            std::string::npos)
      << message(wider);
  {  // one rank (RANKS 1): a progress no run can have written
    H5Handle file(H5Fopen((dir + "/checkpoint.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(file.valid());
    h5_write_attr(file.get(), "epochs_done", int64_t(-3));
  }
  TrainOptions negative = o;
  negative.checkpoint.resume = true;
  negative.trainer.epochs = 6;
  EXPECT_NE(message(negative).find("checkpoint records -3 epochs done"), std::string::npos)
      << message(negative);
  {
    std::ofstream corrupt(dir + "/checkpoint.h5", std::ios::trunc);
    corrupt << "garbage";
  }
  TrainOptions resume = o;
  resume.checkpoint.resume = true;
  resume.trainer.epochs = 6;
  EXPECT_NE(message(resume).find("cannot open the checkpoint"), std::string::npos) << message(resume);
  TrainOptions none = small_run(3);
  none.model.layers = 0;
  EXPECT_EQ(message(none), "`layers` must be in [1, 256], not 0");  // the program words it --layers
  TrainOptions missing = small_run(3);
  missing.data = dir + "/nothing.h5";
  EXPECT_NE(message(missing).find("cannot read"), std::string::npos);
}

// A graph layer's dropout outside [0, 1) is refused with its value, as the Dropout and norm layers refuse it
// (a negative rate would scale every kept value by less than one).
TEST(GraphConv, DropoutOutsideZeroToOneIsRefused) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{});
  for (const float rate : {-0.5f, 1.0f}) {
    Sequential model(grid, 4);
    ConvOptions options;
    options.dropout = rate;
    try {
      model.add<GcnConv>(3, options);
      ADD_FAILURE() << "dropout " << rate << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dropout must be in [0, 1), not "), std::string::npos) << e.what();
    }
  }
}
