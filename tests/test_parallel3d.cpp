// SPDX-License-Identifier: BSD-3-Clause
// 3D full-graph training (docs/architecture.md §4). Runs under mpiexec with 1, 2, 4 and 8 ranks: every
// factorization of the rank count must reproduce the one-rank run (the same layers on each rank alone, whose
// schedule has no communication; the layers themselves are checked against a dense double reference in
// test_models), and every collective must move exactly the bytes the schedule says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "reference/dense.hpp"
#include "support/allocation_count.hpp"
#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "support/predicted_bytes.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/hdf5_io.hpp"
#include "tessera/graph/ogb.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/kernels/loss.hpp"
#include "tessera/models/modes/full_graph.hpp"
#include "tessera/models/nn/conv.hpp"
#include "tessera/models/train.hpp"
#include "tessera/parallel3d/balance.hpp"
#include "tessera/parallel3d/loss3d.hpp"

using namespace tessera;

namespace {

std::string shared_dir() {
  return fixtures::scratch_dir();
}

const std::string& csbm_file() {
  return fixtures::small_csbm_file();
}

std::string cora_file() {
  static std::string path = "unset";
  if (path != "unset") return path;
  path.clear();
  const std::string dir = TESSERA_SHARED_DIR "/datasets/cora";
  if (access((dir + "/raw/edge.csv.gz").c_str(), R_OK) != 0) return path;
  const Communicator world = Communicator::world();
  OgbConvertOptions o;
  o.dataset_dir = dir;
  o.output = shared_dir() + "/cora.h5";
  o.symmetrize = true;
  world.run_on(0, [&] { convert_ogb(o, Communicator(MPI_COMM_SELF, false, nullptr)); });
  path = o.output;
  return path;
}

// The paper's setup made deeper and narrower (3 layers of 10), 3 epochs, keeping the last step.
TrainOptions run_options(const std::string& data, NormKind norm, ModelKind kind = ModelKind::Gcn) {
  TrainOptions o = fixtures::paper_setup(data, 3);
  o.model.kind = kind;
  o.model.layers = 3;
  o.model.hidden = 10;
  o.model.norm = norm;
  o.trainer.epochs = 3;
  o.trainer.keep_last_step = true;
  return o;
}

using fixtures::relative_difference;

void expect_same_run(const fixtures::RunWithWeights& got, const fixtures::RunWithWeights& reference) {
  ASSERT_EQ(got.history.size(), reference.history.size());
  for (size_t e = 0; e < got.history.size(); ++e)
    EXPECT_NEAR(got.history[e].loss, reference.history[e].loss, 1e-5 * std::abs(reference.history[e].loss))
        << "epoch " << e + 1;
  ASSERT_EQ(got.final_weights.size(), reference.final_weights.size());
  EXPECT_LT(relative_difference(got.final_weights, reference.final_weights), 1e-5);
  // The last step itself: logits of every node and every weight's gradient, before the optimizer.
  ASSERT_EQ(got.last_logits.size(), reference.last_logits.size());
  ASSERT_FALSE(reference.last_logits.empty());
  EXPECT_LT(relative_difference(got.last_logits, reference.last_logits), 1e-5);
  ASSERT_EQ(reference.last_gradients.size(), reference.final_weights.size());
  ASSERT_EQ(got.last_gradients.size(), reference.last_gradients.size());
  EXPECT_LT(relative_difference(got.last_gradients, reference.last_gradients), 1e-5);
  EXPECT_EQ(got.history.back().test_acc, reference.history.back().test_acc);
  EXPECT_EQ(got.history.back().valid_acc, reference.history.back().valid_acc);
}

}  // namespace

TEST(Permutation, IsABijectionWithItsInverse) {
  for (int64_t n : {1, 2, 5, 64, 1000, 4097}) {
    const RandomPermutation p(n, 7, 1);
    std::set<int64_t> seen;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = p(i);
      ASSERT_GE(v, 0);
      ASSERT_LT(v, n);
      ASSERT_EQ(p.inverse(v), i);
      seen.insert(v);
    }
    EXPECT_EQ(int64_t(seen.size()), n);
  }
  const RandomPermutation a(1000, 1, 1), b(1000, 1, 2), id(1000);
  int same = 0, fixed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same += a(i) == b(i);
    fixed += a(i) == i;
    EXPECT_EQ(id(i), i);
  }
  EXPECT_LT(same, 10);
  EXPECT_LT(fixed, 10);
}

