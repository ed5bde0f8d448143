// SPDX-License-Identifier: BSD-3-Clause
// The performance model behind `tessera plan` and `--grid auto`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/parallel3d/layout.hpp"
#include "tessera/parallel3d/perf_model.hpp"

using namespace tessera;

namespace {
ProblemSize arxiv_like(int layers) {
  ProblemSize p;
  p.nodes = 169343;
  p.nnz = 1341529;
  p.dims = {128};
  for (int l = 1; l < layers; ++l) p.dims.push_back(256);
  p.dims.push_back(40);
  return p;
}
}  // namespace

TEST(PerfModel, PlansEveryFactorizationFastestFirst) {
  for (const std::string machine : {"perlmutter", "frontier", "local"}) {
    const std::vector<GridCost> plan = plan_grids(arxiv_like(3), 12, builtin_machine(machine));
    EXPECT_EQ(plan.size(), 18u);  // ordered triples with product 12
    for (size_t i = 1; i < plan.size(); ++i) EXPECT_LE(plan[i - 1].total_s, plan[i].total_s);
    for (const GridCost& c : plan) {
      EXPECT_NEAR(c.total_s, c.comm_s + c.spmm_s + c.gemm_s + c.other_s, 1e-12);
      EXPECT_GT(c.other_s, 0);
      EXPECT_GT(c.memory_bytes, 0);
    }
  }
}

TEST(PerfModel, PrefersNodeSplitsOverFeatureSplitsForSpmm) {
  // One layer: roles (X, Y, Z); Y splits the features (b), X the columns of A (a), Z its rows (c).
  MachineProfile fitted = builtin_machine("local");
  fitted.spmm_c0 = 4e-7, fitted.spmm_c1 = 1e-11, fitted.spmm_c2 = 4e-11;  // eq. 4.4 as fitted here
  for (const MachineProfile& m : {builtin_machine("perlmutter"), builtin_machine("frontier"), fitted}) {
    const double features = predict_epoch(arxiv_like(1), GridShape{1, 1, 8, 1}, m).spmm_s;
    const double columns = predict_epoch(arxiv_like(1), GridShape{1, 8, 1, 1}, m).spmm_s;
    const double rows = predict_epoch(arxiv_like(1), GridShape{1, 1, 1, 8}, m).spmm_s;
    EXPECT_GT(features, columns) << m.name;
    EXPECT_GT(features, rows) << m.name;
  }
}

namespace {

// One link everywhere (alpha 1 us, beta 1 GB/s) and a 1000-node problem with the given widths.
MachineProfile one_link_machine() {
  MachineProfile m = builtin_machine("local");
  m.alpha_intra = m.alpha_inter = 1e-6;
  m.beta_intra = m.beta_inter = 1e9;
  return m;
}

ProblemSize thousand_nodes(std::vector<int64_t> dims) {
  ProblemSize p;
  p.nodes = 1000;
  p.nnz = 5000;
  p.dims = std::move(dims);
  return p;
}

}  // namespace

TEST(PerfModel, CommunicationFollowsTheRingFormula) {
  const MachineProfile m = one_link_machine();
  const ProblemSize p = thousand_nodes({8, 4});
  // Grid 1x2x1, one layer: only the forward all-reduce over b (Y, 2 ranks) of rows_c x out_a floats.
  const GridCost c = predict_epoch(p, GridShape{1, 1, 2, 1}, m);
  const double bytes = 4.0 * 1000 * 4;
  EXPECT_NEAR(c.comm_s, 2.0 * 1 / 2 * bytes / 1e9 + 2.0 * 1e-6, 1e-12);
}

