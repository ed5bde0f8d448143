// SPDX-License-Identifier: BSD-3-Clause
// Accuracy on Cora with the GCN paper's setup (Kipf & Welling 2017: 2 layers, 16 hidden, dropout 0.5, lr
// 0.01, weight decay 5e-4, 200 epochs, row-normalized features), 10 seeds; test accuracy at the
// best-validation epoch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "support/fixtures.hpp"
#include "tessera/graph/ogb.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/models/train.hpp"

using namespace tessera;

namespace {

std::string cora_file() {
  static std::string path;
  if (!path.empty()) return path;
  const std::string dir = TESSERA_SHARED_DIR "/datasets/cora";
  if (access((dir + "/raw/edge.csv.gz").c_str(), R_OK) != 0) return "";
  char scratch[] = "/tmp/tessera-accuracy-XXXXXX";
  OgbConvertOptions o;
  o.dataset_dir = dir;
  o.output = std::string(mkdtemp(scratch)) + "/cora.h5";
  o.symmetrize = true;
  convert_ogb(o, Communicator(MPI_COMM_SELF, false, nullptr));
  path = o.output;
  return path;
}

// Mini-batches of half the nodes on the 1x1x1x1 grid, otherwise the same run.
TrainOptions half_batches(TrainOptions o) {
  o.mode = TrainMode::Minibatch;
  o.grid.shape = GridShape{};
  o.minibatch.batch_fraction = 0.5;
  return o;
}

// Test accuracy at the best-validation epoch of a full-graph run on the 1x1x1 grid. Runs are deterministic
// (same options, same bits), so a run both the paper-accuracy and the mini-batch tests need is trained once.
double full_graph_test_accuracy(const TrainOptions& o) {
  static std::map<std::string, double> done;
  const std::string key = run_identity(o, 1).dump() + o.data + "|" + std::to_string(o.model.seed) + "|" +
                          model_kind_name(o.model.kind) + "|" + std::to_string(o.model.hidden) + "|" +
                          std::to_string(o.trainer.epochs) + "|" + std::to_string(o.model.layers);
  const auto found = done.find(key);
  if (found != done.end()) return found->second;
  return done[key] = run_training(o, Communicator::world()).test_at_best;
}

// Mean test accuracy (at the best-validation epoch) of full-graph and mini-batch training over `seeds`.
std::pair<double, double> full_and_minibatch(const std::vector<TrainOptions>& full,
                                             const std::vector<TrainOptions>& minibatch, const char* what) {
  double a = 0, b = 0;
  for (size_t k = 0; k < full.size(); ++k) {
    const double fa = full_graph_test_accuracy(full[k]);
    const double mb = run_training(minibatch[k], Communicator::world()).test_at_best;
    std::printf("%s seed %llu: full-graph %.4f, mini-batch %.4f\n", what,
                (unsigned long long)full[k].model.seed, fa, mb);
    a += fa / double(full.size());
    b += mb / double(full.size());
  }
  std::printf("%s mean: full-graph %.4f, mini-batch %.4f\n", what, a, b);
  return {a, b};
}

double mean_test_accuracy(ModelKind kind, GemmDtype gemm = GemmDtype::F32) {
  double sum = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    TrainOptions o = fixtures::paper_setup(cora_file(), seed);
    o.model.kind = kind;
    o.compute.gemm_dtype = gemm;
    const double test = full_graph_test_accuracy(o);
    std::printf("%s %s seed %llu: test %.4f at the best-validation epoch\n", model_kind_name(kind),
                gemm_dtype_name(gemm), (unsigned long long)seed, test);
    sum += test;
  }
  std::printf("%s %s mean test accuracy over 10 seeds: %.4f\n", model_kind_name(kind), gemm_dtype_name(gemm),
              sum / 10);
  set_gemm_dtype(GemmDtype::F32);  // run_training set it process-wide
  return sum / 10;
}

}  // namespace