TEST(Layout3D, RolesRotateAndBlocksPadEvenly) {
  EXPECT_EQ(roles_for_layer(0).a, Axis::X);
  EXPECT_EQ(roles_for_layer(1).a, Axis::Z);
  EXPECT_EQ(roles_for_layer(2).a, Axis::Y);
  EXPECT_EQ(roles_for_layer(3).c, Axis::Z);
  const Layout3D layout(GridShape{1, 2, 3, 4}, 301, {11, 10, 5}, PermuteMode::Double, 1);
  EXPECT_EQ(layout.padded_nodes(), 312);  // lcm(2, 3, 4) = 12
  EXPECT_EQ(layout.padded_dim(0), 12);
  EXPECT_EQ(layout.node_block(Axis::Y, 2), std::make_pair(int64_t(208), int64_t(312)));
  EXPECT_EQ(layout.dim_block(1, Axis::Z, 3), std::make_pair(int64_t(9), int64_t(12)));
  EXPECT_EQ(layout.num_adjacency_layouts(), 2);
}

// GCN and GraphSAGE (whose root term moves each node's row between the layer's input and output layouts
// inside the layer's collectives) on every factorization, permuted or not.
// A rank holding every class of its rows computes the loss in one pass per row (host builds), keeping up
// to 64 exponentials per row and recomputing past that: against the dense double reference with 6 classes
// in 8 columns (padding), 64 and 70 classes, unselected and unlabelled rows, and with the same gradient
// bits as the one-process kernel (masked_softmax_cross_entropy), which forms each entry the same way.
TEST(Loss3D, OneRankLossMatchesDenseAndTheKernelsBits) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  std::mt19937_64 gen(8);
  for (const auto& [classes, cols] : std::vector<std::pair<int64_t, int64_t>>{{6, 8}, {64, 64}, {70, 70}}) {
    SCOPED_TRACE(std::to_string(classes) + " classes in " + std::to_string(cols) + " columns");
    const int64_t rows = 37;
    const reference::Dense logits = reference::random_dense(rows, classes, gen, 6.0);
    reference::Dense padded(rows, cols);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) padded(i, j) = j < classes ? logits(i, j) : 100.0 * double(j);
    std::vector<int64_t> labels(rows);
    std::vector<uint8_t> mask(rows);
    HostVector<int64_t> hl("labels", rows);
    HostVector<uint8_t> hm("mask", rows);
    int64_t count = 0;
    for (int64_t i = 0; i < rows; ++i) {
      labels[size_t(i)] = i % 5 == 0 ? -1 : i % 7 == 1 ? classes - 1 : int64_t(gen() % uint64_t(classes));
      mask[size_t(i)] = i % 4 != 3;
      hl(i) = labels[size_t(i)], hm(i) = mask[size_t(i)];
      count += mask[size_t(i)] && labels[size_t(i)] >= 0;
    }
    const auto dl = Kokkos::create_mirror_view_and_copy(DeviceSpace(), hl);
    const auto dm = Kokkos::create_mirror_view_and_copy(DeviceSpace(), hm);
    reference::Dense expected;
    const double mean = reference::softmax_cross_entropy(logits, labels, mask, &expected);
    const float scale = 1.0f / float(count);
    Matrix<float> grad("grad", size_t(rows), size_t(cols));
    Kokkos::deep_copy(grad, 5.0f);  // written everywhere, padding and unselected rows included
    const auto [sum, n] = softmax_cross_entropy_3d(LogitsLayout{&self, &self, 0, classes},
                                                   reference::to_view<float>(padded), dl, dm, scale, grad);
    EXPECT_EQ(n, count);
    EXPECT_NEAR(sum / double(n), mean, 1e-6);
    const reference::Dense got = reference::from_view(grad);
    double worst = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        worst = std::max(worst, std::abs(got(i, j) - (j < classes ? expected(i, j) : 0.0)));
    EXPECT_LT(worst, 1e-6);
    Matrix<float> kernel_grad("kernel_grad", size_t(rows), size_t(classes));
    masked_softmax_cross_entropy<float>(reference::to_view<float>(logits), dl, dm, scale, kernel_grad);
    const reference::Dense kernel = reference::from_view(kernel_grad);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < classes; ++j) ASSERT_EQ(got(i, j), kernel(i, j)) << i << ", " << j;
  }
}

