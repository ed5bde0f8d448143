// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/train.hpp"

#include "tessera/models/grid_choice.hpp"
#include "tessera/models/link_task.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include <unistd.h>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/runtime.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/fingerprint.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/graph/partition.hpp"
#include "tessera/models/modes/full_graph.hpp"
#include "tessera/models/nn/link_loss.hpp"
#include "tessera/models/training/hooks.hpp"
#include "tessera/models/training/node_outputs.hpp"
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera {

namespace {

// Row chunks per sparse product under --overlap: enough to hide a chunk's all-reduce behind the next
// chunk's SpMM, few enough that each message stays large.
constexpr int kOverlapChunks = 4;
// Bounds that keep counts times ranks far from overflow.
constexpr int64_t kMaxBatch = int64_t(1) << 30;
constexpr int64_t kMaxEpochs = int64_t(1) << 40;

}  // namespace

void check_options(const TrainOptions& o, const Communicator& world) {
  std::string invalid;
  try {
    ModelConfig config = o.model;
    config.in = std::max<int64_t>(config.in, 1);
    config.out = std::max<int64_t>(config.out, 1);
    config.validate();
    o.trainer.optimizer.validate();
    require(o.trainer.epochs >= 1, "`epochs` must be at least 1, not ", o.trainer.epochs);
    o.schedule.validate(o.trainer.optimizer.lr, o.trainer.epochs);
    require(std::isfinite(o.trainer.clip_grad_norm) && o.trainer.clip_grad_norm >= 0,
            "`clip-grad-norm` must be finite and not negative, not ", o.trainer.clip_grad_norm);
    require(o.trainer.eval_every >= 0, "`eval-every` must not be negative, not ", o.trainer.eval_every);
    require(!o.outputs.profile_kernels || o.trainer.epochs >= 2,
            "`profile-kernels` leaves the first epoch out and needs `epochs` 2 or more, not ",
            o.trainer.epochs);
    require(o.outputs.console.details_every >= 0, "`details-every` must not be negative, not ",
            o.outputs.console.details_every);
    require(o.checkpoint.every >= 0, "`checkpoint-every` must not be negative");
    require(o.grid.exchange_budget >= 0, "`load-budget` must not be negative");
    require(o.patience >= 0, "`patience` must not be negative, not ", o.patience);
    require(o.task.embedding_dim >= 0, "`embedding-dim` must not be negative, not ", o.task.embedding_dim);
    require(o.task.link_batch >= 0 && o.task.link_batch <= kMaxBatch, "`link-batch` must be in [0, ",
            kMaxBatch, "], not ", o.task.link_batch);
    require(o.task.link_negatives >= 1 && o.task.link_negatives <= 1024,
            "`link-negatives` must be in [1, 1024], not ", o.task.link_negatives);
    require(o.patience == 0 || o.trainer.eval_every > 0,
            "`patience` needs evaluations (`eval-every` 0 turns them off)");
    require(!o.checkpoint.resume || !o.checkpoint.dir.empty(), "`resume` needs `checkpoint` DIR");
    require(!o.checkpoint.accept_run_differences || o.checkpoint.resume, "`resume-force` goes with `resume`");
    require(!o.checkpoint.overwrite || !o.checkpoint.dir.empty(),
            "`overwrite-checkpoint` needs `checkpoint` DIR");
    require(!o.checkpoint.overwrite || !o.checkpoint.resume,
            "`overwrite-checkpoint` starts over and `resume` continues: give one of them");
    require(o.sampled.partition_file.empty() || o.mode == TrainMode::Sampled,
            "`partition-file` is for `mode` sampled");
    for (KernelKind kind : {KernelKind::Spmm, KernelKind::Gemm, KernelKind::Elementwise})
      resolve_kernel_path(o.compute.kernels,
                          kind);  // a path this build lacks is refused before anything loads
    check_gemm_dtype(o.compute.gemm_dtype, o.compute.kernels);
    check_host_gemm_library(o.compute.host_gemm);
    require(o.checkpoint.every == 0 || !o.checkpoint.dir.empty(),
            "`checkpoint-every` needs `checkpoint` DIR");
    require(o.minibatch.steps_per_epoch >= 0, "`steps-per-epoch` must be at least 1, not ",
            o.minibatch.steps_per_epoch);
    require(o.minibatch.batch_size >= 0 && o.minibatch.batch_size <= kMaxBatch,
            "`batch-size` must be in [1, ", kMaxBatch, "], not ", o.minibatch.batch_size);
    const SampledOptions& s = o.sampled;
    require(s.batch_size >= 1 && s.batch_size <= kMaxBatch, "`batch-size` must be in [1, ", kMaxBatch,
            "] seeds per rank, not ", s.batch_size);
    require(s.steps_per_epoch >= 0, "`steps-per-epoch` must be at least 1, not ", s.steps_per_epoch);
    s.prefetch.validate();
    require(o.trainer.eval_every <= kMaxEpochs && o.checkpoint.every <= kMaxEpochs &&
                o.patience <= kMaxEpochs && o.trainer.epochs <= kMaxEpochs,
            "`epochs`, `eval-every`, `checkpoint-every` and `patience` must be at most ", kMaxEpochs);
    if (o.grid.shape)
      require(o.grid.shape->d >= 1 && o.grid.shape->x >= 1 && o.grid.shape->y >= 1 && o.grid.shape->z >= 1,
              "grid '", o.grid.shape->str(), "': every axis must be at least 1");
    if (o.mode == TrainMode::Minibatch)
      require(o.grid.shape.has_value(), "`mode` minibatch needs `grid` DxXxYxZ (e.g. ", world.size(),
              "x1x1x1)");
    if (o.mode == TrainMode::Sampled) {
      require(!o.grid.shape && !o.grid.automatic,
              "`grid` is for `mode` full / minibatch; `mode` sampled runs one replica per rank");
      require(!o.compute.recompute_aggregation,
              "`recompute-aggregation` is for `mode` full / minibatch (the sampled mode keeps no aggregation "
              "between passes)");
    }
    if (o.mode == TrainMode::Full)
      require(!o.grid.shape || o.grid.shape->d == 1,
              "`grid`: full-graph training uses a 3D grid (XxYxZ), not ", o.grid.shape->str());
  } catch (const Error& e) {
    invalid = e.what();
  }
  world.check(invalid.empty(), invalid);
}

namespace {

RunOptions run_options(const TrainOptions& o) {
  return RunOptions{o.compute.kernels, o.compute.overlap ? kOverlapChunks : 0, o.compute.comm_dtype,
                    o.compute.recompute_aggregation};
}

// What run_training learned of the graph before the load: its identity, for checkpoints and the split check.
// The multi-label loss's weight per task: none, one for every task, or one per task.
std::vector<float> task_weights(const TaskOptions& task, int64_t tasks) {
  const std::vector<float>& w = task.positive_weight;
  require(w.size() <= 1 || int64_t(w.size()) == tasks, "`pos-weight` gives ", w.size(), " weights for ",
          tasks, " tasks (one for every task, or one per task)");
  return w.size() == 1 ? std::vector<float>(size_t(tasks), w[0]) : w;
}

struct RunContext {
  GraphIdentity graph;
  bool link = false;                                // a link task (TaskKind resolved)
  nlohmann::json run;                               // the run identity a checkpoint stores
  bool best_is_last = false;                        // no validation nodes
  std::shared_ptr<CheckpointLock> checkpoint_lock;  // held from before the load to the end of the run
  std::vector<std::unique_ptr<TrainerHook>> hooks;  // added after the library's, in this order
  std::unique_ptr<LinkLoss> link_loss;              // a link task's loss, made before the load
};

// The metrics file's header: what ran where, on which data (rank 0's host and threads).
nlohmann::json metrics_header(const TrainOptions& o, const Communicator& world, const Model& model,
                              const RunContext& context) {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  const GraphMeta& g = context.graph.meta;
  nlohmann::json j = {{"grid", model.grid().shape().str()},
                      {"ranks", world.size()},
                      {"threads", thread_choice().threads},
                      {"host", host},
                      {"dataset",
                       {{"name", g.name},
                        {"path", o.data},
                        {"nodes", g.num_nodes},
                        {"edges", g.num_edges},
                        {"features", g.num_features},
                        {"classes", g.num_classes}}}};
  if (o.outputs.metrics_header.is_object()) j.update(o.outputs.metrics_header);
  return j;
}

// After a sampled run: the best-validation parameters evaluated exactly (layer-wise, every neighbour of
// every node), where that fits, said in the log beside what the sampled evaluations said.
class ExactFinalEvaluation : public TrainerHook {
 public:
  explicit ExactFinalEvaluation(SampledSource& source) : source_(source) {}
  void on_finish(Trainer& trainer) override {
    const TrainingProgress& p = trainer.progress();
    if (p.epochs_done == 0 || !source_.exact_fits(trainer.model())) return;
    Stopwatch watch;
    Accuracy a;
    trainer.with_best_state([&] { a = source_.evaluate_exact(trainer.model(), trainer.loss()); });
    char line[256];
    std::snprintf(line, sizeof(line),
                  "exact evaluation of epoch %lld's parameters (layer-wise, every neighbour, %.2f s): train "
                  "%.4f valid %.4f test %.4f",
                  (long long)(p.best_epoch > 0 ? p.best_epoch : p.epochs_done), watch.seconds(), a.train,
                  a.valid, a.test);
    log_line(line);
  }

 private:
  SampledSource& source_;
};

// The hooks the options ask for, then the run's own (context.hooks: the mode's, the application's), then the
// loop.
TrainResult train_with(Model& model, BatchSource& source, const TrainOptions& o, const Communicator& world,
                       RunContext& context, nlohmann::json load = nullptr) {
  TrainerOptions loop = o.trainer;
  loop.best_is_last = context.best_is_last;
  Trainer trainer(model, source, world, loop);
  if (context.link_loss)
    trainer.set_loss(std::move(context.link_loss));
  else if (context.graph.meta.multi_label)
    trainer.set_loss(std::make_unique<MultiLabelBinaryCrossEntropy>(
        task_weights(o.task, context.graph.meta.num_classes), o.task.metric));
  if (!o.schedule.constant()) {
    trainer.set_schedule(make_schedule(o.schedule, o.trainer.optimizer.lr));
    if (!o.outputs.quiet) {
      char lr[32];
      std::snprintf(lr, sizeof(lr), "%g", double(o.trainer.optimizer.lr));
      log_line(std::string("learning rate ") + lr + ", " + trainer.schedule().describe());
    }
  }
  // The checkpointer first: a resume sets the progress the others start from.
  if (!o.checkpoint.dir.empty()) {
    CheckpointOptions c = o.checkpoint;
    c.lock = context.checkpoint_lock;
    c.run = context.run;
    trainer.add_hook(std::make_unique<Checkpointer>(std::move(c)));
  }
  if (!o.outputs.quiet) trainer.add_hook(std::make_unique<ConsoleReport>(o.outputs.console));
  if (!o.outputs.metrics.empty())
    trainer.add_hook(std::make_unique<MetricsFile>(o.outputs.metrics, std::move(load),
                                                   metrics_header(o, world, model, context)));
  if (o.patience > 0) trainer.add_hook(std::make_unique<EarlyStopping>(o.patience));
  NodeOutputArrays kept;
  if (!o.outputs.predictions.empty() || !o.outputs.embeddings.empty() || o.outputs.keep_node_outputs)
    trainer.add_hook(std::make_unique<NodeOutputs>(
        NodeOutputPaths{o.outputs.predictions, o.outputs.embeddings, o.data,
                        o.outputs.keep_node_outputs ? &kept : nullptr, context.link}));
  if (o.outputs.profile_kernels) trainer.add_hook(std::make_unique<KernelProfileReport>());
  for (std::unique_ptr<TrainerHook>& hook : context.hooks) trainer.add_hook(std::move(hook));
  TrainResult result = trainer.run();
  if (o.outputs.keep_node_outputs) result.node_outputs = std::move(kept);
  return result;
}

// "load phases (slowest rank s, largest peak memory MiB after it): read 0.20 s 40 MiB; ...; adjacency 0
// 2.10 s 800 MiB in 3 rounds; ...": rounds where the exchange budget cut a phase's exchange.
std::string describe_load_phases(const std::vector<LoadPhase>& phases) {
  std::string line = "load phases (slowest rank s, largest peak memory MiB after it):";
  char part[128];
  for (const LoadPhase& p : phases) {
    int at = std::snprintf(part, sizeof(part), " %s %.2f s", p.name.c_str(), p.seconds);
    if (p.peak_bytes > 0)
      at +=
          std::snprintf(part + at, sizeof(part) - size_t(at), " %.0f MiB", double(p.peak_bytes) / 1048576.0);
    if (p.rounds > 1) std::snprintf(part + at, sizeof(part) - size_t(at), " in %d rounds", p.rounds);
    line += part;
    line += ';';
  }
  line.pop_back();
  return line;
}

nlohmann::json load_phases_json(const std::vector<LoadPhase>& phases) {
  nlohmann::json list = nlohmann::json::array();
  for (const LoadPhase& p : phases) {
    nlohmann::json phase = {{"phase", p.name}, {"s", p.seconds}, {"rounds", p.rounds}};
    if (p.peak_bytes > 0) phase["peak_bytes"] = p.peak_bytes;
    list.push_back(phase);
  }
  return {{"load_phases", list}};
}

int64_t largest_peak(const Communicator& world) {
  return all_reduce_value(world, int64_t(peak_rss_bytes()), ReduceOp::Max, "report");
}

std::string peak_memory(const Communicator& world) {
  char text[64];
  std::snprintf(text, sizeof(text), "peak memory %.1f MiB per rank", double(largest_peak(world)) / 1048576.0);
  return text;
}

// The grid, its device collectives on NCCL where o.compute.comm resolves to it (collective).
ProcessGrid make_grid(const Communicator& world, const GridShape& shape, CommBackend comm) {
  ProcessGrid grid(world, shape);
  const CommBackend resolved = resolve_comm_backend(comm, world);
  set_mpi_host_staging(resolved == CommBackend::MpiHost);
  if (resolved == CommBackend::Nccl) grid.attach_nccl();
  return grid;
}

const char* carrier_name(const ProcessGrid& grid) {
  return grid.uses_nccl() ? "nccl" : mpi_host_staging() ? "mpi on host copies" : "mpi";
}

TrainResult run_on_grid(TrainOptions o, const Communicator& world, RunContext& context) {
  Stopwatch load_watch;
  const GraphFileReader reader(world, o.data);
  // The loader checks every value as it reads it (read_graph_rows): an id out of range is a message, not a
  // crash, and the file is read once. read, labels, degrees, the adjacency layouts, features:
  const int phase_count = 4 + std::min(o.model.layers, 6);
  int phases_done = 0;
  const auto progress = [&](const LoadPhase& p) {
    ++phases_done;
    if (o.outputs.quiet || (!o.outputs.console.verbose && p.seconds < 1.0))
      return;  // a slow phase is worth a line
    char line[192];
    std::snprintf(line, sizeof(line), "load: %s done, phase %d of %d, %.2f s%s (rank 0, %.0f MiB peak)",
                  p.name.c_str(), phases_done, phase_count, p.seconds,
                  p.rounds > 1 ? (" in " + std::to_string(p.rounds) + " rounds").c_str() : "",
                  double(peak_rss_bytes()) / 1048576.0);
    log_line(line);
  };
  GridShape shape = o.grid.shape ? *o.grid.shape : GridShape{};
  if (o.mode == TrainMode::Full) shape = choose_full_grid(o, reader.meta(), world);
  if (o.mode == TrainMode::Minibatch)
    world.check(shape.size() == world.size(), "`grid` " + shape.str() + " has " +
                                                  std::to_string(shape.size()) + " ranks but the job has " +
                                                  std::to_string(world.size()));
  const ProcessGrid grid = make_grid(world, shape, o.compute.comm);
  if (context.link) context.link_loss = link_loss_of(o, reader, world);
  Graph3DOptions load = graph3d_options(o);
  load.require_labels = !context.link;
  load.transposes = o.mode == TrainMode::Full;  // mini-batch steps cut their own transposes
  load.on_phase = progress;
  load.exchange_budget = o.grid.exchange_budget;
  const Graph3D graph = load_graph_3d(reader, grid, load);
  ModelConfig config = o.model;
  config.in = reader.meta().num_features;
  if (!context.link) config.out = reader.meta().num_classes;
  const std::unique_ptr<Sequential> model =
      build_model(config, grid, run_options(o), o.mode == TrainMode::Full);
  std::unique_ptr<BatchSource> source;
  if (o.mode == TrainMode::Full)
    source = std::make_unique<FullGraphSource>(graph, grid, world, *model,
                                               context.link_loss ? context.link_loss->steps_per_epoch() : 1);
  else
    source = std::make_unique<MinibatchSource>(graph, grid, world, o.minibatch, *model);
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "loaded %s on grid %s in %.2f s (permute %s%s, comm %s, %s): adjacency blocks max/mean nonzeros "
      "%.3f; model %s; %s",
      o.data.c_str(), shape.str().c_str(), load_watch.seconds(), permute_mode_name(load.permute),
      graph.layout.p1().chunk() > 1 ? (" in runs of " + std::to_string(graph.layout.p1().chunk())).c_str()
                                    : "",
      carrier_name(grid), peak_memory(world).c_str(),
      graph.mean_nnz > 0 ? graph.max_nnz / graph.mean_nnz : 1.0, config.describe().c_str(),
      source->describe().c_str());
  log_line(line);
  if (!o.outputs.quiet && o.outputs.console.verbose) log_line(describe_load_phases(graph.load_phases));
  TrainResult result = train_with(*model, *source, o, world, context, load_phases_json(graph.load_phases));
  result.peak_bytes = largest_peak(world);
  return result;
}

TrainResult run_sampled(const TrainOptions& o, const Communicator& world, RunContext& context) {
  Stopwatch load_watch;
  if (!o.sampled.partition_file.empty())
    check_partition_file(world, o.sampled.partition_file, context.graph.meta.num_nodes,
                         context.graph.fingerprint);
  const std::string partition = !o.sampled.partition.empty()
                                    ? o.sampled.partition
                                    : default_partition(world, o.data, o.sampled.partition_file);
  PartitionedLoadOptions load;
  load.partition_file = o.sampled.partition_file;
  load.require_labels = !context.link;
  std::shared_ptr<LinkTask> links;
  if (context.link) {  // read in the file's ids, renumbered as the graph is
    links = std::make_shared<LinkTask>(read_link_task(GraphFileReader(world, o.data), world));
    load.renumber = link_task_ids(*links);
  }
  PartitionedGraph graph = load_partitioned(world, o.data, partition, load);
  if (o.normalize_features)
    normalize_feature_rows(
        HostMatrix<float>(graph.features.data(), size_t(graph.count), size_t(graph.num_features)));
  const ProcessGrid grid = make_grid(world, GridShape{world.size(), 1, 1, 1}, o.compute.comm);
  ModelConfig config = o.model;
  config.in = graph.num_features;
  if (!context.link) config.out = graph.num_classes;
  const std::unique_ptr<Sequential> model = build_model(config, grid, run_options(o), false);
  SampledSource source(graph, grid, world, o.sampled, *model);
  if (context.link) {
    source.train_links(links, o.task.link_negatives);
    world.run_agreed([&] {
      context.link_loss = std::make_unique<LinkLoss>(
          links, LinkLossOptions{o.model.seed, o.task.link_negatives, o.task.metric, 0});
    });
  }
  int64_t gradient_bytes = 0;
  for (const ParameterRef& p : model->parameters()) gradient_bytes += 4 * p.param->size();
  source.set_gradient_bytes(gradient_bytes);
  const std::string peak = peak_memory(world);  // collective: every rank, before the rank-0 line
  log_line("loaded " + o.data + " (partition " + partition + ") in " +
           std::to_string(load_watch.seconds()).substr(0, 5) + " s (" + peak + "); model " +
           config.describe() + "; " + source.describe());
  // The exact final evaluation comes before the application's hooks, which see its log line first.
  if (o.sampled.exact_final && o.trainer.eval_every > 0 && !o.outputs.quiet)
    context.hooks.insert(context.hooks.begin(), std::make_unique<ExactFinalEvaluation>(source));
  TrainResult result = train_with(*model, source, o, world, context);
  result.prefetch = source.totals();
  result.peak_bytes = largest_peak(world);
  return result;
}

}  // namespace