TEST(PerfModel, TransformFirstLayersMoveTheirOutputWidth) {
  const MachineProfile m = one_link_machine();
  const ProblemSize p = thousand_nodes({8, 16, 4});
  auto allreduce = [](double bytes) { return 2.0 * 1 / 2 * bytes / 1e9 + 2.0 * 1e-6; };
  auto allgather = [](double bytes) { return 1.0 / 2 * bytes / 1e9 + 1e-6; };
  // Grid 1x1x2. Layer 0 (a X, b Y, c Z): only W's and b's gradients over c. Layer 1 (a Z, b X, c Y)
  // narrows 16 -> 4 and runs A (H W): A T over a, the output gradient gathered over a, W's gradient over a.
  // The loss, its classes split over a: the rows' maximum (fp32) and two sums (fp64) over a.
  const GridCost c = predict_epoch(p, GridShape{1, 1, 1, 2}, m);
  const double expected = allreduce(4.0 * (8 * 16 + 16)) + allreduce(4.0 * 1000 * 4) +
                          allgather(4.0 * 1000 * 4) + allreduce(4.0 * 16 * 4) + allreduce(4.0 * 1000) +
                          allreduce(16.0 * 1000);
  EXPECT_NEAR(c.comm_s, expected, 1e-12);
  ProblemSize cached = p;
  cached.input_dropout = false;
  const Layout3D layout(GridShape{1, 1, 1, 2}, 1000, p.dims, PermuteMode::None, 0);
  EXPECT_FALSE(runs_transform_first(cached, layout, 0));  // A X is aggregated once
  EXPECT_TRUE(runs_transform_first(cached, layout, 1));
  const Layout3D split(GridShape{1, 4, 1, 1}, 1000, {8, 16, 4}, PermuteMode::None, 0);
  EXPECT_FALSE(runs_transform_first(cached, split,
                                    1));  // b = X splits the input into blocks of 4: no narrower than out
}

TEST(PerfModel, AllReduceFitStaysPositiveOnNoisyMeasurements) {
  const double alpha = 3e-6, beta = 4e9;
  const int p = 4;
  std::vector<double> bytes = {4096, 65536, 1 << 20, 1 << 24}, clean;
  for (double b : bytes) clean.push_back(2.0 * (p - 1) / p * b / beta + 2.0 * (p - 1) * alpha);
  const auto [a, b] = fit_allreduce_model(bytes, clean, p);
  EXPECT_NEAR(a, alpha, 1e-9);
  EXPECT_NEAR(b, beta, 1e-3 * beta);
  // A descheduled small message (8 ms for 4 KiB, as measured here once) made a least-squares line slope
  // downwards: beta came out negative and every plan predicted negative communication time.
  std::vector<double> noisy = clean;
  noisy[0] = noisy[1] = 8e-3;
  const auto [a2, b2] = fit_allreduce_model(bytes, noisy, p);
  EXPECT_NEAR(b2, beta, 1e-3 * beta);
  EXPECT_GT(a2, 0);
  // The largest message faster than the one before: beta from the largest alone, still positive.
  noisy = clean;
  noisy[3] = noisy[2] / 2;
  EXPECT_GT(fit_allreduce_model(bytes, noisy, p).second, 0);
  EXPECT_THROW(fit_allreduce_model({4096}, {1e-5}, p), Error);
}

TEST(PerfModel, FitRecoversKnownCoefficients) {
  const double c0 = 3e-8, c1 = 2e-12, c2 = 5e-12;
  std::vector<SpmmSample> samples;
  for (double rows : {1e4, 4e4})
    for (double cols : {1e4, 4e4})
      for (double width : {8.0, 64.0}) {
        const double nnz = 8 * rows;
        const std::vector<double> x = spmm_terms(nnz, width, rows, cols);
        samples.push_back({nnz, width, rows, cols, c0 * x[0] + c1 * x[1] + c2 * x[2]});
      }
  const std::vector<double> c = fit_spmm_model(samples);
  EXPECT_NEAR(c[0], c0, 1e-6 * c0);
  EXPECT_NEAR(c[1], c1, 1e-6 * c1);
  EXPECT_NEAR(c[2], c2, 1e-6 * c2);
  EXPECT_THROW(fit_spmm_model({samples[0], samples[1]}), Error);
}