TEST(CoraAccuracy, GcnReachesThePapersAccuracy) {
  if (cora_file().empty()) GTEST_SKIP() << "skipped: " TESSERA_SHARED_DIR "/datasets/cora is absent";
  EXPECT_GE(mean_test_accuracy(ModelKind::Gcn), 0.805);
}

// --gemm-dtype bf16 (both GEMM operands rounded to bf16, fp32 sums): the same bar as fp32.
TEST(CoraAccuracy, GcnWithBf16Gemms) {
  if (cora_file().empty()) GTEST_SKIP() << "skipped: " TESSERA_SHARED_DIR "/datasets/cora is absent";
  if (!bf16_gemm_available())
    GTEST_SKIP() << "skipped: no oneDNN in this build, or no bf16 matmul on this CPU";
  EXPECT_GE(mean_test_accuracy(ModelKind::Gcn, GemmDtype::Bf16), 0.805);
}

TEST(CoraAccuracy, GraphSage) {
  if (cora_file().empty()) GTEST_SKIP() << "skipped: " TESSERA_SHARED_DIR "/datasets/cora is absent";
  EXPECT_GE(mean_test_accuracy(ModelKind::Sage), 0.79);
}

// docs/architecture.md §5: mini-batch training (uniform vertex samples of half the graph, 1x1x1x1 grid)
// within 2 points of full-graph training on Cora, same hyperparameters, 5 seeds.
TEST(MinibatchAccuracy, CoraWithinTwoPointsOfFullGraph) {
  if (cora_file().empty()) GTEST_SKIP() << "skipped: " TESSERA_SHARED_DIR "/datasets/cora is absent";
  std::vector<TrainOptions> full, minibatch;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    full.push_back(fixtures::paper_setup(cora_file(), seed));
    minibatch.push_back(half_batches(fixtures::paper_setup(cora_file(), seed)));
  }
  const auto [a, b] = full_and_minibatch(full, minibatch, "cora");
  EXPECT_NEAR(b, a, 0.02);
}

// The same for GraphSAGE: its root term runs on the self blocks cut from each sample.
TEST(MinibatchAccuracy, CoraSageWithinTwoPointsOfOneRank) {
  if (cora_file().empty()) GTEST_SKIP() << "skipped: " TESSERA_SHARED_DIR "/datasets/cora is absent";
  std::vector<TrainOptions> full, minibatch;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    TrainOptions o = fixtures::paper_setup(cora_file(), seed);
    o.model.kind = ModelKind::Sage;
    full.push_back(o);
    minibatch.push_back(half_batches(o));
  }
  const auto [a, b] = full_and_minibatch(full, minibatch, "cora sage");
  EXPECT_NEAR(b, a, 0.02);
}

// ... and within 1 point on a generated contextual SBM (4,000 nodes, 8 classes). Sampling regularizes on
// its own: the mini-batch runs use no dropout (with 0.5 they trail by about 1.2 points; see
// docs/guide/minibatch.md).
TEST(MinibatchAccuracy, CsbmWithinOnePointOfFullGraph) {
  char scratch[] = "/tmp/tessera-accuracy-XXXXXX";
  const std::string path = std::string(mkdtemp(scratch)) + "/csbm.h5";
  SynthOptions g;
  g.num_nodes = 4000;
  g.num_edges = 20000;
  generate_synthetic(g, path, Communicator::world());
  std::vector<TrainOptions> full, minibatch;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    TrainOptions o = fixtures::paper_setup(path, seed);
    o.model.hidden = 32;
    o.trainer.epochs = 100;
    o.normalize_features = false;
    full.push_back(o);
    o.model.dropout = o.model.input_dropout = 0.0f;
    minibatch.push_back(half_batches(o));
  }
  const auto [a, b] = full_and_minibatch(full, minibatch, "csbm");
  EXPECT_NEAR(b, a, 0.01);
}
