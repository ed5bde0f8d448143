// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/parallel3d/perf_model.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "tessera/comm/process_grid.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/parallel3d/layout.hpp"

namespace tessera {

MachineProfile builtin_machine(const std::string& name) {
  MachineProfile m;
  m.name = name;
  // Where each constant comes from: [vendor] the hardware's specification, [published] a measurement
  // published by others, [fit] scripts/calibrate_plan.py --fit against Plexus's published epochs of a
  // 3-layer GCN (scripts/calibration/plexus-epochs.json; docs/guide/full-graph.md has the table).
  if (name == "perlmutter") {
    // 4 A100-40GB per node, NVLink 3 within the node, 4 Slingshot-11 NICs (25 GB/s each) between nodes.
    m.ranks_per_node = 4;
    // [fit] All-reduce bandwidth: 69 GB/s inside a node (NCCL's all-gather on 4 A100s reached 51-151 GB/s
    // from 4 to 64 MB in the Plexus authors' analysis/collective_curve.json), 18 GB/s across nodes (of a
    // NIC's 25). Latencies [vendor-order estimates] are too small for the points to fit.
    m.alpha_intra = 5e-6, m.beta_intra = 68.7e9;
    m.alpha_inter = 1e-5, m.beta_inter = 18.0e9;
    // [vendor] HBM2 sustained (of 1.55 TB/s), TF32 GEMM sustained (of 156 TFLOP/s).
    m.memory_bandwidth = 1.4e12, m.gemm_rate = 60e12;
    // [fit] One layer's forward and backward beyond its data: launches, dispatch, synchronizations.
    m.layer_seconds = 0.54e-3;
    // [published] cuSPARSE's CSR SpMM (through torch.sparse.mm) on one A100-40GB, seconds per nonzero by
    // dense width, as published by the Plexus authors: github.com/hpcgroup/plexus,
    // analysis/kernel_curve.json (commit c3f26604), regime "large(H>L2)": a random 2.4M x 2.4M matrix with
    // 108.3M nonzeros, the dense operand larger than L2, as a full graph's blocks are. Narrow widths cost
    // nearly as much per nonzero as 32 columns: the feature-split penalty (Plexus measured SpMM 8x slower
    // after splitting features over 64 GPUs).
    m.spmm_curve = {{4, 1.648e-10},  {8, 1.766e-10},   {16, 1.819e-10}, {32, 1.914e-10},
                    {64, 2.578e-10}, {128, 4.016e-10}, {256, 7.997e-10}};
    m.spmm_curve_columns = 2.4e6;
    // [published] The same file's regime "small(H<L2)": a random 120k x 120k matrix with 5.2M nonzeros:
    // 0.7-0.77x the large regime's time per nonzero (the rows gathered from stay in the 40 MB L2 longer).
    m.spmm_curve_small = {{4, 1.167e-10},  {8, 1.185e-10},   {16, 1.238e-10}, {32, 1.421e-10},
                          {64, 1.948e-10}, {128, 3.074e-10}, {256, 5.976e-10}};
    m.spmm_curve_small_columns = 1.2e5;
    m.min_row_bytes = 512;  // the roofline's, unused beside the curve: a row of 128 floats per warp
  } else if (name == "frontier") {
    // 8 MI250X GCDs per node on Infinity Fabric, 4 Slingshot-11 NICs per node (one per 2 GCDs).
    m.ranks_per_node = 8;
    // [fit] All-reduce bandwidth inside a node 3.04 GB/s, across nodes 32.4 GB/s. The inside figure is far
    // below Infinity Fabric's 50-100 GB/s: it is what the published epochs imply (on 4 GCDs products,
    // whose activations are 10x Reddit's, takes 1.46x as long), and the fit cannot tell a slow collective
    // from another cost that grows with the rows a rank holds. The across figure is above a GCD's share
    // of the node's NICs (12.5 GB/s; a ring over a group with several ranks per node crosses between
    // nodes at two of its links only); with that share the 256-GCD products epoch is predicted 1.5x.
    // Measure both on the machine (`tessera bench comm --write`) before trusting Frontier's grid choice.
    m.alpha_intra = 8e-6, m.beta_intra = 3.04e9;
    m.alpha_inter = 1.5e-5, m.beta_inter = 32.4e9;
    // [vendor] HBM2e sustained (of 1.6 TB/s per GCD), FP32 matrix GEMM sustained (of 47.9 TFLOP/s).
    m.memory_bandwidth = 1.3e12, m.gemm_rate = 20e12;
    // [fit] rocSPARSE's SpMM (through PyTorch) is priced by the roofline with every element of a gathered
    // row moving 28 bytes, about a 32-byte sector each: 7x an A100's time per nonzero at 128 columns, as the
    // 4-GCD epochs (12.7x and 10x Perlmutter's) require. No measured MI250X curve was within reach.
    m.gathered_element_bytes = 28;
    // A row narrower than 32 columns costs what 32 cost, as the A100's published curve shows (flat below
    // 32): splitting the features stays dearer than splitting the nodes (Plexus measured 8x on 64 GPUs).
    m.min_row_bytes = 32 * 28;
    // [fit] One layer's forward and backward beyond its data: 11x Perlmutter's (launches and collectives
    // through ROCm and RCCL); with four terms on four points the Frontier fit is exact by construction.
    m.layer_seconds = 6.2e-3;
  } else if (name == "local") {
    // Measured on the 2-core development machine (tessera bench comm/stream/gemm, 2 ranks in shared memory).
    m.ranks_per_node = 1 << 20;
    m.alpha_intra = m.alpha_inter = 4e-6;
    m.beta_intra = m.beta_inter = 4e9;
    m.memory_bandwidth = 14e9, m.gemm_rate = 60e9;  // per rank with one thread each
  } else {
    fail("`machine` must be perlmutter, frontier or local, not '", name, "'");
  }
  return m;
}

MachineProfile load_machine_file(const std::string& path) {
  std::ifstream in(path);
  require(bool(in), path, ": cannot read the machine file");
  nlohmann::json j;
  try {
    in >> j;
    MachineProfile m;
    m.name = j.value("name", std::string("file"));
    m.ranks_per_node = j.at("ranks_per_node").get<int>();
    m.alpha_intra = j.at("alpha_intra").get<double>();
    m.beta_intra = j.at("beta_intra").get<double>();
    m.alpha_inter = j.at("alpha_inter").get<double>();
    m.beta_inter = j.at("beta_inter").get<double>();
    m.spmm_c0 = j.value("spmm_c0", 0.0);
    m.spmm_c1 = j.value("spmm_c1", 0.0);
    m.spmm_c2 = j.value("spmm_c2", 0.0);
    for (auto [key, curve] :
         {std::pair<const char*, std::vector<std::pair<double, double>>*>{"spmm_curve", &m.spmm_curve},
          {"spmm_curve_small", &m.spmm_curve_small}}) {
      *curve = j.value(key, std::vector<std::pair<double, double>>());
      for (size_t i = 0; i < curve->size(); ++i)
        require((*curve)[i].first > 0 && (*curve)[i].second > 0 &&
                    (i == 0 || (*curve)[i].first > (*curve)[i - 1].first),
                path, ": ", key, " needs positive [width, seconds per nonzero] pairs with widths ascending");
    }
    m.spmm_curve_columns = j.value("spmm_curve_columns", 0.0);
    m.spmm_curve_small_columns = j.value("spmm_curve_small_columns", 0.0);
    require(m.spmm_curve_small.empty() ||
                (m.spmm_curve_small_columns > 0 && m.spmm_curve_columns > m.spmm_curve_small_columns),
            path, ": spmm_curve_small needs spmm_curve_small_columns > 0 and spmm_curve_columns above it");
    m.memory_bandwidth = j.at("memory_bandwidth").get<double>();
    m.min_row_bytes = j.value("min_row_bytes", 64.0);
    m.gathered_element_bytes = j.value("gathered_element_bytes", 4.0);
    m.layer_seconds = j.value("layer_seconds", 0.0);
    m.process_bytes = j.value("process_bytes", m.process_bytes);
    m.mpi_bytes = j.value("mpi_bytes", m.mpi_bytes);
    m.peer_bytes = j.value("peer_bytes", m.peer_bytes);
    m.gemm_rate = j.at("gemm_rate").get<double>();
    m.gemm_rate_bf16 = j.value("gemm_rate_bf16", 0.0);
    const auto positive = [&](double v, const char* key) {
      require(std::isfinite(v) && v > 0, path, ": ", key, " must be a positive number, not ", v);
    };
    require(m.ranks_per_node >= 1, path, ": ranks_per_node must be at least 1, not ", m.ranks_per_node);
    require(std::isfinite(m.alpha_intra) && m.alpha_intra >= 0 && std::isfinite(m.alpha_inter) &&
                m.alpha_inter >= 0,
            path, ": alpha_intra and alpha_inter (latencies) must be finite and not negative");
    positive(m.beta_intra, "beta_intra"), positive(m.beta_inter, "beta_inter");
    positive(m.memory_bandwidth, "memory_bandwidth"), positive(m.gemm_rate, "gemm_rate");
    positive(m.gathered_element_bytes, "gathered_element_bytes");
    require(std::isfinite(m.gemm_rate_bf16) && m.gemm_rate_bf16 >= 0, path,
            ": gemm_rate_bf16 must be finite and not negative (0: gemm_rate)");
    require(std::isfinite(m.layer_seconds) && m.layer_seconds >= 0, path,
            ": layer_seconds must be finite and not negative");
    return m;
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not a valid machine file (", e.what(), ")");
  }
}

void save_machine_file(const MachineProfile& m, const std::string& path) {
  const nlohmann::json j = {{"name", m.name},
                            {"ranks_per_node", m.ranks_per_node},
                            {"alpha_intra", m.alpha_intra},
                            {"beta_intra", m.beta_intra},
                            {"alpha_inter", m.alpha_inter},
                            {"beta_inter", m.beta_inter},
                            {"spmm_c0", m.spmm_c0},
                            {"spmm_c1", m.spmm_c1},
                            {"spmm_c2", m.spmm_c2},
                            {"spmm_curve", m.spmm_curve},
                            {"spmm_curve_columns", m.spmm_curve_columns},
                            {"spmm_curve_small", m.spmm_curve_small},
                            {"spmm_curve_small_columns", m.spmm_curve_small_columns},
                            {"memory_bandwidth", m.memory_bandwidth},
                            {"min_row_bytes", m.min_row_bytes},
                            {"gathered_element_bytes", m.gathered_element_bytes},
                            {"layer_seconds", m.layer_seconds},
                            {"process_bytes", m.process_bytes},
                            {"mpi_bytes", m.mpi_bytes},
                            {"peer_bytes", m.peer_bytes},
                            {"gemm_rate", m.gemm_rate},
                            {"gemm_rate_bf16", m.gemm_rate_bf16}};
  write_text_output(path, j.dump(2) + '\n', "the machine file");
}

std::pair<double, double> fit_allreduce_model(const std::vector<double>& bytes,
                                              const std::vector<double>& seconds, int p) {
  require(bytes.size() >= 2 && bytes.size() == seconds.size() && p > 1,
          "fitting the all-reduce model needs at least 2 message sizes on at least 2 ranks");
  const size_t last = bytes.size() - 1;
  const double factor = 2.0 * (p - 1) / p;  // bytes each rank moves per byte reduced (ring)
  const double slope = (seconds[last] - seconds[last - 1]) / (bytes[last] - bytes[last - 1]);
  const double per_byte = slope > 0 ? slope : seconds[last] / bytes[last];
  const double beta = factor / per_byte;
  const double alpha = std::max(0.0, (seconds[0] - per_byte * bytes[0]) / (2.0 * (p - 1)));
  return {alpha, beta};
}

std::vector<double> spmm_terms(double nnz, double width, double rows, double cols) {
  const double root = std::sqrt(std::max(1.0, nnz * width));
  return {root, root * cols / std::max(1.0, width), root * rows / std::max(1.0, width)};
}

std::vector<double> fit_spmm_model(const std::vector<SpmmSample>& samples) {
  require(samples.size() >= 3, "fitting the SpMM model needs at least 3 measurements");
  // Normal equations of min sum (t - c . terms)^2, weighted by 1/t so small and large shapes count alike.
  double a[3][3] = {}, b[3] = {};
  for (const SpmmSample& s : samples) {
    const std::vector<double> x = spmm_terms(s.nnz, s.width, s.rows, s.cols);
    const double w = 1.0 / (s.seconds * s.seconds);
    for (int i = 0; i < 3; ++i) {
      b[i] += w * x[size_t(i)] * s.seconds;
      for (int j = 0; j < 3; ++j) a[i][j] += w * x[size_t(i)] * x[size_t(j)];
    }
  }
  // Gaussian elimination with partial pivoting (3 x 3).
  int order[3] = {0, 1, 2};
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r)
      if (std::abs(a[order[r]][col]) > std::abs(a[order[pivot]][col])) pivot = r;
    std::swap(order[col], order[pivot]);
    require(std::abs(a[order[col]][col]) > 1e-300, "the SpMM measurements do not determine the model");
    for (int r = col + 1; r < 3; ++r) {
      const double f = a[order[r]][col] / a[order[col]][col];
      for (int c = col; c < 3; ++c) a[order[r]][c] -= f * a[order[col]][c];
      b[order[r]] -= f * b[order[col]];
    }
  }
  std::vector<double> c(3);
  for (int col = 2; col >= 0; --col) {
    double s = b[order[col]];
    for (int k = col + 1; k < 3; ++k) s -= a[order[col]][k] * c[size_t(k)];
    c[size_t(col)] = s / a[order[col]][col];
  }
  return c;
}