TEST(PerfModel, PerlmutterPricesSpmmFromThePublishedA100Curve) {
  const MachineProfile m = builtin_machine("perlmutter");
  // The measured points themselves (108.3M nonzeros at widths 128 and 4: 43.5 and 17.8 ms published).
  EXPECT_NEAR(predict_spmm_seconds(108268300, 128, 2.4e6, 2.4e6, m), 43.476e-3, 0.01e-3);
  EXPECT_NEAR(predict_spmm_seconds(108268300, 4, 2.4e6, 2.4e6, m), 17.846e-3, 0.01e-3);
  // Between widths linearly, below the first at its rate, past the last in proportion to the width.
  EXPECT_NEAR(predict_spmm_seconds(1e8, 96, 1e6, 2.4e6, m), 1e8 * (2.578e-10 + 4.016e-10) / 2, 1e-9);
  EXPECT_NEAR(predict_spmm_seconds(1e8, 1, 1e6, 2.4e6, m), 1e8 * 1.648e-10, 1e-9);
  EXPECT_NEAR(predict_spmm_seconds(1e8, 512, 1e6, 2.4e6, m), 2 * 1e8 * 7.997e-10, 1e-9);
  // The published small matrix (120k columns) at its own curve, and a block between the two sizes between
  // the two curves in proportion to the logarithm of its columns (sqrt(120k x 2.4M): halfway).
  EXPECT_NEAR(predict_spmm_seconds(5177174, 64, 1.2e5, 1.2e5, m), 5177174 * 1.948e-10, 1e-9);
  EXPECT_NEAR(predict_spmm_seconds(1e7, 128, 1e5, std::sqrt(1.2e5 * 2.4e6), m),
              1e7 * (3.074e-10 + 4.016e-10) / 2, 1e-9);
  // Frontier has no published curve: the roofline, each gathered element a 28-byte fetch (fitted).
  const MachineProfile f = builtin_machine("frontier");
  EXPECT_TRUE(f.spmm_curve.empty());
  EXPECT_NEAR(predict_spmm_seconds(1e6, 256, 1e5, 1e5, f), (12e6 + 28 * 256e6 + 1024e5) / 1.3e12, 1e-12);
}

TEST(PerfModel, MachineFilesRoundTripAndBadOnesAreErrors) {
  char dir[] = "/tmp/tessera-machine-XXXXXX";
  const std::string path = std::string(mkdtemp(dir)) + "/m.json";
  MachineProfile m = builtin_machine("frontier");
  m.spmm_c1 = 1.5e-11;
  save_machine_file(m, path);
  const MachineProfile back = load_machine_file(path);
  EXPECT_EQ(back.name, "frontier");
  EXPECT_EQ(back.ranks_per_node, 8);
  EXPECT_EQ(back.spmm_c1, 1.5e-11);
  EXPECT_EQ(back.beta_inter, m.beta_inter);
  EXPECT_EQ(back.gathered_element_bytes, m.gathered_element_bytes);
  EXPECT_EQ(back.layer_seconds, m.layer_seconds);
  EXPECT_EQ(back.gemm_rate_bf16, 0.0);
  m.gemm_rate_bf16 = 3e13;
  save_machine_file(m, path);
  EXPECT_EQ(load_machine_file(path).gemm_rate_bf16, 3e13);
  const MachineProfile perlmutter = builtin_machine("perlmutter");
  save_machine_file(perlmutter, path);
  EXPECT_EQ(load_machine_file(path).spmm_curve, perlmutter.spmm_curve);
  // A valid file's fields plus one bad one: refused with a message naming the file and the field.
  const auto expect_refused = [&](const std::string& extra, const std::string& message) {
    std::ofstream(path) << "{\"ranks_per_node\": 4, \"alpha_intra\": 1e-6, \"beta_intra\": 1e9, "
                           "\"alpha_inter\": 1e-6, \"beta_inter\": 1e9, \"memory_bandwidth\": 1e11, "
                           "\"gemm_rate\": 1e12, "
                        << extra << "}";
    try {
      load_machine_file(path);
      ADD_FAILURE() << "accepted " << extra;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": " + message), std::string::npos) << e.what();
    }
  };
  expect_refused("\"spmm_curve\": [[64, 1e-10], [32, 2e-10]]", "spmm_curve needs positive");
  expect_refused("\"spmm_curve_small\": [[32, 0]]", "spmm_curve_small needs positive");
  expect_refused("\"spmm_curve_small\": [[32, 1e-10]], \"spmm_curve_columns\": 1e6",
                 "spmm_curve_small needs spmm_curve_small_columns > 0");
  expect_refused("\"layer_seconds\": -1", "layer_seconds must be");
  expect_refused("\"gemm_rate_bf16\": -1", "gemm_rate_bf16 must be finite and not negative");
  expect_refused("\"gathered_element_bytes\": 0", "gathered_element_bytes must be a positive number");
  std::ofstream(path) << "{\"name\": \"broken\"}";
  try {
    load_machine_file(path);
    FAIL() << "accepted a machine file without fields";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": not a valid machine file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(builtin_machine("summit"), Error);
}

