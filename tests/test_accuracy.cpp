// SPDX-License-Identifier: BSD-3-Clause
// Accuracy on Cora with the GCN paper's setup (Kipf & Welling 2017: 2 layers, 16 hidden, dropout 0.5, lr
// 0.01, weight decay 5e-4, 200 epochs, row-normalized features), 10 seeds; test accuracy at the
// best-validation epoch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "tessera/graph/ogb.hpp"
#include "tessera/models/trainer.hpp"

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

double mean_test_accuracy(ModelKind kind) {
  double sum = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    TrainOptions o;
    o.data = cora_file();
    o.model.kind = kind;
    o.model.layers = 2;
    o.model.hidden = 16;
    o.model.dropout = o.model.input_dropout = 0.5f;
    o.model.seed = seed;
    o.optimizer.lr = 0.01f;
    o.optimizer.weight_decay = 5e-4f;
    o.epochs = 200;
    o.normalize_features = true;
    o.quiet = true;
    const TrainResult r = train_full_graph(o, Communicator::world());
    std::printf("%s seed %llu: test %.4f at best valid %.4f (epoch %lld)\n", model_kind_name(kind),
                (unsigned long long)seed, r.test_at_best, r.best_valid, (long long)r.best_epoch);
    sum += r.test_at_best;
  }
  std::printf("%s mean test accuracy over 10 seeds: %.4f\n", model_kind_name(kind), sum / 10);
  return sum / 10;
}

}  // namespace

TEST(CoraAccuracy, GcnReachesThePapersAccuracy) {
  if (cora_file().empty()) GTEST_SKIP() << "skipped: " TESSERA_SHARED_DIR "/datasets/cora is absent";
  EXPECT_GE(mean_test_accuracy(ModelKind::Gcn), 0.805);
}

TEST(CoraAccuracy, GraphSage) {
  if (cora_file().empty()) GTEST_SKIP() << "skipped: " TESSERA_SHARED_DIR "/datasets/cora is absent";
  EXPECT_GE(mean_test_accuracy(ModelKind::Sage), 0.79);
}
