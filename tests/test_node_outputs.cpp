// SPDX-License-Identifier: BSD-3-Clause
// Node outputs kept in memory (TrainOptions::keep_node_outputs, what the Python bindings return as arrays)
// are the rows the output files hold, this rank's block of node ids, in every mode; an application's hooks
// given to run_training run after the library's and can stop the run.
#include <gtest/gtest.h>

#include <fstream>

#include "support/fixtures.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/hdf5_io.hpp"
#include "tessera/models/train.hpp"

using namespace tessera;
using namespace tessera::fixtures;

namespace {

std::vector<float> embedding_rows(const std::string& path, int64_t begin, int64_t rows, int64_t& width) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  H5Handle file = h5_open_file(self, path, false);
  H5Handle data = h5_open_dataset(file.get(), path, "/embeddings");
  width = h5_shape(data.get())[1];
  std::vector<float> values(size_t(rows * width));
  h5_read_rows(data.get(), H5T_NATIVE_FLOAT, begin, rows, values.data());
  return values;
}

std::vector<int64_t> prediction_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<int64_t> out;
  for (int64_t c; in >> c;) out.push_back(c);
  return out;
}

TrainOptions run_in(TrainMode mode, const Communicator& world) {
  TrainOptions o = paper_setup(small_csbm_file(), 3);
  o.trainer.epochs = 3;
  o.mode = mode;
  if (mode == TrainMode::Full) o.grid.shape = GridShape{1, 1, world.size()};
  if (mode == TrainMode::Minibatch) {
    o.grid.shape = GridShape{world.size(), 1, 1, 1};
    o.minibatch.batch_size = 64;
  }
  if (mode == TrainMode::Sampled) {
    o.sampled.batch_size = 32;
    o.sampled.partition = "block";  // contiguous blocks of ids: no partition in the file needed
  }
  return o;
}

}  // namespace

TEST(NodeOutputs, KeptArraysAreTheFilesRowsInEveryMode) {
  const Communicator world = Communicator::world();
  for (TrainMode mode : {TrainMode::Full, TrainMode::Minibatch, TrainMode::Sampled}) {
    SCOPED_TRACE(train_mode_name(mode));
    TrainOptions o = run_in(mode, world);
    const std::string stem = scratch_dir() + "/kept-" + train_mode_name(mode);
    o.outputs.predictions = stem + ".txt";
    o.outputs.embeddings = stem + ".h5";
    o.outputs.keep_node_outputs = true;
    TrainResult r = run_training(o, world);
    ASSERT_TRUE(r.node_outputs.has_value());
    const NodeOutputArrays& kept = *r.node_outputs;
    // Block b of 301 ids over the ranks, as node_outputs.hpp's writers place them.
    const auto [begin, end] = block_range(301, world.rank(), world.size());
    EXPECT_EQ(kept.begin, begin);
    ASSERT_EQ(int64_t(kept.classes.size()), end - begin);
    int64_t width = 0;
    const std::vector<float> file_rows = embedding_rows(o.outputs.embeddings, begin, end - begin, width);
    EXPECT_EQ(kept.width, width);
    EXPECT_EQ(kept.embeddings, file_rows);
    const std::vector<int64_t> lines = prediction_lines(o.outputs.predictions);
    ASSERT_EQ(lines.size(), 301u);
    EXPECT_EQ(kept.classes, std::vector<int64_t>(lines.begin() + begin, lines.begin() + end));
    // Not asked for: nothing kept.
    o.outputs.keep_node_outputs = false;
    o.outputs.predictions = o.outputs.embeddings = "";
    EXPECT_FALSE(run_training(o, world).node_outputs.has_value());
  }
}

namespace {

// Records the epochs it sees and how many metrics lines rank 0's file held then; stops after `last`.
class StopAfter : public TrainerHook {
 public:
  StopAfter(int64_t last, std::string metrics, std::vector<int64_t>& lines)
      : last_(last), metrics_(std::move(metrics)), lines_(lines) {}
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override {
    int64_t count = 0;
    if (trainer.world().rank() == 0) {
      std::ifstream in(metrics_);
      for (std::string line; std::getline(in, line);) count += line.find("\"epoch\"") != std::string::npos;
    }
    lines_.push_back(count);
    return epoch.epoch < last_;
  }

 private:
  int64_t last_;
  std::string metrics_;
  std::vector<int64_t>& lines_;
};

}  // namespace

TEST(NodeOutputs, ApplicationHooksRunAfterTheLibrarysAndStopTheRun) {
  const Communicator world = Communicator::world();
  TrainOptions o = run_in(TrainMode::Full, world);
  o.trainer.epochs = 10;
  o.outputs.metrics = scratch_dir() + "/hooked.jsonl";
  std::vector<int64_t> lines;
  std::vector<std::unique_ptr<TrainerHook>> hooks;
  hooks.push_back(std::make_unique<StopAfter>(2, o.outputs.metrics, lines));
  const TrainResult r = run_training(o, world, std::move(hooks));
  EXPECT_EQ(r.epochs_done, 2);
  ASSERT_EQ(r.history.size(), 2u);
  if (world.rank() == 0) {
    EXPECT_EQ(lines, (std::vector<int64_t>{1, 2})) << "the metrics line came first";
  }
}
