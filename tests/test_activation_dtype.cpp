// SPDX-License-Identifier: BSD-3-Clause
// bf16 activations (RunOptions::activation_dtype): a GCN or GraphSAGE layer that aggregates first keeps A H
// rounded to bf16 for its weight gradient, and nothing else changes. The layer itself is checked against the
// dense double reference with the kept values rounded (test_models, LayerGradients); here the runs on every
// grid of the job's ranks, in the three modes: a full-graph step's forward is the fp32 run's bit for bit
// and its weight gradients are within bf16's rounding of fp32's (each kept value is off by at most 2^-9 of
// itself; the bound asked is 2^-7 of the largest gradient, the printed differences far under it); trained
// on, the losses stay within 1% of fp32's. With bf16 GEMMs the run is fp32 activations' bit for bit. Also
// one-row blocks and ranks without rows, and resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/models/train.hpp"

using namespace tessera;

namespace {

const Communicator& world() {
  static const Communicator w = Communicator::world();
  return w;
}

using fixtures::relative_difference;

// 3 layers of 10 over the small CSBM's 11 features: on every grid some layer aggregates first.
TrainOptions options(TrainMode mode, ModelKind kind, const std::string& data) {
  TrainOptions o = fixtures::paper_setup(data, 3);
  o.mode = mode;
  o.model.kind = kind;
  o.model.layers = 3;
  o.model.hidden = 10;
  o.trainer.epochs = 3;
  o.minibatch.batch_size = 24;
  o.outputs.quiet = true;
  return o;
}

std::string name_of(ModelKind kind, const GridShape& shape) {
  return std::string(model_kind_name(kind)) + " grid " + shape.str();
}

// The run `o` describes with fp32 activations, then with bf16 activations.
std::pair<fixtures::RunWithWeights, fixtures::RunWithWeights> fp32_and_bf16_activations(TrainOptions o) {
  fixtures::RunWithWeights fp32 = fixtures::run_training_with_weights(o, world());
  o.compute.activation_dtype = StorageDtype::Bf16;
  return {std::move(fp32), fixtures::run_training_with_weights(o, world())};
}

// One full-graph step in fp32 and with bf16 activations: the same logits, gradients within the bound and
// not all equal (the rounding is not vacuous). Returns the gradients' relative difference.
double expect_one_step_rounded(TrainOptions o) {
  o.trainer.epochs = 1;
  o.trainer.keep_last_step = true;
  const auto [fp32, bf16] = fp32_and_bf16_activations(o);
  EXPECT_FALSE(fp32.last_logits.empty());
  EXPECT_EQ(bf16.last_logits, fp32.last_logits);
  const double gradients = relative_difference(bf16.last_gradients, fp32.last_gradients);
  EXPECT_GT(gradients, 0.0);
  EXPECT_LT(gradients, 1.0 / 128);
  return gradients;
}

// Trained on: every epoch's loss within 1% of fp32's, the final weights within 1%, and not the same run.
double expect_trained_close(TrainOptions o) {
  const auto [fp32, bf16] = fp32_and_bf16_activations(o);
  EXPECT_EQ(bf16.history.size(), fp32.history.size());
  for (size_t e = 0; e < std::min(bf16.history.size(), fp32.history.size()); ++e)
    EXPECT_NEAR(bf16.history[e].loss, fp32.history[e].loss, 1e-2 * fp32.history[e].loss) << "epoch " << e + 1;
  const double weights = relative_difference(bf16.final_weights, fp32.final_weights);
  EXPECT_GT(weights, 0.0);
  EXPECT_LT(weights, 1e-2);
  return weights;
}

}  // namespace

TEST(ActivationDtype, AFullGraphStepChangesOnlyTheWeightGradientsOnEveryGrid) {
  for (const GridShape& shape : ProcessGrid::factorizations(world().size(), false))
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage}) {
      SCOPED_TRACE(name_of(kind, shape));
      TrainOptions o = options(TrainMode::Full, kind, fixtures::small_csbm_file());
      o.grid.shape = shape;
      const double gradients = expect_one_step_rounded(o);
      const double weights = expect_trained_close(o);
      if (world().rank() == 0)
        std::printf(
            "bf16 activations vs fp32, full graph, %s: first step's gradients %.2e, weights after "
            "3 epochs %.2e relative\n",
            name_of(kind, shape).c_str(), gradients, weights);
    }
}

namespace {

// Nine nodes: one-row blocks, padding rows and ranks without a row of the graph.
std::string nine_node_file() {
  SynthOptions nine;
  nine.num_nodes = 9;
  nine.num_edges = 16;
  nine.num_features = 3;
  nine.num_classes = 2;
  nine.seed = 2;
  return fixtures::synthetic_file("activation-nine.h5", nine);
}

// With bf16 GEMMs the run under bf16 activations is the fp32-activations run's, bit for bit.
void expect_bf16_gemm_run_unchanged(TrainOptions o) {
  o.compute.gemm_dtype = GemmDtype::Bf16;
  o.trainer.keep_last_step = true;
  const auto [fp32, bf16] = fp32_and_bf16_activations(o);
  EXPECT_FALSE(fp32.last_gradients.empty());
  EXPECT_EQ(bf16.last_logits, fp32.last_logits);
  EXPECT_EQ(bf16.last_gradients, fp32.last_gradients);
  EXPECT_EQ(bf16.final_weights, fp32.final_weights);
  ASSERT_EQ(bf16.history.size(), fp32.history.size());
  for (size_t e = 0; e < fp32.history.size(); ++e) EXPECT_EQ(bf16.history[e].loss, fp32.history[e].loss);
}

}  // namespace