namespace {

// A group of ranks along one axis stays inside a node when everything up to and including that axis fits
// (Y innermost, then X, then Z).
bool fits_in_node(const GridShape& s, Axis axis, int ranks_per_node) {
  const int64_t span = axis == Axis::Y   ? s.y
                       : axis == Axis::X ? int64_t(s.x) * s.y
                                         : int64_t(s.x) * s.y * s.z;
  return span <= ranks_per_node;
}

// Latency and bandwidth of a group along `axis`: inside a node or across nodes.
std::pair<double, double> link(const GridShape& s, Axis axis, const MachineProfile& m) {
  const bool intra = fits_in_node(s, axis, m.ranks_per_node);
  return intra ? std::make_pair(m.alpha_intra, m.beta_intra) : std::make_pair(m.alpha_inter, m.beta_inter);
}

double allreduce_seconds(double bytes, const GridShape& s, Axis axis, const MachineProfile& m) {
  const int p = s.extent(axis);
  if (p <= 1 || bytes <= 0) return 0.0;
  const auto [alpha, beta] = link(s, axis, m);
  return 2.0 * (p - 1) / p * bytes / beta + 2.0 * (p - 1) * alpha;
}

// Ring all-gather of `bytes` in all (each rank contributes bytes / p).
double allgather_seconds(double bytes, const GridShape& s, Axis axis, const MachineProfile& m) {
  const int p = s.extent(axis);
  if (p <= 1 || bytes <= 0) return 0.0;
  const auto [alpha, beta] = link(s, axis, m);
  return double(p - 1) / p * bytes / beta + (p - 1) * alpha;
}

// Seconds per nonzero at `width` on a measured curve (see MachineProfile::spmm_curve).
double curve_seconds_per_nonzero(const std::vector<std::pair<double, double>>& curve, double width) {
  if (width <= curve.front().first) return curve.front().second;
  for (size_t i = 1; i < curve.size(); ++i)
    if (width <= curve[i].first) {
      const auto [w0, s0] = curve[i - 1];
      const auto [w1, s1] = curve[i];
      return s0 + (s1 - s0) * (width - w0) / (w1 - w0);
    }
  return curve.back().second * width / curve.back().first;
}

}  // namespace

