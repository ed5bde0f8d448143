// SPDX-License-Identifier: BSD-3-Clause
// Performance model of one full-graph training epoch on a 3D grid (docs/architecture.md §4), used by
// `tessera plan` and `--grid auto`: communication (ring all-reduce, 2(p-1)/p * bytes / beta + 2(p-1) * alpha,
// with alpha and beta depending on whether the group fits in a node: Y groups are innermost), SpMM (Plexus
// eq. 4.4, c0 sqrt(f) + c1 sqrt(f) (N/Ga)/(D/Gb) + c2 sqrt(f) (N/Gc)/(D/Gb) with f = nnz D / G, coefficients
// fitted by `tessera bench spmm --fit`; a measured curve of seconds per nonzero by width; or a bandwidth
// roofline), GEMM (flops / rate), and the element-wise passes and a fixed cost per layer. Every
// factorization of G is evaluated, not only powers of two. The built-in GPU profiles are calibrated
// against published epoch times (scripts/calibrate_plan.py).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/grid_shape.hpp"
#include "tessera/parallel3d/layout.hpp"

namespace tessera {

/// What the performance model knows of a machine.
struct MachineProfile {
  std::string name;           ///< "perlmutter", "frontier", "local", or a file's
  int ranks_per_node = 1;     ///< groups up to this size are inside a node
  double alpha_intra = 5e-6;  ///< all-reduce latency inside a node (s)
  double beta_intra = 1e10;   ///< all-reduce bandwidth inside a node (bytes/s)
  double alpha_inter = 1e-5;  ///< latency across nodes (s)
  double beta_inter = 1e10;   ///< bandwidth across nodes (bytes/s)
  double spmm_c0 = 0;         ///< eq. 4.4's c0; all three zero: roofline with memory_bandwidth
  double spmm_c1 = 0;         ///< eq. 4.4's c1
  double spmm_c2 = 0;         ///< eq. 4.4's c2
  /// Measured SpMM seconds per nonzero of the local block at local widths, as (width, seconds) with
  /// widths ascending. Where eq. 4.4's coefficients are all zero and this is not empty, it prices the SpMM
  /// (linear between widths, the first width's rate below it, proportional to the width past the last);
  /// empty: the roofline with memory_bandwidth.
  std::vector<std::pair<double, double>> spmm_curve;
  double spmm_curve_columns = 0;  ///< columns of the matrix spmm_curve was measured on (0: any block)
  /// The same measured on a matrix of spmm_curve_small_columns columns (fewer rows to gather from, more of
  /// them in cache): a block with at most that many columns is priced by it, one between the two sizes
  /// in proportion to the logarithm of its columns; empty: spmm_curve for every block.
  std::vector<std::pair<double, double>> spmm_curve_small;
  double spmm_curve_small_columns = 0;  ///< see spmm_curve_small
  double memory_bandwidth = 1e11;       ///< bytes/s
  double min_row_bytes = 64;  ///< roofline: a gathered row costs at least this much (narrow rows waste lanes)
  /// Roofline: the bytes one gathered element of a row moves: 4 where a row's floats are read together
  /// (coalesced), up to a cache line where each float of a gathered row is fetched on its own.
  double gathered_element_bytes = 4;
  double gemm_rate = 1e11;  ///< flop/s
  /// flop/s of bf16 GEMMs (--gemm-dtype bf16, the host's oneDNN), beside their operands' rounding, which
  /// is priced as bytes; 0 (every built-in profile): gemm_rate.
  double gemm_rate_bf16 = 0;
  /// Fixed cost of one graph layer's forward and backward beyond its data (kernel launches, the host's
  /// dispatch, the synchronizations of its collectives), seconds.
  double layer_seconds = 0;
  /// Resident memory of a rank before it holds any data (MPI, Kokkos, libraries, and what the first
  /// training step adds: the GEMM library's code and OpenMP's threads); a 200-node graph's run on a host
  /// build peaks at 38.8 MiB on one rank (2026-11-28, Debian bookworm, Open MPI 4.1).
  double process_bytes = 40.0 * (1 << 20);
  /// What each further rank of the job adds to a rank's resident memory (MPI's shared-memory segments of its
  /// peers, mapped once touched): the same run peaks at 43.5 MiB on 8 ranks, about 0.5 MiB per peer,
  /// counted as 1 MiB for what larger messages leave mapped.
  double peer_bytes = 1.0 * (1 << 20);
  /// The most MPI holds per rank once large messages have moved between several ranks (shared-memory
  /// fragments, registered buffers); the model counts the largest message a rank sends up to this. 32 MiB
  /// is what runs on this 2-core machine held beyond the data on 8 ranks.
  double mpi_bytes = 32.0 * (1 << 20);
};

/// Built-in profiles: perlmutter (4 A100 per node), frontier (8 MI250X GCDs per node), local (this kind
/// of 2-core machine, as measured when the model was written). Throws Error on another name.
MachineProfile builtin_machine(const std::string& name);
/// JSON machine files written by `tessera bench comm` / `tessera bench spmm --fit`.
MachineProfile load_machine_file(const std::string& path);
/// Writes a profile as a machine file.
void save_machine_file(const MachineProfile& profile, const std::string& path);

/// The problem a grid is planned for.
struct ProblemSize {
  int64_t nodes = 0;          ///< nodes
  int64_t nnz = 0;            ///< nonzeros of the normalized adjacency (edges + self loops)
  std::vector<int64_t> dims;  ///< features, hidden..., classes
  // What the memory model needs besides (the command line's defaults):
  int64_t edges = -1;         ///< edges stored in the file (-1: nnz - nodes)
  int terms = 1;              ///< adjacency terms per layer: 1 (GCN), 2 (GraphSAGE: neighbours and self)
  bool input_dropout = true;  ///< the input features are copied by a dropout (layer 0 is not cached)
  bool symmetric = true;      ///< symmetric normalization (GCN): a self loop per node where missing
  bool norm = false;          ///< a (fused) norm after every hidden layer
  bool recompute = false;  ///< --recompute-aggregation: (A H) W layers keep no aggregation, GAT no attention
  /// Bytes a held feature value takes: 4, or 2 with bf16 features (Graph3DOptions::feature_dtype), which
  /// also make layer 0 aggregate first and keep its aggregation (GraphMultiply).
  int64_t feature_bytes = 4;
  /// Bytes an (A H) W layer's kept aggregation takes a value: 4, or 2 with bf16 activations
  /// (RunOptions::activation_dtype; a cached static aggregation stays fp32).
  int64_t activation_bytes = 4;
  /// Bytes a GEMM operand takes as the host GEMMs multiply it: 4, or 2 with bf16 GEMMs
  /// (ComputeOptions::gemm_dtype): each GEMM rounds its fp32 operands into bf16 copies (host builds) first.
  int64_t gemm_operand_bytes = 4;
  /// --normalize-features: the rows are read as fp32 (and normalized) even for bf16 features.
  bool normalize_features = false;
  /// Graph attention (GatConv): the hidden layers' heads (0: no attention layers). A GAT's dims are its
  /// layers' outputs: heads x hidden for hidden layers (concatenated), the classes last (output_heads
  /// averaged).
  int64_t heads = 0;
  int64_t output_heads = 1;                          ///< GAT: the last layer's heads
  int64_t exchange_budget = kDefaultExchangeBudget;  ///< the load's (Graph3DOptions::exchange_budget)
  bool symmetric_graph = false;  ///< the file says every edge's reverse is stored (GraphMeta::symmetric)
  bool one_order = false;        ///< rows and columns in one order (--permute none or single, one rank)
  /// Price GCN layers as Plexus's implementation runs them (github.com/hpcgroup/plexus, plexus/gcn_conv.py)
  /// instead of as Tessera does: every layer aggregation first at its input width (layer 0 included,
  /// never cached), layer 0's features gathered over c and its input gradient computed and
  /// reduce-scattered back. The calibration against Plexus's published epochs prices this schedule.
  bool plexus_schedule = false;
  /// A multi-label graph's tasks (its label matrix's columns, GraphMeta::multi_label); 0: one class per node.
  int64_t tasks = 0;
  /// A link task (LinkLoss): the node pairs a training step scores (training pairs x (1 + negatives));
  /// the output columns are the embeddings. 0: a node task.
  int64_t link_pairs = 0;
  /// A link task's MLP decoder (MlpLinkDecoder): its linear layers and hidden width; 0 layers: the dot
  /// product.
  int link_decoder_layers = 0;
  int64_t link_decoder_hidden = 0;  ///< see link_decoder_layers
};

/// The distinct nodes `pairs` node pairs name among `nodes` nodes, as if their endpoints were uniform:
/// what a link step gathers (every node when the pairs cover the graph many times).
double link_rows(const ProblemSize& problem);

/// Whether layer l of `problem` aggregates its input once per run instead of every epoch, as the layers
/// decide (models/nn/model.cpp): layer 0 on fixed features without input dropout; never in Plexus's
/// schedule.
inline bool caches_input(const ProblemSize& problem, int l) {
  return l == 0 && !problem.input_dropout && !problem.plexus_schedule;
}
/// Whether layer l reads bf16 features: a GCN or GraphSAGE layer 0 with ProblemSize::feature_bytes 2,
/// aggregating first and keeping its aggregation; never in Plexus's schedule. (A GAT is handed the
/// features widened: widened_bf16_features.)
inline bool reads_bf16_features(const ProblemSize& problem, int l) {
  return l == 0 && problem.feature_bytes == 2 && problem.heads == 0 && !problem.plexus_schedule;
}
/// Whether the model keeps a widened fp32 copy of bf16 features: a GAT (its first layer transforms the
/// features; an input dropout masks that copy in place).
inline bool widened_bf16_features(const ProblemSize& problem) {
  return problem.feature_bytes == 2 && problem.heads > 0;
}
/// Whether layer l of `problem` on `layout`'s grid runs transform-first (A (H W)), as GraphMultiply
/// decides; never in Plexus's schedule.
inline bool runs_transform_first(const ProblemSize& problem, const Layout3D& layout, int l) {
  return !problem.plexus_schedule && !reads_bf16_features(problem, l) &&
         transforms_first(l, layout.dim(l), layout.dim(l + 1), layout.shape(), caches_input(problem, l));
}

/// The heap's share beyond the data terms: freed blocks below glibc's mmap threshold (which it raises up
/// to 32 MiB as large arrays are freed) stay in the process, and MPI's reduction temporaries come and go
/// beside the layers' buffers. Measured: the term-by-term model fell 3-15% short of the peak on the
/// memory_plan test's graphs (R-MAT, 2^16 and 2^18 nodes, grids of 1 to 8 ranks).
inline constexpr double kHeapSlack = 0.15;
/// A run is admitted when its predicted peak times (1 + kMemoryMargin) fits the memory each rank has:
/// room for what varies between runs and machines (another MPI, another allocator).
inline constexpr double kMemoryMargin = 0.10;

/// One rank's predicted resident memory (bytes), term by term as the loader and the layers allocate it,
/// plus kHeapSlack of the data terms for what the heap keeps beyond them. Everything is counted in one
/// memory, as on a host build; a GPU build keeps the rows read and the exchanges on the host and the blocks
/// and layer buffers on the device. The prediction is meant never to be below the measured peak (the CLI
/// test `memory_plan` holds it on grids of 1 to 8 ranks); a run is admitted with kMemoryMargin to spare.
struct MemoryEstimate {
  double process = 0;    ///< the runtime before any data, and MPI's buffers (MachineProfile)
  double load_peak = 0;  ///< largest during the load (process included)
  double graph = 0;      ///< kept after the load: adjacency blocks and transposes, features, ids, labels
  double training = 0;   ///< the layers' buffers, parameters and optimizer state during a step
  double peak = 0;       ///< the run's: max(load_peak, process + graph + training)
};

/// Predicted memory of one rank of `shape` (full-graph training; the largest block is taken to be the
/// mean one, as the permutations make it).
MemoryEstimate predict_memory(const ProblemSize& problem, const GridShape& shape,
                              const MachineProfile& machine);

/// A grid's predicted epoch.
struct GridCost {
  GridShape shape;    ///< the grid
  double comm_s = 0;  ///< communication
  double spmm_s = 0;  ///< sparse products
  double gemm_s = 0;  ///< dense products
  /// Element-wise passes (bias, activation, dropout and their gradients, the loss over the logits) at
  /// the memory bandwidth, and the layers' fixed costs (MachineProfile::layer_seconds)
  double other_s = 0;
  double total_s = 0;  ///< their sum
  /// Bytes each rank contributes per epoch to the layers' and the loss's collectives, counted as the
  /// communicator's statistics count them (comm_stats.hpp: an all-reduce's buffer, an all-gather's own
  /// block), in fp32; the reports' and checks' few scalars are not counted.
  double comm_bytes = 0;
  double memory_bytes = 0;       ///< per rank: predict_memory's peak
  double load_memory_bytes = 0;  ///< per rank: predict_memory's load peak
};

/// Predicted epoch cost of one grid.
GridCost predict_epoch(const ProblemSize& problem, const GridShape& shape, const MachineProfile& machine);
/// Every factorization of `ranks` into X x Y x Z, fastest first.
std::vector<GridCost> plan_grids(const ProblemSize& problem, int ranks, const MachineProfile& machine);

/// One change the memory model predicts lets a run fit its memory, with the prediction.
struct MemoryWayOut {
  std::string change;      ///< as the user would type it, e.g. "`recompute-aggregation`", "`grid` 1x2x4"
  GridShape shape;         ///< the grid it runs on
  int ranks = 0;           ///< its ranks
  bool recompute = false;  ///< with the aggregation recomputed in backward
  double peak_bytes = 0;   ///< its predicted peak per rank
  int64_t activation_bytes = 4;  ///< its kept aggregations' bytes a value (2: `activation-dtype` bf16)
  int64_t gemm_operand_bytes = 4;  ///< its GEMMs' operand bytes (2: `gemm-dtype` bf16)
};

/// Every way out the memory model predicts for `problem` on `shape` when it needs more than `budget_bytes`
/// per rank, in this order: the other grids of as many ranks that fit (fastest first, at most three);
/// recomputing the aggregation (on this grid, else on the fastest grid of as many ranks where that fits);
/// keeping the aggregations in bf16 (on this grid; not for GAT, which keeps none, nor with recomputing);
/// fp32 GEMMs for a run with bf16 GEMMs (on this grid: their operand copies go); the fewest more ranks
/// (doubling, up to 64 times as many) with the fastest grid that fits. Empty when nothing is predicted to
/// fit.
std::vector<MemoryWayOut> memory_ways_out(const ProblemSize& problem, const GridShape& shape,
                                          const MachineProfile& machine, double budget_bytes);

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
  double nnz;      ///< nonzeros of the local block
  double width;    ///< columns of the dense operand
  double rows;     ///< rows of the block
  double cols;     ///< columns of the block
  double seconds;  ///< measured time
};
/// See SpmmSample.
std::vector<double> fit_spmm_model(const std::vector<SpmmSample>& samples);
/// Predicted seconds of one local SpMM of a rows x cols block with nnz nonzeros and a dense operand of
/// `width` columns: eq. 4.4 where fitted, else the measured curve, else the roofline.
double predict_spmm_seconds(double nnz, double width, double rows, double cols,
                            const MachineProfile& machine);
/// eq. 4.4 terms of one local SpMM: sqrt(f), sqrt(f) cols / width, sqrt(f) rows / width with f = nnz * width.
std::vector<double> spmm_terms(double nnz, double width, double rows, double cols);

}  // namespace tessera