ProblemSize problem_size(const GraphMeta& meta, const ModelConfig& model, bool recompute_aggregation,
                         int64_t exchange_budget) {
  ProblemSize size;
  size.recompute = recompute_aggregation;
  size.exchange_budget = exchange_budget;
  size.symmetric_graph = meta.symmetric;
  size.tasks = meta.multi_label ? meta.num_classes : 0;
  size.nodes = meta.num_nodes;
  size.edges = meta.num_edges;
  size.symmetric = normalization_for(model.kind) == Normalization::Symmetric;
  size.nnz = meta.num_edges + (size.symmetric ? meta.num_nodes : 0);
  size.dims.push_back(meta.num_features);
  const bool gat = model.kind == ModelKind::Gat;
  for (int l = 1; l < model.layers; ++l) size.dims.push_back(gat ? model.heads * model.hidden : model.hidden);
  size.dims.push_back(model.out > 0 ? model.out : meta.num_classes);  // a link task's: its embeddings
  size.terms = model.kind == ModelKind::Sage ? 2 : 1;
  if (gat) size.heads = model.heads, size.output_heads = model.output_heads;
  size.input_dropout = model.input_dropout > 0;
  size.norm = model.norm != NormKind::None;
  return size;
}

void check_paths(const TrainOptions& o, const Communicator& world) {
  PathPlan plan;
  plan.input(o.data, "`data`");
  plan.input(o.sampled.partition_file, "`partition-file`");
  plan.input(o.grid.machine_file, "`machine-file`");
  if (!o.checkpoint.dir.empty()) {
    plan.output_directory(o.checkpoint.dir, "`checkpoint`");
    const std::string checkpoint = Checkpointer::path_in(o.checkpoint.dir);
    // Resumed from, it is rewritten by design; no other output may name it either way.
    if (o.checkpoint.resume)
      plan.input(checkpoint, "`checkpoint` (the checkpoint resumed from)");
    else
      plan.output_file(checkpoint, "`checkpoint` (DIR/checkpoint.h5)");
  }
  plan.output_file(o.outputs.metrics, "`metrics`");
  plan.output_file(o.outputs.predictions, "`save-predictions`");
  plan.output_file(o.outputs.embeddings, "`save-embeddings`");
  world.run_on(0, [&] { plan.check_and_prepare(); });
}

