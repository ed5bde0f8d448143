// SPDX-License-Identifier: BSD-3-Clause
// bf16 features on the 3D grid (the full-graph and mini-batch modes): the input block is held as bf16 bits,
// graph layer 0's SpMM reads them (widening each as it reads it, fp32 sums) and a mini-batch step's gather
// widens its rows. So a run with bf16 features must equal, bit for bit, the fp32 run on a file whose features
// were rounded to bf16 beforehand (the reference: rounding applied to the file, not by the library) with the
// same layer order: graph layer 0 aggregating first, which a hidden width above the input's makes the fp32
// run choose too. A GAT (which transforms first) is handed the bits widened. The fp32 runs are tested
// against the dense double reference elsewhere (test_parallel3d, test_minibatch, test_gat); here every grid
// of the job's ranks, GCN, GraphSAGE and GAT, with and without input dropout.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/models/train.hpp"
#include "tessera/parallel3d/graph3d.hpp"

using namespace tessera;

namespace {

const Communicator& world() {
  static const Communicator w = Communicator::world();
  return w;
}

const std::string& original() {
  return fixtures::small_csbm_file();  // 11 features, not bf16 values
}

const std::string& rounded() {
  static const std::string path = fixtures::rounded_features_copy(original(), "grid-csbm-rounded.h5");
  return path;
}

// Hidden 16 over 11 features: graph layer 0 aggregates first in fp32 too.
TrainOptions grid_options(TrainMode mode, ModelKind kind, float input_dropout) {
  TrainOptions o;
  o.mode = mode;
  o.model.kind = kind;
  o.model.layers = 2;
  o.model.hidden = 16;
  if (kind == ModelKind::Gat) {  // 2 heads of 4 concatenated
    o.model.hidden = 4;
    o.model.heads = 2;
  }
  o.model.input_dropout = input_dropout;
  o.model.seed = 5;
  o.trainer.epochs = 3;
  o.minibatch.batch_size = 24;
  o.outputs.quiet = true;
  return o;
}

void expect_same_run(const fixtures::RunWithWeights& r, const fixtures::RunWithWeights& reference,
                     const std::string& what) {
  ASSERT_EQ(r.history.size(), reference.history.size()) << what;
  for (size_t e = 0; e < r.history.size(); ++e)
    EXPECT_EQ(r.history[e].loss, reference.history[e].loss) << what;
  EXPECT_EQ(r.final_weights, reference.final_weights) << what;
  EXPECT_EQ(r.best_valid, reference.best_valid) << what;
  EXPECT_EQ(r.test_at_best, reference.test_at_best) << what;
}

// The bf16 run of `o` on the original file against the fp32 run on the rounded file.
void expect_bf16_equals_rounded(TrainOptions o, const std::string& what) {
  o.data = rounded();
  o.feature_dtype = StorageDtype::F32;
  const fixtures::RunWithWeights reference = fixtures::run_training_with_weights(o, world());
  o.data = original();
  o.feature_dtype = StorageDtype::Bf16;
  expect_same_run(fixtures::run_training_with_weights(o, world()), reference, what);
}

std::string name_of(ModelKind kind, float input_dropout, const GridShape& shape) {
  return std::string(kind == ModelKind::Gcn    ? "gcn"
                     : kind == ModelKind::Sage ? "sage"
                                               : "gat") +
         " input dropout " + std::to_string(input_dropout) + " grid " + shape.str();
}

// The rounding is not vacuous here either: fp32 runs on the two files differ.
TEST(FeatureDtypeGrid, TheRoundedFileTrainsDifferently) {
  TrainOptions o = grid_options(TrainMode::Full, ModelKind::Gcn, 0);
  o.data = original();
  const TrainResult a = run_training(o, world());
  o.data = rounded();
  EXPECT_NE(a.history.back().loss, run_training(o, world()).history.back().loss);
}

// The block holds the bits of the fp32 block's roundings, in the same rows and columns, and no floats: rows
// read from the file as bits, or (normalized) read as fp32, normalized and rounded after.
TEST(FeatureDtypeGrid, TheBlockHoldsTheRoundedBits) {
  for (const GridShape& shape : ProcessGrid::factorizations(world().size(), false))
    for (bool normalize : {false, true}) {
      const ProcessGrid grid(world(), shape);
      const GraphFileReader reader(world(), original());
      Graph3DOptions load;
      load.normalize_features = normalize;
      const Graph3D f32 = load_graph_3d(reader, grid, load);
      load.feature_dtype = StorageDtype::Bf16;
      const Graph3D bf16 = load_graph_3d(reader, grid, load);
      EXPECT_EQ(bf16.feature_dtype, StorageDtype::Bf16);
      EXPECT_EQ(bf16.features.size(), 0u);
      const auto x = Kokkos::create_mirror_view_and_copy(HostSpace(), f32.features);
      const auto bits = Kokkos::create_mirror_view_and_copy(HostSpace(), bf16.features_bf16);
      ASSERT_EQ(bits.extent(0), x.extent(0)) << shape.str();
      ASSERT_EQ(bits.extent(1), x.extent(1)) << shape.str();
      for (size_t i = 0; i < x.extent(0); ++i)
        for (size_t j = 0; j < x.extent(1); ++j) ASSERT_EQ(bits(i, j), to_bf16(x(i, j))) << shape.str();
    }
}

// Rows an application hands over as bits go with bf16 storage only, unnormalized; refused otherwise.
TEST(FeatureDtypeGrid, RowsGivenAsBitsNeedBf16StorageWithoutNormalization) {
  const ProcessGrid grid(world(), GridShape{1, world().size(), 1, 1});
  const GraphFileReader reader(world(), original());
  const GraphRows rows = read_graph_rows(reader, world(), RowCosts{}, StorageDtype::Bf16);
  EXPECT_TRUE(rows.features.empty());
  Graph3DOptions load;
  load.feature_dtype = StorageDtype::Bf16;
  EXPECT_EQ(build_graph_3d(rows, grid, load).feature_dtype, StorageDtype::Bf16);
  load.normalize_features = true;
  EXPECT_THROW(build_graph_3d(rows, grid, load), std::exception);
  load = Graph3DOptions{};
  EXPECT_THROW(build_graph_3d(rows, grid, load), std::exception);
}

// Full graph on every grid of the job's ranks: losses, final weights and accuracies equal the rounded
// file's fp32 run (input dropout widens the bits into its masked copy; without it the aggregation of the
// bits is cached, and a GAT's evaluations and dropout-free training are handed the bits widened).
TEST(FeatureDtypeGrid, AFullGraphRunIsTheFp32RunOnRoundedFeatures) {
  for (const GridShape& shape : ProcessGrid::factorizations(world().size(), false))
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat})
      for (float input_dropout : {0.0f, 0.5f}) {
        TrainOptions o = grid_options(TrainMode::Full, kind, input_dropout);
        o.grid.shape = shape;
        expect_bf16_equals_rounded(o, name_of(kind, input_dropout, shape));
      }
}