// A multi-label graph's task rows: read with the rows, sent in the labels exchange, kept in every layout's
// output row order (one byte per task and row); its ranked metrics' gathered entries in training.
TEST(PerfModel, CountsAMultiLabelGraphsTaskRows) {
  const MachineProfile machine = builtin_machine("perlmutter");
  const ProblemSize single = arxiv_like(3);
  ProblemSize tasks = single;
  tasks.tasks = 112;
  for (const GridShape& shape : {GridShape{}, GridShape{1, 2, 2, 2}, GridShape{1, 1, 1, 8}}) {
    SCOPED_TRACE(shape.str());
    const MemoryEstimate a = predict_memory(single, shape, machine),
                         b = predict_memory(tasks, shape, machine);
    const Layout3D layout(shape, single.nodes, single.dims, PermuteMode::None, 0);
    double rows = 0;
    for (int t = 0; t < layout.num_adjacency_layouts(); ++t)
      rows += double(layout.padded_nodes()) / shape.extent(roles_for_layer(t).c);
    EXPECT_NEAR(b.graph - a.graph, (1 + kHeapSlack) * 112 * rows, 1e-6 * b.graph);
    EXPECT_GT(b.load_peak, a.load_peak);
    // The ranked metrics' gathered entries: 5 bytes per node and local task column, twice where the rows
    // are spread over ranks.
    const int last = layout.layers() - 1;
    const double copies = shape.extent(roles_for_layer(last).c) > 1 ? 2 : 1;
    const double local_tasks = double(layout.padded_dim(last + 1)) / shape.extent(roles_for_layer(last).a);
    EXPECT_NEAR(b.training - a.training, (1 + kHeapSlack) * 5 * copies * double(single.nodes) * local_tasks,
                1e-6 * b.training);
  }
}