// The accuracy count of a rank holding every class: the hits of the lowest class index holding each row's
// maximum (ties and padding columns included) among the labelled, selected rows, as a plain loop over the
// dense logits counts them; argmax_3d gives the same classes. A training step counts its batch's hits every
// step: after the first call, counting allocates nothing.
TEST(Accuracy3D, CountsTheDenseArgmaxHitsWithoutAllocating) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  std::mt19937_64 gen(3);
  const int64_t rows = 41, classes = 6, cols = 8;
  reference::Dense logits = reference::random_dense(rows, cols, gen, 3.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = classes; j < cols; ++j) logits(i, j) = 1e3;  // padding: never a class
    if (i % 3 == 0) logits(i, 4) = logits(i, 1) = 10.0;           // a tie: the lower index wins
  }
  HostVector<int64_t> labels("labels", rows);
  HostVector<uint8_t> mask("mask", rows);
  std::vector<int64_t> expected_class(rows);
  int64_t hits = 0, counted = 0;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (logits(i, j) > logits(i, best)) best = j;
    expected_class[size_t(i)] = best;
    labels(i) = i % 5 == 0 ? -1 : i % 2 == 0 ? best : int64_t(gen() % uint64_t(classes));
    mask(i) = i % 7 != 6;
    const bool count = mask(i) != 0 && labels(i) >= 0;
    counted += count;
    hits += count && labels(i) == best;
  }
  const auto device_labels = Kokkos::create_mirror_view_and_copy(DeviceSpace(), labels);
  const auto device_mask = Kokkos::create_mirror_view_and_copy(DeviceSpace(), mask);
  const LogitsLayout layout{&self, &self, 0, classes};
  const Matrix<float> x = reference::to_view<float>(logits);
  EXPECT_EQ(count_correct_3d(layout, x, device_labels, device_mask), std::make_pair(hits, counted));
  const auto predicted = Kokkos::create_mirror_view_and_copy(HostSpace(), argmax_3d(layout, x));
  EXPECT_EQ(std::vector<int64_t>(predicted.data(), predicted.data() + rows), expected_class);
  const fixtures::AllocationCount allocations;
  EXPECT_EQ(count_correct_3d(layout, x, device_labels, device_mask), std::make_pair(hits, counted));
  EXPECT_EQ(allocations.count(), 0);
}

TEST(Train3D, EveryFactorizationReproducesTheOneRankRun) {
  const Communicator world = Communicator::world();
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  std::vector<std::string> files = {csbm_file()};
  if (!cora_file().empty()) files.push_back(cora_file());
  for (const std::string& file : files)
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage})
      for (NormKind norm : {NormKind::None, NormKind::Batch}) {
        if (norm == NormKind::Batch && (file != csbm_file() || kind == ModelKind::Sage)) continue;
        const fixtures::RunWithWeights reference =
            fixtures::run_training_with_weights(run_options(file, norm, kind), self);
        for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false))
          for (PermuteMode permute : {PermuteMode::None, PermuteMode::Double}) {
            SCOPED_TRACE(file + " " + model_kind_name(kind) + " grid " + shape.str() + " permute " +
                         permute_mode_name(permute) + " norm " + norm_name(norm));
            TrainOptions o = run_options(file, norm, kind);
            o.grid.shape = shape;
            o.grid.permute = permute;
            expect_same_run(fixtures::run_training_with_weights(o, world), reference);
            if (permute != PermuteMode::Double || norm != NormKind::None || file != csbm_file()) continue;
            o.compute.overlap = true;  // chunked SpMM with non-blocking all-reduces computes the same
            expect_same_run(fixtures::run_training_with_weights(o, world), reference);
            // The team kernels (what device builds run) compute the same, within rounding.
            o.compute.kernels = KernelPath::Team;
            expect_same_run(fixtures::run_training_with_weights(o, world), reference);
            o.compute.kernels = KernelPath::Auto;
            if (kind == ModelKind::Sage) continue;
            // bf16 on the wire: one rounding per reduction (u = 2^-8) through 3 layers and 3 steps.
            o.compute.comm_dtype = CommDtype::Bf16;
            const TrainResult bf16 = run_training(o, world);
            o.compute.overlap = false;
            const TrainResult bf16_blocking = run_training(o, world);
            EXPECT_EQ(bf16.last_logits, bf16_blocking.last_logits);  // chunking changes no bit
            for (size_t e = 0; e < bf16.history.size(); ++e)
              EXPECT_NEAR(bf16.history[e].loss, reference.history[e].loss, 1e-2 * reference.history[e].loss);
            EXPECT_LT(relative_difference(bf16.last_logits, reference.last_logits), 2e-2);
            if (world.rank() == 0)
              std::printf("bf16 vs fp32 on %s: logits %.2e, gradients %.2e relative\n", shape.str().c_str(),
                          relative_difference(bf16.last_logits, reference.last_logits),
                          relative_difference(bf16.last_gradients, reference.last_gradients));
          }
      }
}