// With bf16 GEMMs, which round A H to bf16 themselves, bf16 activations change no number: the forward's
// GEMM reads the bits the layer keeps (rounded once) and so does the weight gradient's (not widened), and
// the run is the fp32-activations run's bit for bit on every grid, the nine-node graph's too, and in
// mini-batch steps of 2 seeds.
TEST(ActivationDtype, WithBf16GemmsTheRunIsTheFp32ActivationsRunBitForBit) {
  if (!bf16_gemm_available())
    GTEST_SKIP() << "skipped: no oneDNN in this build, or no bf16 matmul on this CPU";
  const std::string tiny = nine_node_file();
  for (const GridShape& shape : ProcessGrid::factorizations(world().size(), false)) {
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage}) {
      SCOPED_TRACE(name_of(kind, shape));
      TrainOptions o = options(TrainMode::Full, kind, fixtures::small_csbm_file());
      o.grid.shape = shape;
      expect_bf16_gemm_run_unchanged(o);
    }
    SCOPED_TRACE("nine nodes " + shape.str());
    TrainOptions o = options(TrainMode::Full, ModelKind::Gcn, tiny);
    o.grid.shape = shape;
    expect_bf16_gemm_run_unchanged(o);
  }
  SCOPED_TRACE("mini-batch of 2");
  TrainOptions o = options(TrainMode::Minibatch, ModelKind::Gcn, fixtures::small_csbm_file());
  o.minibatch.batch_size = 2;
  o.minibatch.steps_per_epoch = 4;
  o.grid.shape = GridShape{world().size(), 1, 1, 1};
  expect_bf16_gemm_run_unchanged(o);
  set_gemm_dtype(GemmDtype::F32);  // run_training set it process-wide
}

// Nine nodes: one-row blocks, padding rows and ranks without a row of the graph; with bf16 features too.
TEST(ActivationDtype, NearlyEmptyBlocksOnEveryGrid) {
  const std::string tiny = nine_node_file();
  for (const GridShape& shape : ProcessGrid::factorizations(world().size(), false))
    for (StorageDtype features : {StorageDtype::F32, StorageDtype::Bf16}) {
      SCOPED_TRACE(shape.str() + " features " + storage_dtype_name(features));
      TrainOptions o = options(TrainMode::Full, ModelKind::Gcn, tiny);
      o.feature_dtype = features;
      o.model.input_dropout = 0.5f;
      o.grid.shape = shape;
      expect_one_step_rounded(o);
    }
}

// Mini-batch steps on every grid with replicas, and batches of 2 seeds (most ranks of a step hold none).
TEST(ActivationDtype, MinibatchRunsStayCloseOnEveryGrid) {
  for (const GridShape& shape : ProcessGrid::factorizations(world().size(), true))
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage}) {
      SCOPED_TRACE(name_of(kind, shape));
      TrainOptions o = options(TrainMode::Minibatch, kind, fixtures::small_csbm_file());
      o.grid.shape = shape;
      expect_trained_close(o);
    }
  TrainOptions o = options(TrainMode::Minibatch, ModelKind::Gcn, fixtures::small_csbm_file());
  o.minibatch.batch_size = 2;
  o.grid.shape = GridShape{world().size(), 1, 1, 1};
  expect_trained_close(o);
}

// A sampled step's layers keep their aggregation within the step: the same rounding there.
TEST(ActivationDtype, SampledRunsStayClose) {
  for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage}) {
    SCOPED_TRACE(model_kind_name(kind));
    TrainOptions o = options(TrainMode::Sampled, kind, fixtures::small_csbm_file());
    o.sampled.batch_size = 16;
    o.sampled.fanouts = {4, 4, 4};
    expect_trained_close(o);
  }
}

// A checkpoint keeps the dtype: resuming continues bit for bit, and an fp32 resume is refused.
TEST(ActivationDtype, ResumeContinuesBitForBit) {
  TrainOptions o = options(TrainMode::Full, ModelKind::Sage, fixtures::small_csbm_file());
  o.compute.activation_dtype = StorageDtype::Bf16;
  o.trainer.epochs = 4;
  const fixtures::RunWithWeights straight = fixtures::run_training_with_weights(o, world());
  o.checkpoint.dir = fixtures::scratch_dir() + "/activation-bf16-resume";
  o.trainer.epochs = 2;
  run_training(o, world());
  o.checkpoint.resume = true;
  o.trainer.epochs = 4;
  const fixtures::RunWithWeights resumed = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(resumed.history.size(), 2u);
  for (size_t e = 0; e < 2; ++e) EXPECT_EQ(resumed.history[e].loss, straight.history[e + 2].loss);
  EXPECT_EQ(resumed.final_weights, straight.final_weights);
  o.compute.activation_dtype = StorageDtype::F32;
  EXPECT_THROW(run_training(o, world()), std::exception) << "resumed with fp32 activations";
}

// A GAT keeps its activations in fp32: asking for bf16 is refused before the load, naming the option.
TEST(ActivationDtype, GatIsRefused) {
  TrainOptions o = options(TrainMode::Full, ModelKind::Gat, fixtures::small_csbm_file());
  o.compute.activation_dtype = StorageDtype::Bf16;
  try {
    run_training(o, world());
    FAIL() << "a GAT with bf16 activations ran";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("`activation-dtype` bf16 is for `model` gcn / sage"),
              std::string::npos)
        << e.what();
  }
}