// Every way out a refused run is told of fits by the model's own prediction for that change, on its grid
// and ranks, and the list holds each kind the model can predict: another grid of as many ranks, recomputing
// the aggregation, and the fewest more ranks (checked here by trying every smaller doubling).
TEST(PerfModel, MemoryWaysOutEachFitAsPredicted) {
  const MachineProfile machine = builtin_machine("perlmutter");
  const ProblemSize problem = arxiv_like(3);
  const GridShape shape{1, 1, 1, 8};  // all ranks on one axis: a poor grid for memory
  ProblemSize recompute = problem;
  recompute.recompute = true;
  const double here = predict_memory(problem, shape, machine).peak;
  const double here_recomputed = predict_memory(recompute, shape, machine).peak;
  ASSERT_LT(here_recomputed, here);
  const double budget = 0.5 * (here + here_recomputed);  // recomputing on this grid fits, as it is does not
  const std::vector<MemoryWayOut> ways = memory_ways_out(problem, shape, machine, budget);
  bool recomputes = false, more_ranks = false;
  for (const MemoryWayOut& w : ways) {
    ProblemSize changed = w.recompute ? recompute : problem;
    changed.activation_bytes = w.activation_bytes;
    changed.gemm_operand_bytes = w.gemm_operand_bytes;
    const double predicted = predict_memory(changed, w.shape, machine).peak;
    EXPECT_DOUBLE_EQ(w.peak_bytes, predicted) << w.change;
    EXPECT_LE(w.peak_bytes, budget) << w.change;
    EXPECT_EQ(w.shape.size(), w.ranks) << w.change;
    if (w.change == "`recompute-aggregation`") recomputes = w.shape == shape && w.ranks == 8;
    if (w.ranks > 8) {
      more_ranks = true;
      for (int fewer = 16; fewer < w.ranks; fewer *= 2)
        for (const GridCost& c : plan_grids(problem, fewer, machine))
          EXPECT_GT(c.memory_bytes, budget) << fewer;
    }
  }
  EXPECT_TRUE(recomputes);
  EXPECT_TRUE(more_ranks);
  // Nothing fits in nothing.
  EXPECT_TRUE(memory_ways_out(problem, shape, machine, 1.0).empty());
}

namespace {

// The way out named `change` for `p` on `shape` under `budget`, if listed (else peak_bytes -1).
MemoryWayOut way_out_named(const ProblemSize& p, const GridShape& shape, const MachineProfile& machine,
                           double budget, const std::string& change) {
  for (const MemoryWayOut& w : memory_ways_out(p, shape, machine, budget))
    if (w.change == change) return w;
  MemoryWayOut none;
  none.peak_bytes = -1;
  return none;
}

}  // namespace

// bf16 activations are named where they alone make the run fit on its grid, with the model's prediction
// at 2 bytes a kept value, and never for a GAT (which keeps no aggregation) or with recomputing.
TEST(PerfModel, MemoryWaysOutNameBf16ActivationsWhereTheyFit) {
  const MachineProfile machine = builtin_machine("perlmutter");
  const GridShape shape{1, 1, 1, 8};
  ProblemSize problem = arxiv_like(3), bf16 = problem;
  bf16.activation_bytes = 2;
  const double here = predict_memory(problem, shape, machine).peak;
  const double here_bf16 = predict_memory(bf16, shape, machine).peak;
  ASSERT_LT(here_bf16, here);
  const auto named = [&](const ProblemSize& p, double budget) {
    return way_out_named(p, shape, machine, budget, "`activation-dtype` bf16").peak_bytes;
  };
  const MemoryWayOut way = way_out_named(problem, shape, machine, 0.5 * (here + here_bf16),
                                         "`activation-dtype` bf16");
  EXPECT_DOUBLE_EQ(way.peak_bytes, here_bf16);
  EXPECT_EQ(way.activation_bytes, 2);
  EXPECT_FALSE(way.recompute);
  EXPECT_TRUE(way.shape == shape);
  EXPECT_EQ(named(problem, 0.99 * here_bf16), -1.0);  // fits only elsewhere: not named
  EXPECT_EQ(named(bf16, 0.99 * here_bf16), -1.0);     // already bf16
  ProblemSize recompute = problem;
  recompute.recompute = true;
  EXPECT_EQ(named(recompute, 0.5 * (here + here_bf16)), -1.0);
  ProblemSize gat = problem;
  gat.heads = 8;
  const double gat_here = predict_memory(gat, shape, machine).peak;
  EXPECT_EQ(named(gat, 0.999 * gat_here), -1.0);
}