double predict_spmm_seconds(double nnz, double width, double rows, double cols, const MachineProfile& m) {
  if (m.spmm_c0 != 0 || m.spmm_c1 != 0 || m.spmm_c2 != 0) {
    const std::vector<double> x = spmm_terms(nnz, width, rows, cols);
    return std::max(0.0, m.spmm_c0 * x[0] + m.spmm_c1 * x[1] + m.spmm_c2 * x[2]);
  }
  if (!m.spmm_curve.empty()) {
    const double large = curve_seconds_per_nonzero(m.spmm_curve, width);
    if (m.spmm_curve_small.empty() || cols >= m.spmm_curve_columns) return nnz * large;
    const double small = curve_seconds_per_nonzero(m.spmm_curve_small, width);
    if (cols <= m.spmm_curve_small_columns) return nnz * small;
    const double t = std::log(cols / m.spmm_curve_small_columns) /
                     std::log(m.spmm_curve_columns / m.spmm_curve_small_columns);
    return nnz * (small + t * (large - small));
  }
  // Roofline: the CSR arrays, one input row per nonzero (at least a cache line), the output block.
  const double row_bytes = std::max(m.min_row_bytes, m.gathered_element_bytes * width);
  const double bytes = 12.0 * nnz + row_bytes * nnz + 4.0 * width * rows;
  return bytes / m.memory_bandwidth;
}