// Nine nodes on every grid of up to 8 ranks: one-row blocks, padding rows and ranks that read no row of the
// file still make every rank's bits reads and exchanges, and the run is still the rounded file's.
TEST(FeatureDtypeGrid, NearlyEmptyBlocksStillMatch) {
  SynthOptions nine;
  nine.num_nodes = 9;
  nine.num_edges = 16;
  nine.num_features = 3;
  nine.num_classes = 2;
  nine.seed = 2;
  const std::string tiny = fixtures::synthetic_file("grid-nine.h5", nine);
  const std::string tiny_rounded = fixtures::rounded_features_copy(tiny, "grid-nine-rounded.h5");
  for (const GridShape& shape : ProcessGrid::factorizations(world().size(), false))
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Gat}) {
      TrainOptions o = grid_options(TrainMode::Full, kind, kind == ModelKind::Gat ? 0.0f : 0.5f);
      o.grid.shape = shape;
      o.data = tiny_rounded;
      const fixtures::RunWithWeights reference = fixtures::run_training_with_weights(o, world());
      o.data = tiny;
      o.feature_dtype = StorageDtype::Bf16;
      expect_same_run(fixtures::run_training_with_weights(o, world()), reference,
                      "nine nodes " + name_of(kind, o.model.input_dropout, shape));
    }
}

// Mini-batch steps gather widened rows; the evaluations run the full graph on the bits. Every grid with
// replicas too, and batches of 2 seeds (most ranks of a step hold no seed).
TEST(FeatureDtypeGrid, AMinibatchRunIsTheFp32RunOnRoundedFeatures) {
  for (const GridShape& shape : ProcessGrid::factorizations(world().size(), true))
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat}) {
      TrainOptions o = grid_options(TrainMode::Minibatch, kind, 0.5f);
      o.grid.shape = shape;
      expect_bf16_equals_rounded(o, name_of(kind, 0.5f, shape));
    }
  TrainOptions o = grid_options(TrainMode::Minibatch, ModelKind::Gcn, 0);
  o.minibatch.batch_size = 2;
  o.grid.shape = GridShape{world().size(), 1, 1, 1};
  expect_bf16_equals_rounded(o, "batches of 2");
}

// A checkpoint keeps the dtype: resuming continues bit for bit, and an fp32 resume is refused.
TEST(FeatureDtypeGrid, ResumeContinuesBitForBit) {
  TrainOptions o = grid_options(TrainMode::Full, ModelKind::Gcn, 0.5f);
  o.data = original();
  o.feature_dtype = StorageDtype::Bf16;
  o.trainer.epochs = 4;
  const fixtures::RunWithWeights straight = fixtures::run_training_with_weights(o, world());
  o.checkpoint.dir = fixtures::scratch_dir() + "/grid-bf16-resume";
  o.trainer.epochs = 2;
  run_training(o, world());
  o.checkpoint.resume = true;
  o.trainer.epochs = 4;
  const fixtures::RunWithWeights resumed = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(resumed.history.size(), 2u);
  for (size_t e = 0; e < 2; ++e) EXPECT_EQ(resumed.history[e].loss, straight.history[e + 2].loss);
  EXPECT_EQ(resumed.final_weights, straight.final_weights);
  o.feature_dtype = StorageDtype::F32;
  EXPECT_THROW(run_training(o, world()), std::exception) << "resumed with fp32 features";
}

}  // namespace