// A run with bf16 GEMMs is told where fp32 GEMMs alone make it fit on its grid (host builds, where the
// GEMMs keep bf16 copies of their operands), with the fp32 prediction.
TEST(PerfModel, MemoryWaysOutNameFp32GemmsWhereTheyFit) {
  if (host_gemm_bf16_copy_bytes(GemmDtype::Bf16, 1, 1) == 0) GTEST_SKIP() << "no host GEMM copies here";
  const MachineProfile machine = builtin_machine("local");
  const GridShape shape{1, 1, 1, 2};
  ProblemSize bf16 = arxiv_like(3), f32 = bf16;
  bf16.gemm_operand_bytes = 2;
  const double here = predict_memory(bf16, shape, machine).peak;
  const double here_f32 = predict_memory(f32, shape, machine).peak;
  ASSERT_LT(here_f32, here);
  const auto named = [&](const ProblemSize& p, double budget) {
    return way_out_named(p, shape, machine, budget, "`gemm-dtype` f32").peak_bytes;
  };
  const MemoryWayOut way = way_out_named(bf16, shape, machine, 0.5 * (here + here_f32), "`gemm-dtype` f32");
  EXPECT_DOUBLE_EQ(way.peak_bytes, here_f32);
  EXPECT_EQ(way.gemm_operand_bytes, 4);
  EXPECT_TRUE(way.shape == shape);
  EXPECT_EQ(named(bf16, 0.99 * here_f32), -1.0);         // not enough alone
  EXPECT_EQ(named(f32, 0.5 * (here + here_f32)), -1.0);  // already fp32
}

// bf16 GEMMs: the epoch's flops unchanged, each GEMM's fp32 operands rounded into bf16 copies first (6
// bytes an entry at the memory's bandwidth), except a kept aggregation held as bf16 bits under bf16
// activations, which the GEMMs read as they are (and which is then rounded only, never widened back).
// The GEMMs of a 3-layer GCN step on one rank, widths 128 -> 256 -> 256 -> 40, counted here by hand:
// layers 0 and 1 aggregate first (OUT = AGG W, W's gradient AGG^T G, layer 1's AGG gradient G W^T),
// layer 2 transforms first (T = H W, H^T G_T, G_T W^T).
TEST(PerfModel, Bf16GemmsPriceTheirOperandCopies) {
  const MachineProfile m = builtin_machine("local");
  const GridShape one{1, 1, 1, 1};
  const ProblemSize f32 = arxiv_like(3);
  const Layout3D layout(one, f32.nodes, f32.dims, PermuteMode::None, 0);
  ASSERT_FALSE(runs_transform_first(f32, layout, 0));
  ASSERT_FALSE(runs_transform_first(f32, layout, 1));
  ASSERT_TRUE(runs_transform_first(f32, layout, 2));
  const double n = double(layout.padded_nodes()), bw = m.memory_bandwidth;
  const double agg_entries = 2 * n * 128 + 2 * n * 256;  // AGG read by the forward and the weight gradient
  const double other_entries = 128 * 256 + n * 256 +                // layer 0: W, G
                               256 * 256 + n * 256 + n * 256 + 256 * 256 +  // layer 1: W, G, G, W
                               n * 256 + 256 * 40 + n * 256 + n * 40 + n * 40 + 256 * 40;  // layer 2
  ProblemSize bf16_gemms = f32, act = f32, both = f32;
  bf16_gemms.gemm_operand_bytes = both.gemm_operand_bytes = 2;
  act.activation_bytes = both.activation_bytes = 2;
  const GridCost c_f32 = predict_epoch(f32, one, m), c_gemms = predict_epoch(bf16_gemms, one, m);
  const GridCost c_act = predict_epoch(act, one, m), c_both = predict_epoch(both, one, m);
  const double tol = 1e-9 * c_f32.gemm_s;
  EXPECT_NEAR(c_gemms.gemm_s - c_f32.gemm_s, 6 * (agg_entries + other_entries) / bw, tol);
  EXPECT_NEAR(c_both.gemm_s - c_f32.gemm_s, 6 * other_entries / bw, tol);
  EXPECT_NEAR(c_act.gemm_s, c_f32.gemm_s, tol);
  EXPECT_EQ(c_gemms.other_s, c_f32.other_s);
  // A profile with its own bf16 rate: the flops at that rate, the copies as before.
  MachineProfile fast = m;
  fast.gemm_rate_bf16 = 4 * m.gemm_rate;
  const double flops_s = c_f32.gemm_s;  // fp32 GEMMs: the flops alone
  EXPECT_NEAR(predict_epoch(bf16_gemms, one, fast).gemm_s,
              flops_s / 4 + 6 * (agg_entries + other_entries) / bw, tol);
  EXPECT_EQ(predict_epoch(f32, one, fast).gemm_s, c_f32.gemm_s);
  // The kept aggregations (layers 0 and 1): rounded and widened with fp32 GEMMs, rounded only with bf16.
  const double kept = n * 128 + n * 256;
  EXPECT_NEAR(c_act.other_s - c_f32.other_s, 12 * kept / bw, 1e-9 * c_f32.other_s);
  EXPECT_NEAR(c_both.other_s - c_f32.other_s, 6 * kept / bw, 1e-9 * c_f32.other_s);
  // Memory: the host GEMM's bf16 copies (host builds), its fp32 reduction chunks no longer.
  if (host_gemm_bf16_copy_bytes(GemmDtype::Bf16, 1, 1) > 0) {
    EXPECT_GT(predict_memory(bf16_gemms, one, m).peak, predict_memory(f32, one, m).peak);
  }
}