namespace {
// A float option as the decimal it was given as (0.1, not 0.10000000149011612).
double decimal(float value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.7g", double(value));
  return std::strtod(text, nullptr);
}
}  // namespace

nlohmann::json run_identity(const TrainOptions& o, int world_size) {
  const AdamSettings& a = o.trainer.optimizer;
  nlohmann::json j = {{"mode", train_mode_name(o.mode)},
                      {"optimizer", optimizer_name(a.kind)},
                      {"lr", decimal(a.lr)},
                      {"beta1", decimal(a.beta1)},
                      {"beta2", decimal(a.beta2)},
                      {"eps", decimal(a.eps)},
                      {"weight_decay", decimal(a.weight_decay)},
                      {"dropout", decimal(o.model.dropout)},
                      {"input_dropout", decimal(o.model.input_dropout)},
                      {"normalize_features", o.normalize_features},
                      {"eval_every", o.trainer.eval_every},
                      {"patience", o.patience},
                      {"comm_dtype", o.compute.comm_dtype == CommDtype::Bf16 ? "bf16" : "f32"},
                      {"gemm_dtype", o.compute.gemm_dtype == GemmDtype::Bf16 ? "bf16" : "f32"}};
  // Only where set, so that checkpoints of runs without them still resume.
  if (o.trainer.selection != Selection::Accuracy) j["selection"] = selection_name(o.trainer.selection);
  const ScheduleSettings& schedule = o.schedule;
  if (!schedule.constant()) {
    j["lr_schedule"] = schedule_name(schedule.kind);
    if (schedule.warmup_epochs > 0) j["lr_warmup"] = schedule.warmup_epochs;
    if (schedule.kind == ScheduleKind::Step) j["lr_step"] = {schedule.step_every, schedule.gamma};
    if (schedule.kind == ScheduleKind::Cosine) j["lr_min"] = schedule.min_lr;
    // The factors depend on the run's length: resuming with other --epochs would be another run.
    if (schedule.depends_on_epochs()) j["epochs"] = o.trainer.epochs;
  }
  if (o.trainer.clip_grad_norm > 0) j["clip_grad_norm"] = o.trainer.clip_grad_norm;
  if (o.model.kind == ModelKind::Gat) j["attention_dropout"] = decimal(o.model.attention_dropout);
  if (o.task.metric != MetricKind::Auto) j["metric"] = name_of(kMetricKindNames, o.task.metric);
  if (!o.task.positive_weight.empty()) {
    std::vector<double> weights;
    for (float w : o.task.positive_weight) weights.push_back(decimal(w));
    j["pos_weight"] = weights;
  }
  // Full-graph runs resume on any grid (the same model up to float round-off); the data-parallel split of
  // mini-batch and sampled runs decides which samples each step trains on.
  if (o.mode == TrainMode::Minibatch) {
    j["replicas"] = o.grid.shape ? o.grid.shape->d : 1;
    j["batch_size"] = o.minibatch.batch_size;
    j["batch_fraction"] = o.minibatch.batch_fraction;
    j["steps_per_epoch"] = o.minibatch.steps_per_epoch;
  }
  if (o.mode == TrainMode::Sampled) {
    j["ranks"] = world_size;
    j["batch_size"] = o.sampled.batch_size;
    j["fanouts"] = o.sampled.fanouts;
    j["steps_per_epoch"] = o.sampled.steps_per_epoch;
    j["partition"] = o.sampled.partition;
    if (o.sampled.exact_eval) j["eval"] = "exact";  // which epoch is the best (absent: sampled)
  }
  return j;
}