namespace {

// One epoch's predicted costs, summed layer by layer; collectives add their seconds and, along an axis of
// more than one rank, the bytes this rank contributes (comm_stats.hpp's convention).
struct EpochSum {
  const GridShape& s;
  const MachineProfile& m;
  GridCost cost;
  bool bf16_gemms = false;  // ProblemSize::gemm_operand_bytes 2

  // One GEMM of `flops` at the GEMM rate, A holding a_entries and B b_entries. bf16 GEMMs (at their own
  // rate where the profile has one) first round their fp32 operands into bf16 copies (4 bytes read, 2
  // written an entry), A not where it is held as bf16 bits already (a kept aggregation under bf16
  // activations).
  void gemm(double flops, double a_entries, double b_entries, bool a_is_bits = false) {
    if (!bf16_gemms) {
      cost.gemm_s += flops / m.gemm_rate;
      return;
    }
    cost.gemm_s += flops / (m.gemm_rate_bf16 > 0 ? m.gemm_rate_bf16 : m.gemm_rate);
    cost.gemm_s += 6 * ((a_is_bits ? 0 : a_entries) + b_entries) / m.memory_bandwidth;
  }

  void all_reduce(double bytes, Axis axis) {
    cost.comm_s += allreduce_seconds(bytes, s, axis, m);
    if (s.extent(axis) > 1) cost.comm_bytes += bytes;
  }
  // An all-gather of `bytes` in all: each rank contributes its 1/p.
  void all_gather(double bytes, Axis axis) {
    cost.comm_s += allgather_seconds(bytes, s, axis, m);
    if (s.extent(axis) > 1) cost.comm_bytes += bytes / s.extent(axis);
  }
  // A reduce-scatter of `bytes` per rank: the ring moves what an all-gather of as many bytes does.
  void reduce_scatter(double bytes, Axis axis) {
    cost.comm_s += allgather_seconds(bytes, s, axis, m);
    if (s.extent(axis) > 1) cost.comm_bytes += bytes;
  }
  // The element-wise passes over a layer's output block of `elements` floats: forward, the bias,
  // activation and dropout read it and write it; backward, the gradient and the saved output (or mask)
  // are read and the input gradient written (the last layer: the loss's passes over the logits, as many).
  void elementwise(double elements) {
    constexpr double passes = 5;
    cost.other_s += passes * 4 * elements / m.memory_bandwidth;
  }
};

// Layer l's axis roles and the blocks a rank holds: the adjacency block's nonzeros, its rows (over c) and
// columns (over a), the layer's input columns over b and output columns over a.
struct LayerBlocks {
  AxisRoles r;
  double ga, gb, gc, rows_c, rows_a, nnz, in, out;
};

LayerBlocks layer_blocks(const ProblemSize& problem, const Layout3D& layout, int l, const GridShape& s) {
  LayerBlocks b{roles_for_layer(l), 0, 0, 0, 0, 0, 0, 0, 0};
  b.ga = s.extent(b.r.a), b.gb = s.extent(b.r.b), b.gc = s.extent(b.r.c);
  const double np = double(layout.padded_nodes());
  b.rows_c = np / b.gc, b.rows_a = np / b.ga, b.nnz = double(problem.nnz) / (b.ga * b.gc);
  b.in = double(layout.padded_dim(l)) / b.gb, b.out = double(layout.padded_dim(l + 1)) / b.ga;
  return b;
}

// A transform-first GCN or GraphSAGE layer: T = H W per adjacency term (over b), the terms' A T summed (over
// a); the output gradient gathered over a, A^T G per term (over c), W's gradient (over a), the bias (over c).
void transform_first_layer(const ProblemSize& problem, const Layout3D& layout, int l, EpochSum& e) {
  const LayerBlocks b = layer_blocks(problem, layout, l, e.s);
  const AxisRoles r = b.r;
  const double in = b.in, out = b.out, rows_c = b.rows_c, rows_a = b.rows_a, nnz = b.nnz;
  const double width = double(layout.padded_dim(l + 1)), terms = problem.terms;
  e.all_reduce(4 * terms * rows_a * width, r.b);
  e.all_reduce(4 * rows_c * width, r.a);
  e.all_gather(4 * rows_c * width, r.a);
  e.all_reduce(4 * terms * rows_a * width, r.c);
  e.all_reduce(4 * terms * in * width, r.a);
  e.all_reduce(4 * out, r.c);
  e.cost.spmm_s += predict_spmm_seconds(nnz, width, rows_c, rows_a, e.m) +
                   predict_spmm_seconds(nnz, width, rows_a, rows_c, e.m);
  e.elementwise(rows_c * width);
  // Per term: T = H W, W's gradient H^T G_T and, past layer 0, H's gradient G_T W^T.
  const double flops = 2.0 * rows_a * in * width;
  for (int t = 0; t < problem.terms; ++t) {
    e.gemm(flops, rows_a * in, in * width);
    e.gemm(flops, rows_a * in, rows_a * width);
    if (l > 0) e.gemm(flops, rows_a * width, in * width);
  }
}

// A GCN or GraphSAGE layer, aggregation first. Forward: AGG = A H per adjacency term (over a), OUT = AGG W
// (over b). Backward: W's gradient and the bias (over c), the aggregation's gradient (over a) and the
// input's (over c); layer 0 has no input gradient. A cached input (layer 0 on fixed features without input
// dropout) aggregates once per run, not per epoch: neither its SpMM nor its sum is counted. Plexus's
// schedule (ProblemSize::plexus_schedule) gathers layer 0's features over c and computes its input gradient,
// reduce-scattered over c.
void aggregate_first_layer(const ProblemSize& problem, const Layout3D& layout, int l, EpochSum& e) {
  const LayerBlocks b = layer_blocks(problem, layout, l, e.s);
  const AxisRoles r = b.r;
  const double in = b.in, out = b.out, rows_c = b.rows_c, rows_a = b.rows_a, nnz = b.nnz;
  const double terms = problem.terms;
  // --recompute-aggregation: backward runs A H and its sum over a again (a cached input keeps its own).
  const bool keeps = reads_bf16_features(problem, l);  // bf16 features: the aggregation is kept
  const int aggregations = caches_input(problem, l) ? 0 : problem.recompute && !keeps ? 2 : 1;
  for (int k = 0; k < aggregations; ++k) e.all_reduce(4 * terms * rows_c * in, r.a);
  e.all_reduce(4 * rows_c * out, r.b);
  e.all_reduce(4 * (terms * in * out + out), r.c);
  e.cost.spmm_s += aggregations * predict_spmm_seconds(nnz, in, rows_c, rows_a, e.m);
  // bf16 activations: the kept aggregation rounded (4 B read, 2 written) and, for fp32 GEMMs, widened
  // back (2 read, 4 written); bf16 GEMMs read the kept bits as they are.
  const bool kept_bits = problem.activation_bytes == 2 && aggregations == 1;
  if (kept_bits) e.cost.other_s += (e.bf16_gemms ? 6 : 12) * terms * rows_c * in / e.m.memory_bandwidth;
  // Per term: OUT = AGG W, W's gradient AGG^T G and, past layer 0, AGG's gradient G W^T.
  const double flops = 2.0 * rows_c * in * out;
  for (int t = 0; t < problem.terms; ++t) {
    e.gemm(flops, rows_c * in, in * out, kept_bits);
    e.gemm(flops, rows_c * in, rows_c * out, kept_bits);
    if (l > 0) e.gemm(flops, rows_c * out, in * out);
  }
  e.elementwise(rows_c * out);
  if (l == 0 && !problem.plexus_schedule) return;  // layer 0 has no input gradient
  e.all_reduce(4 * terms * rows_c * in, r.a);
  if (l == 0) {  // Plexus's layer 0: its features gathered over c, their gradient reduce-scattered back
    e.all_gather(4 * rows_a * in, r.c);
    e.reduce_scatter(4 * rows_a * in, r.c);
  } else {
    e.all_reduce(4 * rows_a * in, r.c);
  }
  e.cost.spmm_s += predict_spmm_seconds(nnz, in, rows_a, rows_c, e.m);
}

// A graph attention layer (GatConv): z = H W summed over b (z: the block's columns, rows_a, every head);
// the destination terms, the softmax's row maximum and sum, and the weighted sum y over a (the rows,
// rows_c); backward the output gathered over a, the softmax's two row terms over a, [g_z, g_src, g_dst]
// over c, W's gradient and the attention vectors' over a, the bias over c. The edge passes: the weighted
// sum, its transpose and the SDDMM priced as SpMMs of the heads' width, the row maximum, exponentials,
// normalization, score and source gradients as SpMMs of width H.
void attention_layer(const ProblemSize& problem, const Layout3D& layout, int l, EpochSum& e) {
  const LayerBlocks b = layer_blocks(problem, layout, l, e.s);
  const AxisRoles r = b.r;
  const double ga = b.ga, rows_c = b.rows_c, rows_a = b.rows_a, nnz = b.nnz;
  const bool last = l + 1 == layout.layers();
  const double heads = double(last ? problem.output_heads : problem.heads);
  const double zw = last ? heads * double(layout.dim(l + 1)) : double(layout.dim(l + 1));
  const double in_b = b.in, out_local = b.out;
  const double softmax_passes = problem.recompute ? 2 : 1;
  e.all_reduce(4 * rows_a * zw, r.b);     // z
  e.all_reduce(4 * rows_c * heads, r.a);  // the destination terms
  for (int k = 0; k < softmax_passes; ++k)
    e.all_reduce(4 * rows_c * heads, r.a), e.all_reduce(4 * rows_c * heads, r.a);  // row maximum, sum
  e.all_reduce(4 * rows_c * zw, r.a);                                              // y
  e.all_reduce(4 * out_local, r.c);                                                // the bias' gradient
  e.all_gather(4 * rows_c * out_local * ga, r.a);                                  // the output gradient
  e.all_reduce(4 * rows_c * heads, r.a), e.all_reduce(4 * rows_c * heads, r.a);    // row_dot, g_dst
  e.all_reduce(4 * rows_a * (zw + 2 * heads), r.c);                                // [g_z, g_src, g_dst]
  e.all_reduce(4 * in_b * zw, r.a), e.all_reduce(4 * zw, r.a), e.all_reduce(4 * zw, r.a);  // W, att_*
  const double wide = predict_spmm_seconds(nnz, zw, rows_c, rows_a, e.m);
  const double narrow = predict_spmm_seconds(nnz, heads, rows_c, rows_a, e.m);
  e.cost.spmm_s += 3 * wide + (3 * softmax_passes + 2) * narrow;
  // z = H W, W's gradient H^T g_z and, past layer 0, H's gradient g_z W^T.
  const double flops = 2.0 * rows_a * in_b * zw;
  e.gemm(flops, rows_a * in_b, in_b * zw);
  e.gemm(flops, rows_a * in_b, rows_a * zw);
  if (l > 0) e.gemm(flops, rows_a * zw, in_b * zw);
  e.elementwise(rows_c * zw);
}

// A link task's step (LinkLoss): each rank sends its rows of the nodes the pairs name (an 8-byte count, an
// 8-byte position and its local columns per row) over c, and every pair's partial score (8 bytes) is
// summed over a; every rank scores every pair (a dot and two gradient updates per local column). An MLP
// decoder sums each pair's partial first layer (hidden x 8 bytes) over a instead, and every rank runs its
// layers forward and backward (three products each) in double on the host.
void link_exchange(const ProblemSize& problem, const Layout3D& layout, EpochSum& e) {
  const AxisRoles r = roles_for_layer(layout.layers() - 1);
  const double gc = e.s.extent(r.c), ga = e.s.extent(r.a);
  const double cols = double(layout.padded_dim(layout.layers())) / ga, rows = link_rows(problem);
  const double pairs = double(problem.link_pairs);
  e.all_gather(gc * 8, r.c);
  e.all_gather(rows * 8, r.c);
  e.all_gather(rows * cols * 4, r.c);
  const int layers = problem.link_decoder_layers;
  const double hidden = layers > 1 ? double(problem.link_decoder_hidden) : 1.0;
  e.all_reduce(8 * pairs * (layers > 0 ? hidden : 1.0), r.a);
  e.cost.other_s += 3 * 16 * pairs * cols / e.m.memory_bandwidth;
  if (layers > 0)
    e.cost.other_s += 3 * 2 * pairs *
                      (cols * hidden + double(layers - 2 > 0 ? layers - 2 : 0) * hidden * hidden + hidden) /
                      e.m.gemm_rate;
}

// The softmax cross-entropy over the logits block (the last layer's output rows, rows_c, its classes split
// over a): the row maximum (fp32) and the rows' two sums (fp64) over a, the loss and count over c.
void loss_exchange(const Layout3D& layout, EpochSum& e) {
  const AxisRoles r = roles_for_layer(layout.layers() - 1);
  const double rows_c = double(layout.padded_nodes()) / e.s.extent(r.c);
  e.all_reduce(4 * rows_c, r.a);
  e.all_reduce(16 * rows_c, r.a);
  e.all_reduce(16, r.c);
}

}  // namespace