TEST(PerfModel, BuiltInGpuProfilesPredictThePublishedEpochs) {
  // Plexus's published epochs of a 3-layer GCN (hidden 128), the points scripts/calibrate_plan.py fits: the
  // fastest grid's prediction (the grid plan would choose) within 0.8-1.25x of every one.
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/scripts/calibration/plexus-epochs.json");
  ASSERT_TRUE(in);
  const nlohmann::json data = nlohmann::json::parse(in);
  int points = 0;
  for (const nlohmann::json& point : data.at("points")) {
    const nlohmann::json& g = data.at("graphs").at(point.at("graph").get<std::string>());
    ProblemSize p;
    p.nodes = g.at("nodes").get<int64_t>();
    p.nnz = g.at("nonzeros").get<int64_t>();  // one self loop per node included, as GCN's
    p.edges = p.nnz - p.nodes;
    p.dims = {g.at("features").get<int64_t>()};
    for (int l = 1; l < data.at("model").at("layers").get<int>(); ++l)
      p.dims.push_back(data.at("model").at("hidden").get<int64_t>());
    p.dims.push_back(g.at("classes").get<int64_t>());
    p.plexus_schedule = true;  // the layers as Plexus ran them
    const std::string machine = point.at("machine").get<std::string>();
    const GridCost fastest = plan_grids(p, point.at("ranks").get<int>(), builtin_machine(machine)).front();
    const double ratio = fastest.total_s / point.at("epoch_s").get<double>();
    EXPECT_TRUE(ratio >= 0.8 && ratio <= 1.25)
        << machine << " " << point.at("graph") << " on " << point.at("ranks") << " ranks: predicted "
        << fastest.total_s << " s on " << fastest.shape.str() << ", " << ratio << "x the published";
    ++points;
  }
  EXPECT_EQ(points, 10);
}

TEST(PerfModel, FrontierPricesAGcdItsOwnWay) {
  // An MI250X GCD is not an A100: the same block costs more than 5x as much on Frontier's profile.
  const double a100 = predict_spmm_seconds(3e7, 128, 1.2e6, 1.2e6, builtin_machine("perlmutter"));
  const double gcd = predict_spmm_seconds(3e7, 128, 1.2e6, 1.2e6, builtin_machine("frontier"));
  EXPECT_GT(gcd, 5 * a100);
  // The fixed cost per layer enters every grid's epoch once per layer.
  MachineProfile m = builtin_machine("frontier");
  const double with = predict_epoch(arxiv_like(3), GridShape{1, 2, 2, 2}, m).other_s;
  m.layer_seconds = 0;
  EXPECT_NEAR(with - predict_epoch(arxiv_like(3), GridShape{1, 2, 2, 2}, m).other_s, 3 * 6.2e-3, 1e-12);
}
