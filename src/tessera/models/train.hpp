// SPDX-License-Identifier: BSD-3-Clause
// `tessera train` as a library call: typed options for every mode, and run_training, which loads the graph
// for the mode, builds the model (model.hpp), the batch source and the hooks the options ask for, and runs
// the Trainer. Applications that want their own model, graph or hooks assemble the same pieces themselves
// (docs/library.md).
#pragma once

#include <optional>
#include <string>

#include "tessera/comm/device_collectives.hpp"
#include "tessera/models/training/hooks.hpp"
#include "tessera/models/modes/minibatch.hpp"
#include "tessera/models/nn/model.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/training/trainer.hpp"
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera {

struct GraphMeta;  // graph/graph_file.hpp

/// How the graph is split over the ranks.
enum class TrainMode {
  Full,       ///< the full graph on one rank or a 3D grid (docs/architecture.md §4)
  Minibatch,  ///< uniform vertex mini-batches on a 4D grid (docs/architecture.md §5)
  Sampled     ///< partition-parallel neighbour samples with the prefetch cache (docs/architecture.md §6)
};
/// "full", "minibatch" or "sampled".
const char* train_mode_name(TrainMode mode);

/// What a full-graph run the memory model predicts not to fit does.
enum class MemoryPolicy {
  Auto,   ///< recompute the aggregation in backward where that fits (said in the log), else refuse
  Refuse  ///< refuse, listing every way out the model predicts
};

/// Everything a run needs, typed (the command line's strings are parsed in apps/).
struct TrainOptions {
  std::string data;                  ///< the graph file (docs/architecture.md §3)
  TrainMode mode = TrainMode::Full;  ///< how the graph is split
  /// Full: the 3D grid XxYxZ (none: one rank, 1x1x1); minibatch: DxXxYxZ. Sampled runs Px1x1x1.
  std::optional<GridShape> grid;
  bool auto_grid = false;         ///< full: the performance model picks the grid
  std::string machine = "local";  ///< auto_grid: a built-in machine profile
  std::string machine_file;       ///< auto_grid: ... or one measured by tessera bench
  /// Full mode: bytes each rank may use. The run stops before loading when the performance model's
  /// predicted peak exceeds it (and --grid auto picks among the grids that fit). -1: the memory available on
  /// the node when the run starts, shared by the node's ranks; 0: no check.
  int64_t memory_per_rank = -1;
  MemoryPolicy memory_policy = MemoryPolicy::Auto;  ///< full mode: a run predicted not to fit
  /// The library of host-path fp32 GEMMs (set_host_gemm_library; Auto: oneDNN where the build has it).
  HostGemmLibrary host_gemm = HostGemmLibrary::Auto;
  PermuteMode permute = PermuteMode::Double;  ///< full / minibatch on a grid (one rank: file order)
  bool overlap = false;                       ///< chunked SpMM with non-blocking all-reduces
  bool recompute_aggregation = false;         ///< see RunOptions
  CommDtype comm_dtype = CommDtype::F32;      ///< activations' all-reduces on the wire
  GemmDtype gemm_dtype = GemmDtype::F32;      ///< host-path float GEMMs' arithmetic (set_gemm_dtype)
  KernelPath kernels = KernelPath::Auto;      ///< which kernels run
  bool allow_tf32 = false;                    ///< vendor GEMMs may use TF32 tensor cores (set_vendor_tf32)
  CommBackend comm = CommBackend::Auto;       ///< what carries device collectives (device_collectives.hpp)
  bool normalize_features = false;            ///< divide each feature row by its sum
  ModelConfig model;            ///< in / out are taken from the data; model.seed keys everything
  AdamSettings optimizer;       ///< Adam's settings
  ScheduleSettings schedule;    ///< the learning rate's schedule (constant by default)
  double clip_grad_norm = 0;    ///< see TrainerOptions
  int64_t epochs = 200;         ///< epochs to train (counting a resumed run's)
  int64_t eval_every = 1;       ///< evaluate every K epochs and after the last; 0: never
  bool keep_last_step = false;  ///< see TrainerOptions
  bool stop_on_signal = false;  ///< see TrainerOptions
  MinibatchOptions minibatch;   ///< minibatch mode
  std::string partition;        ///< sampled: /partition/NAME; empty: metis-RANKS (block on one rank)
  /// sampled: read the partition from this file (tessera partition --output) instead of the graph file.
  std::string partition_file;
  SampledOptions sampled;        ///< sampled mode
  std::string metrics_path;      ///< JSON lines per epoch (and per step in sampled mode)
  std::string predictions_path;  ///< best-validation predicted class of every node, one per line
  std::string embeddings_path;   ///< best-validation last hidden layer of every node (HDF5)
  /// Keep every node's prediction and embedding in memory (TrainResult::node_outputs), as well as or instead
  /// of the files above.
  bool keep_node_outputs = false;
  std::string checkpoint_dir;    ///< DIR/checkpoint.h5
  int64_t checkpoint_every = 0;  ///< every K epochs; 0: at the end
  bool resume = false;           ///< continue from DIR/checkpoint.h5
  bool overwrite_checkpoint = false;  ///< without resume: replace a checkpoint already in DIR
  /// Resume although the checkpoint was written with other result-changing options or another graph (the
  /// differences are said in the log); without it they are refused.
  bool resume_force = false;
  int64_t patience = 0;  ///< stop after K evaluations without a better validation accuracy; 0: never
  bool quiet = false;    ///< no per-epoch console lines
  /// Time every kernel, copy and vendor call of the epochs after the first and print the largest at the
  /// end (KernelProfileReport); needs 2 epochs or more.
  bool profile_kernels = false;
  /// The console: the mode's extra lines per epoch; with verbose also every load phase as it ends (by
  /// default only phases of a second or more) and the load's phase summary.
  ConsoleOptions console;
  /// Merged into the metrics file's header record (run_training adds the grid, ranks, threads, dataset and
  /// host); `tessera train` adds its version and configuration.
  nlohmann::json metrics_header = nlohmann::json::object();
  /// Full / minibatch: bytes of one round of the load's exchanges (Graph3DOptions::exchange_budget).
  int64_t exchange_budget = kDefaultExchangeBudget;
};

/// Collective over `world`: the run the options describe (full mode on several ranks without a grid: the
/// grid --grid auto would pick). Throws CollectiveError (or Error) on bad input, naming the file or option.
TrainResult run_training(const TrainOptions& options, const Communicator& world);
/// The same with an application's hooks, run after the ones the options ask for, in this order (hooks.hpp
/// lists the library's); the run owns them.
TrainResult run_training(const TrainOptions& options, const Communicator& world,
                         std::vector<std::unique_ptr<TrainerHook>> hooks);

/// Collective: the checks run_training makes on the options before it reads anything (ranges, the grid's
/// form for the mode, kernels this build has); throws CollectiveError on every rank with the first problem.
void check_options(const TrainOptions& options, const Communicator& world);

/// Collective, before anything is loaded: every output path (metrics, predictions, embeddings, the
/// checkpoint) checked against the inputs (graph, partition file, the checkpoint resumed from) and each other
/// (PathPlan), the checkpoint directory created; throws CollectiveError with the first problem.
void check_paths(const TrainOptions& options, const Communicator& world);

/// The options that change a run's result, as a flat object (the run identity a checkpoint stores; the
/// graph's is added by the caller). Epochs, outputs and pure performance settings are left out.
nlohmann::json run_identity(const TrainOptions& options, int world_size);

/// What the performance model needs of a graph file's sizes and a model (plan_grids, predict_memory).
ProblemSize problem_size(const GraphMeta& meta, const ModelConfig& model, bool recompute_aggregation = false,
                         int64_t exchange_budget = kDefaultExchangeBudget);

}  // namespace tessera