// The fused epilogue (norm, ReLU and dropout in the norm's passes) computes exactly what the separate
// layers compute: logits, gradients and weights equal bit for bit, for BatchNorm and RMSNorm with dropout.
TEST(Train3D, FusedNormEpilogueChangesNoBit) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false))
    for (NormKind norm : {NormKind::Batch, NormKind::Rms}) {
      SCOPED_TRACE(shape.str() + " norm " + norm_name(norm));
      TrainOptions o = run_options(csbm_file(), norm);
      o.grid.shape = shape;
      const fixtures::RunWithWeights fused = fixtures::run_training_with_weights(o, world);
      o.model.fuse = false;
      const fixtures::RunWithWeights separate = fixtures::run_training_with_weights(o, world);
      EXPECT_EQ(fused.last_logits, separate.last_logits);
      EXPECT_EQ(fused.last_gradients, separate.last_gradients);
      EXPECT_EQ(fused.final_weights, separate.final_weights);
    }
}

// --recompute-aggregation: (A H) W layers aggregate again in backward instead of keeping A H, which must
// change no bit (GCN and GraphSAGE, dropout on, blocking and chunked all-reduces, every factorization).
TEST(Train3D, RecomputedAggregationChangesNoBit) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false))
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage})
      for (bool overlap : {false, true}) {
        SCOPED_TRACE(shape.str() + " " + model_kind_name(kind) + (overlap ? " overlap" : ""));
        TrainOptions o = run_options(csbm_file(), NormKind::None, kind);
        o.grid.shape = shape;
        o.compute.overlap = overlap;
        const fixtures::RunWithWeights kept = fixtures::run_training_with_weights(o, world);
        o.compute.recompute_aggregation = true;
        const fixtures::RunWithWeights recomputed = fixtures::run_training_with_weights(o, world);
        EXPECT_EQ(recomputed.last_logits, kept.last_logits);
        EXPECT_EQ(recomputed.last_gradients, kept.last_gradients);
        EXPECT_EQ(recomputed.final_weights, kept.final_weights);
      }
}

namespace {

// The schedule of docs/architecture.md §4 for one graph layer, computed from the layout alone (no collective
// over an axis of size 1), added to `expected`. With bf16 the activations and their gradients take 2 bytes an
// element; weight gradients stay fp32. `terms` is 2 for GraphSAGE (its self term doubles the sparse side).
// Returns whether the layer runs transform-first.
bool schedule_bytes(std::map<std::string, int64_t>& expected, const GridShape& shape, int l, int64_t nodes,
                    int64_t in_width, int64_t out_width, int64_t terms, bool cached_input, bool aggregated,
                    int64_t act, bool recompute = false) {
  const AxisRoles r = roles_for_layer(l);
  const int ga = shape.extent(r.a), gb = shape.extent(r.b), gc = shape.extent(r.c);
  const NodeLayout layout(shape, nodes, PermuteMode::None, 0);
  const int64_t rows_c = layout.padded_nodes() / gc, rows_a = layout.padded_nodes() / ga;
  const int64_t in = padded_width(in_width, shape), out = padded_width(out_width, shape);
  const int64_t in_b = in / gb, out_a = out / ga;
  if (gc > 1) expected["backward allreduce c (weights)"] += 4 * out_a;  // the bias
  // A narrowing layer whose input is not cached moves its full output width instead: T over b and A T over
  // a forward; the output gradient gathered over a, A^T G over c and W's gradient over a backward.
  if (!cached_input && out < in_b) {
    if (gb > 1) expected["forward allreduce b"] += act * terms * rows_a * out;
    if (ga > 1) expected["forward allreduce a"] += act * rows_c * out;
    if (ga > 1) expected["backward allgather a"] += 4 * rows_c * out_a;
    if (gc > 1) expected["backward allreduce c (inputs)"] += act * terms * rows_a * out;
    if (ga > 1) expected["backward allreduce a (weights)"] += 4 * terms * in_b * out;
    return true;
  }
  if (ga > 1 && !aggregated) expected["forward allreduce a"] += act * terms * rows_c * in_b;
  // --recompute-aggregation: backward sums A H over a again (a cached input's aggregation is kept).
  if (ga > 1 && recompute && !cached_input)
    expected["backward allreduce a (recompute)"] += act * terms * rows_c * in_b;
  if (gb > 1) expected["forward allreduce b"] += act * rows_c * out_a;
  if (gc > 1) expected["backward allreduce c (weights)"] += 4 * terms * in_b * out_a;
  if (l > 0 && ga > 1) expected["backward allreduce a"] += act * terms * rows_c * in_b;
  if (l > 0 && gc > 1) expected["backward allreduce c (inputs)"] += act * rows_a * in_b;
  return false;
}

// The bytes and kinds of every collective of the last steps, per phase.
std::map<std::string, int64_t> measured_bytes(const Communicator& world) {
  std::map<std::string, int64_t> measured;
  for (const auto& [phase, kinds] : world.stats().phases())
    for (int k = 0; k < int(Collective::Count); ++k)
      if (kinds[size_t(k)].bytes > 0) {
        const bool gather = phase == "backward allgather a";
        EXPECT_EQ(Collective(k), gather ? Collective::AllGather : Collective::AllReduce) << phase;
        measured[phase] += kinds[size_t(k)].bytes;
      }
  return measured;
}

}  // namespace

