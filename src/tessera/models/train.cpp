// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/train.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/runtime.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/graph/fingerprint.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/models/grid_choice.hpp"
#include "tessera/models/link_task.hpp"
#include "tessera/models/run_context.hpp"
#include "tessera/models/training/checkpoint.hpp"
#include "tessera/models/training/hooks.hpp"
#include "tessera/models/training/node_outputs.hpp"
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera {

namespace {

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
    require(
        o.compute.activation_dtype == StorageDtype::F32 || o.model.kind != ModelKind::Gat,
        "`activation-dtype` bf16 is for `model` gcn / sage (layers that aggregate first keep A H in bf16); "
        "a GAT keeps its activations in fp32");
    if (o.mode == TrainMode::Full)
      require(!o.grid.shape || o.grid.shape->d == 1,
              "`grid`: full-graph training uses a 3D grid (XxYxZ), not ", o.grid.shape->str());
  } catch (const Error& e) {
    invalid = e.what();
  }
  world.check(invalid.empty(), invalid);
}

// The multi-label loss's weight per task: none, one for every task, or one per task.
std::vector<float> task_weights(const TaskOptions& task, int64_t tasks) {
  const std::vector<float>& w = task.positive_weight;
  require(w.size() <= 1 || int64_t(w.size()) == tasks, "`pos-weight` gives ", w.size(), " weights for ",
          tasks, " tasks (one for every task, or one per task)");
  return w.size() == 1 ? std::vector<float>(size_t(tasks), w[0]) : w;
}

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
  if (o.feature_dtype != StorageDtype::F32) j["feature_dtype"] = storage_dtype_name(o.feature_dtype);
  if (o.compute.activation_dtype != StorageDtype::F32)
    j["activation_dtype"] = storage_dtype_name(o.compute.activation_dtype);
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
    require(o.task.link_decoder == LinkDecoderKind::Dot, "`link-decoder` scores node pairs of a link task; ",
            o.data, " trains a node task");
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
  context.graph = std::make_shared<const GraphIdentity>(graph_identity(world, o.data));
  check_task(o, context.graph->meta, world);
  context.link = is_link_task(o, context.graph->meta);
  const auto valid = context.graph->splits.find("valid");
  bool has_valid = valid != context.graph->splits.end() && valid->second > 0;
  if (context.link) {
    const GraphFileReader reader(world, o.data);
    const std::vector<LinkSplitInfo>& splits = reader.link_splits();
    has_valid = std::any_of(splits.begin(), splits.end(),
                            [](const LinkSplitInfo& s) { return s.name == "valid" && s.edges > 0; });
  }
  world.check(has_valid || o.patience == 0, o.data + ": no validation nodes (split 'valid' is " +
                                                (valid == context.graph->splits.end() ? "missing" : "empty") +
                                                "), so `patience` cannot work; train with `patience` 0");
  context.run = run_identity(o, world.size());
  if (context.link)
    context.run.update({{"task", "link"},
                        {"embedding_dim", embedding_width(o)},
                        {"link_negatives", o.task.link_negatives},
                        {"link_batch", o.task.link_batch}});
  context.run["graph_fingerprint"] = context.graph->fingerprint;
  context.run["graph_nodes"] = context.graph->meta.num_nodes;
  context.run["graph_edges"] = context.graph->meta.num_edges;
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

// What runs in bf16, as one line ("" where nothing does): the features' storage, the kept aggregations,
// the host GEMMs, the multiply's all-reduces on the wire.
std::string describe_bf16(const TrainOptions& o) {
  std::vector<std::string> parts;
  if (o.feature_dtype == StorageDtype::Bf16)
    parts.push_back(o.mode == TrainMode::Sampled
                        ? "features: held, fetched and cached in bf16 (rounded once at load, read as fp32)"
                    : o.model.kind == ModelKind::Gat
                        ? "features: held in bf16 (rounded once at load; widened into one fp32 copy for "
                          "gat's first layer, which transforms them, and by the steps' gathers)"
                        : "features: held in bf16 (rounded once at load; graph layer 0's SpMM and the "
                          "steps' gathers read them as fp32)");
  if (o.compute.activation_dtype == StorageDtype::Bf16)
    parts.push_back(
        "activations: layers that aggregate first keep A H for the weight gradient in bf16 "
        "(the forward's product reads the fp32 sums)");
  if (o.compute.gemm_dtype == GemmDtype::Bf16)
    parts.push_back("gemm: host GEMMs round both operands to bf16 and sum in fp32 (oneDNN)");
  if (o.compute.comm_dtype == CommDtype::Bf16)
    parts.push_back(o.mode == TrainMode::Sampled
                        ? "comm: bf16 asked, but a sampled step's layers multiply on the rank's own blocks "
                          "(no all-reduce inside the multiply; gradients are summed in fp32)"
                        : "comm: the multiply's all-reduces send bf16 (each chunk summed in fp32, rounded "
                          "once)");
  std::string line;
  for (const std::string& part : parts) line += (line.empty() ? "" : "; ") + part;
  return line;
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
  // What runs in bf16, said before the load: it changes every number after it.
  if (const std::string bf16 = describe_bf16(options); !bf16.empty() && !options.outputs.quiet)
    log_line(bf16);
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
  // Before the load, which can be long: a wrong thread count is the first thing to see.
  if (thread_choice().known && !options.outputs.quiet) log_line(thread_choice().describe());
  return options.mode == TrainMode::Sampled ? run_sampled(options, world, context)
                                            : run_on_grid(options, world, context);
}

}  // namespace tessera