namespace {

// The graph's task against what the options ask of it, on every rank before the load.
void check_task(const TrainOptions& o, const GraphMeta& meta, const Communicator& world) {
  world.run_agreed([&] {
    if (is_link_task(o, meta)) return check_link_task(o, meta);
    require(meta.num_classes > 0, o.data, " has no node labels: train its link splits with `task` link");
    make_metric(o.task.metric, meta.multi_label);
    require(meta.multi_label || o.task.positive_weight.empty(),
            "`pos-weight` weighs the positive labels of a ", "multi-label graph; ", o.data,
            " is single-label");
    task_weights(o.task, meta.num_classes);
    if (!meta.multi_label) return;
    require(o.outputs.predictions.empty(), o.data,
            " is multi-label: `save-predictions` writes one class per node; its tasks' predictions and ",
            "probabilities come from tessera predict (`checkpoint` DIR, then predict `checkpoint` DIR ",
            "`probabilities`)");
  });
}

// Before the load: the graph's identity, and what an empty validation split means for the run.
RunContext prepare_run(const TrainOptions& o, const Communicator& world) {
  RunContext context;
  context.graph = graph_identity(world, o.data);
  check_task(o, context.graph.meta, world);
  context.link = is_link_task(o, context.graph.meta);
  const auto valid = context.graph.splits.find("valid");
  bool has_valid = valid != context.graph.splits.end() && valid->second > 0;
  if (context.link) {
    const GraphFileReader reader(world, o.data);
    const std::vector<LinkSplitInfo>& splits = reader.link_splits();
    has_valid = std::any_of(splits.begin(), splits.end(),
                            [](const LinkSplitInfo& s) { return s.name == "valid" && s.edges > 0; });
  }
  world.check(has_valid || o.patience == 0, o.data + ": no validation nodes (split 'valid' is " +
                                                (valid == context.graph.splits.end() ? "missing" : "empty") +
                                                "), so `patience` cannot work; train with `patience` 0");
  context.run = run_identity(o, world.size());
  if (context.link)
    context.run.update({{"task", "link"},
                        {"embedding_dim", embedding_width(o)},
                        {"link_negatives", o.task.link_negatives},
                        {"link_batch", o.task.link_batch}});
  context.run["graph_fingerprint"] = context.graph.fingerprint;
  context.run["graph_nodes"] = context.graph.meta.num_nodes;
  context.run["graph_edges"] = context.graph.meta.num_edges;
  // Refused before the load; with --resume-force the checkpointer lists the differences as it resumes.
  if (o.checkpoint.resume && !o.checkpoint.accept_run_differences)
    check_checkpoint_run(Checkpointer::path_in(o.checkpoint.dir), context.run, world);
  if (!has_valid && o.trainer.eval_every > 0) {
    context.best_is_last = true;
    if (!o.outputs.quiet)
      log_line(o.data +
               " has no validation nodes: the best-validation record (and node outputs) is the "
               "last evaluated epoch");
  }
  return context;
}

}  // namespace