double link_rows(const ProblemSize& problem) {
  const double n = double(problem.nodes), pairs = double(problem.link_pairs);
  return n > 0 ? n * -std::expm1(-2 * pairs / n) : 0.0;
}

GridCost predict_epoch(const ProblemSize& problem, const GridShape& s, const MachineProfile& m) {
  const Layout3D layout(s, problem.nodes, problem.dims, PermuteMode::None, 0);
  EpochSum e{s, m, GridCost{}, problem.gemm_operand_bytes == 2};
  e.cost.shape = s;
  for (int l = 0; l < layout.layers(); ++l) {
    if (problem.heads > 0)
      attention_layer(problem, layout, l, e);
    else if (runs_transform_first(problem, layout, l))
      transform_first_layer(problem, layout, l, e);
    else
      aggregate_first_layer(problem, layout, l, e);
  }
  if (problem.link_pairs > 0)
    link_exchange(problem, layout, e);
  else
    loss_exchange(layout, e);
  GridCost cost = e.cost;
  cost.other_s += layout.layers() * m.layer_seconds;
  cost.total_s = cost.comm_s + cost.spmm_s + cost.gemm_s + cost.other_s;
  const MemoryEstimate memory = predict_memory(problem, s, m);
  cost.memory_bytes = memory.peak;
  cost.load_memory_bytes = memory.load_peak;
  return cost;
}

std::vector<GridCost> plan_grids(const ProblemSize& problem, int ranks, const MachineProfile& machine) {
  std::vector<GridCost> out;
  for (const GridShape& s : ProcessGrid::factorizations(ranks, false))
    out.push_back(predict_epoch(problem, s, machine));
  std::stable_sort(out.begin(), out.end(),
                   [](const GridCost& a, const GridCost& b) { return a.total_s < b.total_s; });
  return out;
}

}  // namespace tessera