// A model composed by hand with the layer API (dims 11 -> 10 -> 6 -> 5): GCN and GraphSAGE layers, two
// training steps (the second reuses layer 0's aggregation of its cached input), every byte accounted for.
TEST(Train3D, CollectivesMoveExactlyTheScheduledBytes) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false))
    for (CommDtype dtype : {CommDtype::F32, CommDtype::Bf16})
      for (bool sage : {false, true})
        for (bool recompute : {false, true}) {
          if (recompute && dtype == CommDtype::Bf16) continue;
          SCOPED_TRACE(shape.str() + " " + comm_dtype_name(dtype) + (sage ? " sage" : " gcn") +
                       (recompute ? " recompute" : ""));
          const ProcessGrid grid(world, shape);
          const GraphFileReader reader(world, csbm_file());
          Graph3DOptions load;
          load.layers = 3;
          load.normalization = sage ? Normalization::Mean : Normalization::Symmetric;
          const Graph3D g = load_graph_3d(reader, grid, load);
          // --overlap chunks: the same bytes in more calls.
          Sequential model(grid, 11, RunOptions{KernelPath::Auto, world.size() > 1 ? 3 : 0, dtype, recompute},
                           1);
          const std::vector<int64_t> dims = {11, 10, 6, 5};
          for (int l = 0; l < 3; ++l) {
            ConvOptions conv;
            conv.relu = l < 2;
            conv.dropout = l < 2 ? 0.5f : 0.0f;
            conv.cached_input = l == 0;  // the fixed features, no input dropout: A X is aggregated once
            if (sage)
              model.add<SageConv>(dims[size_t(l + 1)], conv);
            else
              model.add<GcnConv>(dims[size_t(l + 1)], conv);
          }
          const GraphBatch batch = full_graph_batch(g, model.batch_needs());
          for (int step = 0; step < 2; ++step) {
            world.stats().clear();
            const Matrix<const float> logits = model.forward(g.features, batch, PassInfo{true, 1, step});
            Matrix<float> grad("grad", logits.extent(0), logits.extent(1));
            Kokkos::deep_copy(grad, 0.01f);
            model.backward(grad, PassInfo{true, 1, step});
            std::map<std::string, int64_t> expected;
            int transform_first_layers = 0;
            for (int l = 0; l < 3; ++l)
              transform_first_layers +=
                  schedule_bytes(expected, shape, l, 301, dims[size_t(l)], dims[size_t(l + 1)], sage ? 2 : 1,
                                 l == 0, l == 0 && step == 1, dtype == CommDtype::Bf16 ? 2 : 4, recompute);
            // Layer 1 (10 -> 6) is transform-first exactly on the grids whose b axis of layer 1 (X) has
            // extent 1: the test must see both schedules.
            EXPECT_EQ(transform_first_layers > 0, shape.x == 1);
            EXPECT_EQ(measured_bytes(world), expected) << "step " << step;
          }
        }
}

// The bytes the busiest rank moves in a GCN or GraphSAGE training epoch on every grid are what the
// performance model predicts, to the byte but for the epoch reports' own sums: layers aggregation-first and
// transform-first (the hidden width narrows past the features on some grids), layer 0 cached (no input
// dropout: its aggregation is not repeated in the second epoch) or not, the aggregation kept or recomputed.
TEST(Train3D, EveryGridMovesTheBytesThePerformanceModelPredicts) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false))
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage})
      for (const bool input_dropout : {false, true})
        for (const bool recompute : {false, true}) {
          SCOPED_TRACE(shape.str() + (kind == ModelKind::Sage ? " sage" : " gcn") +
                       (input_dropout ? " input dropout" : " cached input") +
                       (recompute ? " recompute" : ""));
          TrainOptions o = run_options(csbm_file(), NormKind::None, kind);
          o.model.hidden = 3;  // narrower than the features on some grids: transform-first there
          o.model.input_dropout = input_dropout ? 0.5f : 0.0f;
          fixtures::expect_predicted_epoch_bytes(o, shape, recompute, world);
        }
}

