// SPDX-License-Identifier: BSD-3-Clause
// run_training's two drivers after the checks: the 3D grid's (full graph, mini-batches) and the sampled
// mode's, each loading the graph, building the model and its batch source, and running the loop with the
// hooks the options ask for.
#include <unistd.h>

#include <cstdio>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/fingerprint.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/graph/partition.hpp"
#include "tessera/models/grid_choice.hpp"
#include "tessera/models/link_task.hpp"
#include "tessera/models/modes/full_graph.hpp"
#include "tessera/models/run_context.hpp"
#include "tessera/models/training/hooks.hpp"
#include "tessera/models/training/node_outputs.hpp"

namespace tessera {

namespace {

// Row chunks per sparse product under --overlap: enough to hide a chunk's all-reduce behind the next
// chunk's SpMM, few enough that each message stays large.
constexpr int kOverlapChunks = 4;

RunOptions run_options(const TrainOptions& o) {
  RunOptions run{o.compute.kernels, o.compute.overlap ? kOverlapChunks : 0, o.compute.comm_dtype,
                 o.compute.recompute_aggregation};
  // A sampled step's input rows are widened as they are gathered: its model takes fp32 input.
  if (o.mode != TrainMode::Sampled) run.feature_dtype = o.feature_dtype;
  run.activation_dtype = o.compute.activation_dtype;
  return run;
}

// The metrics file's header: what ran where, on which data (rank 0's host and threads).
nlohmann::json metrics_header(const TrainOptions& o, const Communicator& world, const Model& model,
                              const RunContext& context) {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  const GraphMeta& g = context.graph->meta;
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
  else if (context.graph->meta.multi_label)
    trainer.set_loss(std::make_unique<MultiLabelBinaryCrossEntropy>(
        task_weights(o.task, context.graph->meta.num_classes), o.task.metric));
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

}  // namespace

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
  load.feature_dtype = o.feature_dtype;
  const Graph3D graph = load_graph_3d(reader, grid, load);
  ModelConfig config = o.model;
  config.in = reader.meta().num_features;
  if (!context.link) config.out = reader.meta().num_classes;
  const std::unique_ptr<Sequential> model =
      build_model(config, grid, run_options(o), o.mode == TrainMode::Full);
  if (context.link_loss) attach_link_decoder(o, *model, *context.link_loss);
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
      graph.mean_nnz > 0 ? graph.max_nnz / graph.mean_nnz : 1.0, model->describe().c_str(),
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
    check_partition_file(world, o.sampled.partition_file, context.graph->meta.num_nodes,
                         context.graph->fingerprint);
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
  load.normalize_rows = o.normalize_features;
  load.feature_dtype = o.feature_dtype;
  PartitionedGraph graph = load_partitioned(world, o.data, partition, load);
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
    attach_link_decoder(o, *model, *context.link_loss);
  }
  int64_t gradient_bytes = 0;
  for (const ParameterRef& p : model->parameters()) gradient_bytes += 4 * p.param->size();
  source.set_gradient_bytes(gradient_bytes);
  const std::string peak = peak_memory(world);  // collective: every rank, before the rank-0 line
  log_line("loaded " + o.data + " (partition " + partition + ") in " +
           std::to_string(load_watch.seconds()).substr(0, 5) + " s (" + peak + "); model " +
           model->describe() + "; " + source.describe());
  // The exact final evaluation comes before the application's hooks, which see its log line first.
  if (o.sampled.exact_final && o.trainer.eval_every > 0 && !o.outputs.quiet)
    context.hooks.insert(context.hooks.begin(), std::make_unique<ExactFinalEvaluation>(source));
  TrainResult result = train_with(*model, source, o, world, context);
  result.prefetch = source.totals();
  result.peak_bytes = largest_peak(world);
  return result;
}

}  // namespace tessera
