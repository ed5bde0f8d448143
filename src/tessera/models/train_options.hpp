// SPDX-License-Identifier: BSD-3-Clause
// What `tessera train` is asked, typed: one struct per concept, nested rather than copied, so that every
// option has one home — the model's in ModelConfig, the loop's in TrainerOptions, checkpoints' in
// CheckpointOptions, each mode's in its options, the prefetch cache's in PrefetchOptions — and the run's own
// (the data, the mode, the grid, the kernels, the outputs) here. The command line (src/tessera/cli) fills it;
// run_training (train.hpp) runs it. Adding an option: docs/architecture.md, "Adding an option".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tessera/comm/device_collectives.hpp"
#include "tessera/comm/grid_shape.hpp"
#include "tessera/comm/reduced_precision.hpp"
#include "tessera/core/enum_names.hpp"
#include "tessera/graph/permutation.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/models/modes/minibatch.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/models/nn/model.hpp"
#include "tessera/models/nn/schedule.hpp"
#include "tessera/models/training/hooks.hpp"
#include "tessera/models/training/trainer.hpp"
#include "tessera/parallel3d/layout.hpp"

namespace tessera {

/// How the graph is split over the ranks.
enum class TrainMode {
  Full,       ///< the full graph on one rank or a 3D grid (docs/architecture.md, "Full-graph training")
  Minibatch,  ///< uniform vertex mini-batches on a 4D grid (docs/architecture.md, "Mini-batch training")
  Sampled     ///< partition-parallel neighbour samples with the prefetch cache (docs/architecture.md)
};
/// The names of TrainMode's values (core/enum_names.hpp): what the command line, the bindings and messages
/// use.
inline constexpr EnumName<TrainMode> kTrainModeNames[] = {
    {TrainMode::Full, "full"}, {TrainMode::Minibatch, "minibatch"}, {TrainMode::Sampled, "sampled"}};
/// full or minibatch or sampled: the name of a value.
inline const char* train_mode_name(TrainMode mode) {
  return name_of(kTrainModeNames, mode);
}

/// What a full-graph run the memory model predicts not to fit does.
enum class MemoryPolicy {
  Auto,   ///< recompute the aggregation in backward where that fits (said in the log), else refuse
  Refuse  ///< refuse, listing every way out the model predicts
};
/// The names of MemoryPolicy's values (core/enum_names.hpp).
inline constexpr EnumName<MemoryPolicy> kMemoryPolicyNames[] = {{MemoryPolicy::Auto, "auto"},
                                                                {MemoryPolicy::Refuse, "refuse"}};

/// Full and mini-batch runs: the grid, and what the performance and memory models need to choose or check it.
struct GridOptions {
  /// Full: the 3D grid XxYxZ (none: one rank, 1x1x1); minibatch: DxXxYxZ. Sampled runs Px1x1x1.
  std::optional<GridShape> shape;
  bool automatic = false;         ///< full: the performance model picks the grid (`grid` auto)
  std::string machine = "local";  ///< automatic: a built-in machine profile
  std::string machine_file;       ///< automatic: ... or one measured by tessera bench
  /// Full mode: bytes each rank may use. The run stops before loading when the performance model's
  /// predicted peak exceeds it (and an automatic grid is one that fits). -1: the memory available on the node
  /// when the run starts, shared by the node's ranks; 0: no check.
  int64_t memory_per_rank = -1;
  MemoryPolicy memory_policy = MemoryPolicy::Auto;  ///< full mode: a run predicted not to fit
  PermuteMode permute = PermuteMode::Double;        ///< load balance on a grid (one rank: file order)
  /// Bytes of one round of the load's exchanges per rank (Graph3DOptions::exchange_budget).
  int64_t exchange_budget = kDefaultExchangeBudget;
};

/// How the kernels and collectives run: none of it changes what a model learns beyond float round-off
/// (except gemm_dtype, comm_dtype and activation_dtype, which round on purpose).
struct ComputeOptions {
  KernelPath kernels = KernelPath::Auto;  ///< which kernels run
  /// The library of host-path fp32 GEMMs (set_host_gemm_library; Auto: oneDNN where the build has it).
  HostGemmLibrary host_gemm = HostGemmLibrary::Auto;
  GemmDtype gemm_dtype = GemmDtype::F32;  ///< host-path float GEMMs' arithmetic (set_gemm_dtype)
  bool allow_tf32 = false;                ///< vendor GEMMs may use TF32 tensor cores (set_vendor_tf32)
  CommDtype comm_dtype = CommDtype::F32;  ///< activations' all-reduces on the wire
  CommBackend comm = CommBackend::Auto;   ///< what carries device collectives (device_collectives.hpp)
  bool overlap = false;                   ///< chunked SpMM with non-blocking all-reduces
  bool recompute_aggregation = false;     ///< full / minibatch: keep no A H for backward (RunOptions)
  StorageDtype activation_dtype = StorageDtype::F32;  ///< how A H is kept for backward (RunOptions)
};

/// What a run writes and prints besides checkpoints.
struct OutputOptions {
  std::string metrics;      ///< JSON lines per epoch (and per step in sampled mode)
  std::string predictions;  ///< best-validation predicted class of every node, one per line
  std::string embeddings;   ///< best-validation last hidden layer of every node (HDF5)
  /// Keep every node's prediction and embedding in memory (TrainResult::node_outputs), as well as or instead
  /// of the files above.
  bool keep_node_outputs = false;
  bool quiet = false;  ///< no per-epoch console lines
  /// The console: the mode's extra lines per epoch; with verbose also every load phase as it ends (by
  /// default only phases of a second or more) and the load's phase summary.
  ConsoleOptions console;
  /// Time every kernel, copy and vendor call of the epochs after the first and print the largest at the
  /// end (KernelProfileReport); needs 2 epochs or more.
  bool profile_kernels = false;
  /// Merged into the metrics file's header record (run_training adds the grid, ranks, threads, dataset and
  /// host); `tessera train` adds its version and configuration.
  nlohmann::json metrics_header = nlohmann::json::object();
};

/// What a run predicts.
enum class TaskKind {
  Auto,  ///< link where the graph file has link splits and no node labels, else node
  Node,  ///< each node's class (single-label) or tasks (multi-label), as the graph file's labels say
  Link   ///< whether node pairs are edges, from the graph file's /link splits (LinkLoss)
};
/// The names of TaskKind's values (core/enum_names.hpp).
inline constexpr EnumName<TaskKind> kTaskKindNames[] = {
    {TaskKind::Auto, "auto"}, {TaskKind::Node, "node"}, {TaskKind::Link, "link"}};

/// How a link task scores a node pair from its embeddings.
enum class LinkDecoderKind {
  Dot,  ///< h_u . h_v (the graph auto-encoder's)
  Mlp   ///< MLP(h_u * h_v) (MlpLinkDecoder, OGB's link baselines')
};
/// The names of LinkDecoderKind's values (core/enum_names.hpp).
inline constexpr EnumName<LinkDecoderKind> kLinkDecoderKindNames[] = {{LinkDecoderKind::Dot, "dot"},
                                                                      {LinkDecoderKind::Mlp, "mlp"}};

/// What the run learns and is judged by. Node tasks come from the graph file: single-label (softmax
/// cross-entropy) or multi-label (MultiLabelBinaryCrossEntropy, GraphMeta::multi_label); link tasks from its
/// /link splits (LinkLoss, full-graph mode).
struct TaskOptions {
  TaskKind kind = TaskKind::Auto;  ///< nodes or links
  /// Link tasks: the width of the model's output, the node embeddings pairs are scored by (0: `hidden`).
  int64_t embedding_dim = 0;
  int64_t link_negatives = 1;  ///< link tasks: negatives drawn per training pair each step
  int64_t link_batch = 0;      ///< link tasks: training pairs per step (0: all, one step per epoch)
  LinkDecoderKind link_decoder = LinkDecoderKind::Dot;  ///< link tasks: how a pair is scored
  int link_decoder_layers = 2;                          ///< the mlp decoder's linear layers
  int64_t link_decoder_hidden = 0;  ///< the mlp decoder's hidden width (0: the embeddings')
  /// The metric evaluation reports, the best epoch is chosen by and `patience` watches (make_metric).
  MetricKind metric = MetricKind::Auto;
  /// Multi-label: the weight of each task's positive entries, one value (every task) or one per task;
  /// empty: 1.
  std::vector<float> positive_weight;
};

/// Everything a run needs, typed (the command line's strings are parsed in src/tessera/cli).
struct TrainOptions {
  std::string data;                  ///< the graph file (docs/reference/graph-format.md)
  TrainMode mode = TrainMode::Full;  ///< how the graph is split
  bool normalize_features = false;   ///< divide each feature row by its sum
  /// How the node features are held: bf16 halves their memory (rounded once at load, after any
  /// normalization). Full graph and mini-batch: the 3D grid's input block, read by graph layer 0's SpMM
  /// (gcn or sage, which aggregate first there) and widened where an input dropout masks them and as
  /// mini-batch steps gather their rows. Sampled: the rows held, fetched and cached, widened as a step
  /// gathers them. Weights, gradients and activations stay fp32.
  StorageDtype feature_dtype = StorageDtype::F32;
  ModelConfig model;  ///< in / out are taken from the data; model.seed keys everything
  /// The loop: optimizer, epochs, evaluation interval, clipping (its seed and best_is_last come from the
  /// model and the data).
  TrainerOptions trainer;
  TaskOptions task;            ///< the metric, the multi-label loss's weights
  ScheduleSettings schedule;   ///< the learning rate's schedule (constant by default)
  int64_t patience = 0;        ///< stop after K evaluations without a better validation accuracy; 0: never
  GridOptions grid;            ///< full / minibatch: the grid
  ComputeOptions compute;      ///< kernels and collectives
  MinibatchOptions minibatch;  ///< minibatch mode
  SampledOptions sampled;      ///< sampled mode
  /// DIR/checkpoint.h5: dir (empty: none), every, resume, overwrite, accept_run_differences (resume although
  /// the checkpoint was written with other result-changing options or another graph). The run fills in its
  /// identity and lock.
  CheckpointOptions checkpoint;
  OutputOptions outputs;  ///< metrics, predictions, embeddings, the console
};

}  // namespace tessera