// R-MAT has no locality for a permutation to break, so one permutation already balances it; what is left
// comes from where the hubs land. Two independent permutations spread hub rows and hub columns over all 16
// blocks instead of stacking hub-hub entries on the 4 diagonal ones, but on this graph that is within the
// seeds' noise: means over 32 seeds were single 1.051, double 1.050 with the Philox-round Feistel network
// and 1.052 / 1.055 with the SplitMix round that replaced it. So the test asks both to balance the blocks
// to within 7% on average over 16 seeds (none: 4.65), not one to beat the other.
TEST(Balance, DoublePermutationBalancesRmatBlocks) {
  if (Communicator::world().size() != 1) GTEST_SKIP() << "serial computation: runs in the 1-rank job";
  SynthOptions o;
  o.kind = SynthKind::Rmat;
  o.num_nodes = 1 << 17;
  o.num_edges = 1 << 22;
  o.seed = 2;
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const std::string path = shared_dir() + "/rmat-balance.h5";
  generate_synthetic(o, path, self);
  const GraphFileReader reader(self, path);
  const CsrMatrix<float, HostSpace> a = reader.read_rows(0, reader.meta().num_nodes).adjacency;
  const int64_t n = a.num_rows;
  const double none = block_imbalance(a, RandomPermutation(n), RandomPermutation(n), 4, 4);
  double single = 0, twice = 0;
  const int seeds = 16;
  for (int s = 1; s <= seeds; ++s) {
    const RandomPermutation p1(n, uint64_t(s), 1), p2(n, uint64_t(s), 2);
    const double one = block_imbalance(a, p1, p1, 4, 4), two = block_imbalance(a, p1, p2, 4, 4);
    std::printf(
        "R-MAT 2^17 nodes, %lld nonzeros, 4x4 blocks, seed %d: max/mean none %.3f single %.3f double %.3f\n",
        (long long)a.nnz(), s, none, one, two);
    single += one / seeds;
    twice += two / seeds;
  }
  std::printf("mean over %d seeds: none %.3f single %.3f double %.3f\n", seeds, none, single, twice);
  EXPECT_LE(twice, 1.07);
  EXPECT_LE(single, 1.07);
  EXPECT_GT(none, 4.0);
}

// A checkpoint in global layout resumes on another grid and on one rank with the same continuation.
TEST(Train3D, CheckpointResumesOnOtherGridsAndOneRank) {
  const Communicator world = Communicator::world();
  const int p = world.size();
  if (p < 4) GTEST_SKIP() << "needs at least 4 ranks";
  const GridShape first_grid = p == 8 ? GridShape{1, 2, 2, 2} : GridShape{1, 2, 1, 2};
  const GridShape second_grid = p == 8 ? GridShape{1, 1, 1, 4} : GridShape{1, 1, 1, 2};
  const int second_ranks = p == 8 ? 4 : 2;
  TrainOptions o = run_options(csbm_file(), NormKind::Batch);
  o.trainer.epochs = 6;
  o.grid.shape = first_grid;
  const fixtures::RunWithWeights straight = fixtures::run_training_with_weights(o, world);
  o.trainer.epochs = 3;
  o.checkpoint.dir = shared_dir();
  run_training(o, world);
  o.trainer.epochs = 6;
  o.checkpoint.resume = true;
  const Communicator part = world.split(world.rank() < second_ranks ? 0 : 1, world.rank());
  for (const std::optional<GridShape>& grid :
       {std::optional<GridShape>(second_grid), std::optional<GridShape>()}) {
    SCOPED_TRACE("resumed on " + (grid ? grid->str() : std::string("one rank")));
    fixtures::RunWithWeights resumed;
    TrainOptions r = o;
    r.grid.shape = grid;
    if (!grid) {
      if (world.rank() == 0)
        resumed = fixtures::run_training_with_weights(r, Communicator(MPI_COMM_SELF, false, nullptr));
    } else if (world.rank() < second_ranks) {
      resumed = fixtures::run_training_with_weights(r, part);
    }
    world.barrier();
    if (resumed.history.empty()) continue;  // ranks outside the resumed job
    ASSERT_EQ(resumed.history.size(), 3u);
    EXPECT_EQ(resumed.history.front().epoch, 4);
    for (size_t e = 0; e < 3; ++e)
      EXPECT_NEAR(resumed.history[e].loss, straight.history[e + 3].loss, 1e-5 * straight.history[e + 3].loss);
    EXPECT_LT(relative_difference(resumed.final_weights, straight.final_weights), 1e-5);
  }
}

