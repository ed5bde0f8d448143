// SPDX-License-Identifier: BSD-3-Clause
// Performance model of one full-graph training epoch on a 3D grid (DESIGN §4), used by `tessera plan` and
// `--grid auto`: communication (ring all-reduce, 2(p-1)/p * bytes / beta + 2(p-1) * alpha, with alpha and
// beta depending on whether the group fits in a node: Y groups are innermost), SpMM (Plexus eq. 4.4,
// c0 sqrt(f) + c1 sqrt(f) (N/Ga)/(D/Gb) + c2 sqrt(f) (N/Gc)/(D/Gb) with f = nnz D / G, coefficients fitted
// by `tessera bench spmm --fit`; or a bandwidth roofline for machines without fitted coefficients) and
// GEMM (flops / rate). Every factorization of G is evaluated, not only powers of two.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/process_grid.hpp"

namespace tessera {

struct MachineProfile {
  std::string name;
  int ranks_per_node = 1;
  double alpha_intra = 5e-6, beta_intra = 1e10;  // all-reduce latency (s) and bandwidth (bytes/s)
  double alpha_inter = 1e-5, beta_inter = 1e10;
  double spmm_c0 = 0, spmm_c1 = 0, spmm_c2 = 0;  // eq. 4.4; all zero: roofline with memory_bandwidth
  double memory_bandwidth = 1e11;                // bytes/s
  double min_row_bytes = 64;  // roofline: a gathered row costs at least this much (narrow rows waste lanes)
  double gemm_rate = 1e11;    // flop/s
};

/// Built-in profiles: perlmutter (4 A100 per node), frontier (8 MI250X GCDs per node), local (this kind
/// of 2-core machine, as measured when the model was written). Throws Error on another name.
MachineProfile builtin_machine(const std::string& name);
/// JSON machine files written by `tessera bench comm` / `tessera bench spmm --fit`.
MachineProfile load_machine_file(const std::string& path);
void save_machine_file(const MachineProfile& profile, const std::string& path);

struct ProblemSize {
  int64_t nodes = 0, nnz = 0;  // nnz of the normalized adjacency (edges + self loops)
  std::vector<int64_t> dims;   // features, hidden..., classes
};

struct GridCost {
  GridShape shape;
  double comm_s = 0, spmm_s = 0, gemm_s = 0, total_s = 0;
  double memory_bytes = 0;  // per rank
};

/// Predicted epoch cost of one grid.
GridCost predict_epoch(const ProblemSize& problem, const GridShape& shape, const MachineProfile& machine);
/// Every factorization of `ranks` into X x Y x Z, fastest first.
std::vector<GridCost> plan_grids(const ProblemSize& problem, int ranks, const MachineProfile& machine);

/// alpha and beta of the all-reduce model from (bytes, seconds) measured on p ranks, sizes ascending: beta
/// from the slope between the two largest messages (bandwidth-bound), alpha from the smallest
/// (latency-bound). A least-squares line through all sizes is dominated by the largest and went negative
/// on a noisy machine; this stays positive (a non-increasing pair gives beta from the largest alone).
/// Throws Error with fewer than 2 sizes.
std::pair<double, double> fit_allreduce_model(const std::vector<double>& bytes,
                                              const std::vector<double>& seconds, int p);

/// Least-squares fit of eq. 4.4 from measured (rows, cols, width, nnz, grid ranks, Ga, Gb, Gc, seconds):
/// returns {c0, c1, c2}. Throws Error with fewer than 3 samples.
struct SpmmSample {
  double nnz, width, rows, cols, seconds;
};
std::vector<double> fit_spmm_model(const std::vector<SpmmSample>& samples);
/// eq. 4.4 terms of one local SpMM: sqrt(f), sqrt(f) cols / width, sqrt(f) rows / width with f = nnz * width.
std::vector<double> spmm_terms(double nnz, double width, double rows, double cols);

}  // namespace tessera