TrainResult run_training(const TrainOptions& options, const Communicator& world) {
  return run_training(options, world, {});
}

TrainResult run_training(const TrainOptions& given, const Communicator& world,
                         std::vector<std::unique_ptr<TrainerHook>> hooks) {
  TrainOptions options = given;
  // Several ranks and no grid: the performance model picks one, as --grid auto would (said in the log).
  if (options.mode == TrainMode::Full && !options.grid.shape && !options.grid.automatic && world.size() > 1) {
    options.grid.automatic = true;
    log_line("no `grid` on " + std::to_string(world.size()) + " ranks: picking one as `grid` auto");
  }
  check_options(options, world);
  check_paths(options, world);
  // Taken before anything else reads or writes: a second job on this directory stops here.
  std::shared_ptr<CheckpointLock> lock;
  if (!options.checkpoint.dir.empty()) {
    lock = std::make_shared<CheckpointLock>(options.checkpoint.dir, world);
    world.run_on(0, [&] {
      refuse_existing_checkpoint(options.checkpoint.dir, options.checkpoint.resume,
                                 options.checkpoint.overwrite);
    });
  }
  // Node outputs of a reordered graph go in its original order: its original ids are checked now, not
  // after the training.
  if (!options.outputs.predictions.empty() || !options.outputs.embeddings.empty())
    read_output_order(world, options.data);
  RunContext context = prepare_run(options, world);
  if (context.link) options.model.out = embedding_width(options);  // the model outputs node embeddings
  context.checkpoint_lock = std::move(lock);
  context.hooks = std::move(hooks);
  set_vendor_tf32(options.compute.allow_tf32);
  set_gemm_dtype(options.compute.gemm_dtype);
  set_host_gemm_library(options.compute.host_gemm);
  if (options.compute.gemm_dtype == GemmDtype::Bf16 && !options.outputs.quiet)
    log_line("gemm: host GEMMs round both operands to bf16 and sum in fp32 (oneDNN)");
  // Before the load, which can be long: a wrong thread count is the first thing to see.
  if (thread_choice().known && !options.outputs.quiet) log_line(thread_choice().describe());
  return options.mode == TrainMode::Sampled ? run_sampled(options, world, context)
                                            : run_on_grid(options, world, context);
}

}  // namespace tessera