TEST(Train3D, BadGridsFailOnEveryRank) {
  const Communicator world = Communicator::world();
  const int p = world.size();
  auto message = [&](const GridShape& grid, const std::string& file) {
    TrainOptions o = run_options(file, NormKind::None);
    o.grid.shape = grid;
    try {
      run_training(o, world);
    } catch (const CollectiveError& e) {
      return std::string(e.what());
    }
    return std::string("no collective error");
  };
  EXPECT_EQ(message(GridShape{1, 1, 1, p + 1}, csbm_file()),
            "`grid` 1x1x" + std::to_string(p + 1) + " has " + std::to_string(p + 1) +
                " ranks but the job has " + std::to_string(p));
  EXPECT_EQ(message(GridShape{1, 1, 0, p}, csbm_file()),
            "grid '1x0x" + std::to_string(p) + "': every axis must be at least 1");
  if (p > 1) {
    const std::string tiny = shared_dir() + "/tiny.h5";
    SynthOptions o;
    o.num_nodes = p - 1 > 1 ? p - 1 : 2;
    o.num_edges = 3;
    o.num_classes = 1;
    o.train_fraction = 1.0;
    o.valid_fraction = 0.0;
    generate_synthetic(o, tiny, world);
    if (o.num_nodes < p) {
      EXPECT_EQ(message(GridShape{1, 1, 1, p}, tiny), "grid 1x1x" + std::to_string(p) +
                                                          " has more ranks than the graph has nodes (" +
                                                          std::to_string(o.num_nodes) + ")");
    }
  }
}

namespace {

// This rank's rows of a graph file in an uneven block split (rank r holds a share growing with r, rank 0
// none when there are several ranks): what an application holding its own rows hands over.
GraphRows uneven_rows(const std::string& path, const Communicator& world) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const GraphFileReader reader(self, path);
  const int64_t n = reader.meta().num_nodes;
  const int p = world.size();
  auto start = [&](int r) {
    return p == 1 ? (r == 0 ? 0 : n) : n * int64_t(r) * int64_t(r) / (int64_t(p) * p);
  };
  const int64_t begin = start(world.rank()), end = start(world.rank() + 1);
  GraphRows rows;
  rows.name = "rows of " + path;
  rows.num_nodes = n;
  rows.num_features = reader.meta().num_features;
  rows.num_classes = reader.meta().num_classes;
  rows.first_row = begin;
  const GraphSlice slice = reader.read_rows(begin, end - begin);
  rows.indptr.assign(slice.adjacency.row_ptr.data(), slice.adjacency.row_ptr.data() + (end - begin) + 1);
  rows.indices.assign(slice.adjacency.col_idx.data(), slice.adjacency.col_idx.data() + slice.adjacency.nnz());
  rows.features.assign(slice.features.data(), slice.features.data() + slice.features.size());
  rows.labels.assign(slice.labels.data(), slice.labels.data() + (end - begin));
  rows.splits.assign(size_t(end - begin), 0);
  const char* names[] = {"train", "valid", "test"};
  for (int s = 0; s < 3; ++s)
    for (const SplitInfo& info : reader.splits())
      if (info.name == names[s])
        for (int64_t v : reader.read_split(names[s], 0, info.size))
          if (v >= begin && v < end) rows.splits[size_t(v - begin)] |= uint8_t(1 << s);
  return rows;
}

// Three epochs with the library's pieces (as an application would assemble them).
fixtures::RunWithWeights train_pieces(const Graph3D& g, const ProcessGrid& grid, const Communicator& world) {
  ModelConfig config;
  config.kind = ModelKind::Sage;
  config.in = g.num_features;
  config.out = g.num_classes;
  config.hidden = 10;
  config.seed = 2;
  const std::unique_ptr<Sequential> model = build_model(config, grid, RunOptions{}, true);
  FullGraphSource source(g, grid, world, *model);
  Trainer trainer(*model, source, world, TrainerOptions{AdamSettings{}, 3, 1, config.seed, false});
  return fixtures::run_with_weights(trainer);
}

}  // namespace

// An application's own rows (uneven blocks, one of them empty) build the same graph the file gives: the
// same training, bit for bit.
TEST(GraphRows, InMemoryRowsTrainLikeTheFile) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    const ProcessGrid grid(world, shape);
    const Graph3DOptions load{2, PermuteMode::Double, 2, Normalization::Mean, true, {}};
    const Graph3D from_file = load_graph_3d(GraphFileReader(world, csbm_file()), grid, load);
    const Graph3D from_rows = build_graph_3d(uneven_rows(csbm_file(), world), grid, load);
    const fixtures::RunWithWeights a = train_pieces(from_file, grid, world),
                                   b = train_pieces(from_rows, grid, world);
    EXPECT_EQ(a.final_weights, b.final_weights);
    EXPECT_EQ(a.history.back().loss, b.history.back().loss);
    EXPECT_EQ(a.history.back().test_acc, b.history.back().test_acc);
  }
}

// Rows that are wrong anywhere are refused on every rank with the rank's problem, before any exchange.
TEST(GraphRows, BadRowsAreClearErrorsOnEveryRank) {
  const Communicator world = Communicator::world();
  const ProcessGrid grid(world, GridShape{1, 1, 1, world.size()});
  const GraphRows good = uneven_rows(csbm_file(), world);
  const int last = world.size() - 1;  // holds rows on every rank count
  auto message = [&](const std::function<void(GraphRows&)>& spoil) {
    GraphRows rows = good;
    if (world.rank() == last) spoil(rows);
    try {
      build_graph_3d(rows, grid, Graph3DOptions{});
    } catch (const CollectiveError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string name = "rows of " + csbm_file() + ": ";
  const int64_t first = good.first_row;
  const int64_t at_last =
      all_reduce_value(world, world.rank() == last ? first : int64_t(0), ReduceOp::Sum, "test");
  EXPECT_EQ(message([](GraphRows& r) { r.indices[0] = 301; }),
            name + "row " + std::to_string(at_last) + ": source 301 outside [0, 301)");
  EXPECT_EQ(message([](GraphRows& r) { r.labels[1] = 5; }),
            name + "row " + std::to_string(at_last + 1) + ": label 5 outside [-1, 5)");
  EXPECT_EQ(message([](GraphRows& r) { r.features[2] = std::nanf(""); }),
            name + "row " + std::to_string(at_last) + ": feature 2 is not finite");
  EXPECT_EQ(message([](GraphRows& r) { r.indptr.pop_back(); }).find(name + "indptr has"), 0u);
  EXPECT_EQ(message([](GraphRows& r) { r.splits.clear(); }).find(name), 0u);
  EXPECT_EQ(message([](GraphRows& r) {
              r.split_names = {"valid", "test"};
            }),
            name + "no split named 'train' in split_names (the loss covers its nodes)");
  EXPECT_EQ(message([](GraphRows& r) {
              r.split_names = {"train", "test", "test"};
            }),
            name + "split name 'test' appears twice");
  EXPECT_EQ(message([](GraphRows& r) { r.split_names.assign(9, "train"); }),
            name + "9 split_names (at most 8: one bit each)");
  EXPECT_EQ(message([](GraphRows& r) { r.split_names = {"train"}, r.splits[0] = 2; }),
            name + "row " + std::to_string(at_last) + ": split bits 2 name a split past the 1 split_names");
  Graph3DOptions negative;
  negative.layers = -1;
  try {
    build_graph_3d(good, grid, negative);
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(std::string(e.what()), "Graph3DOptions::layers is negative (-1; 0 serves models of any depth)");
  }
  if (world.size() > 1) {
    EXPECT_EQ(message([](GraphRows& r) { r.split_names.push_back("holdout"); }),
              name + "the ranks' split_names differ (every rank must name the same splits in one order)");
    EXPECT_EQ(message([](GraphRows& r) { r.first_row += 1; }),
              name + "rank " + std::to_string(last) + " starts at row " + std::to_string(at_last + 1) +
                  ", expected " + std::to_string(at_last) + " (blocks must be contiguous, in rank order)");
  }
}

namespace {

std::vector<float> read_embeddings(const std::string& path, int64_t& rows, int64_t& cols) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  H5Handle file = h5_open_file(self, path, false);
  H5Handle data = h5_open_dataset(file.get(), path, "/embeddings");
  const std::vector<int64_t> shape = h5_shape(data.get());
  rows = shape[0], cols = shape[1];
  std::vector<float> values(size_t(rows * cols));
  h5_read_rows(data.get(), H5T_NATIVE_FLOAT, 0, rows, values.data());
  return values;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

// Every grid writes the one-rank run's predictions and embeddings (the best-validation model's), in node
// order.
TEST(Train3D, PredictionsAndEmbeddingsMatchTheOneRankRun) {
  const Communicator world = Communicator::world();
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  TrainOptions o = run_options(csbm_file(), NormKind::Batch, ModelKind::Sage);
  o.trainer.epochs = 4;
  o.trainer.keep_last_step = false;
  const std::string dir = shared_dir() + "/outputs-";
  if (world.rank() == 0) {
    o.outputs.predictions = dir + "one.txt";
    o.outputs.embeddings = dir + "one.h5";
    run_training(o, self);
  }
  world.barrier();
  int64_t rows = 0, cols = 0;
  const std::vector<float> one = read_embeddings(dir + "one.h5", rows, cols);
  EXPECT_EQ(rows, 301);
  EXPECT_EQ(cols, 10);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    o.grid.shape = shape;
    o.outputs.predictions = dir + "grid.txt";
    o.outputs.embeddings = dir + "grid.h5";
    run_training(o, world);
    int64_t r = 0, c = 0;
    const std::vector<float> grid = read_embeddings(o.outputs.embeddings, r, c);
    ASSERT_EQ(grid.size(), one.size());
    EXPECT_LT(relative_difference(grid, one), 1e-5);
    EXPECT_EQ(lines_of(o.outputs.predictions), lines_of(dir + "one.txt"));
    world.barrier();
  }
}
