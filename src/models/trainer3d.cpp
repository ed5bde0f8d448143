// SPDX-License-Identifier: BSD-3-Clause
// Full-graph GCN training on a 3D process grid: the same epoch loop as the one-rank trainer over the
// distributed model, loss and accuracy, with communication accounted per epoch.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/kernels/loss.hpp"
#include "tessera/models/checkpoint.hpp"
#include "tessera/models/model3d.hpp"
#include "tessera/parallel3d/perf_model.hpp"
#include "trainer_common.hpp"

namespace tessera {

namespace {

// Row chunks per sparse product under --overlap: enough to hide a chunk's all-reduce behind the next
// chunk's SpMM, few enough that each message stays large.
constexpr int kOverlapChunks = 4;

GridShape parse_grid(const TrainOptions& options, const GraphMeta& meta, const Communicator& world) {
  std::string problem;
  GridShape shape;
  try {
    require(!options.grid.empty(), "training on ", world.size(),
            " ranks needs --grid XxYxZ or --grid auto (a factorization of the rank count, e.g. 1x1x",
            world.size(), ")");
    if (options.grid == "auto") {
      const MachineProfile machine = options.machine_file.empty() ? builtin_machine(options.machine)
                                                                  : load_machine_file(options.machine_file);
      ProblemSize size;
      size.nodes = meta.num_nodes;
      size.nnz = meta.num_edges + meta.num_nodes;
      size.dims.push_back(meta.num_features);
      for (int l = 1; l < options.model.layers; ++l) size.dims.push_back(options.model.hidden);
      size.dims.push_back(meta.num_classes);
      const GridCost best = plan_grids(size, world.size(), machine).front();
      char line[256];
      std::snprintf(line, sizeof(line), "grid auto: %s (predicted %.4f s per epoch on machine %s)",
                    best.shape.str().c_str(), best.total_s, machine.name.c_str());
      log_line(line);
      return best.shape;
    }
    shape = GridShape::parse(options.grid);
    require(shape.d == 1, "--grid: full-graph training uses a 3D grid (XxYxZ), not ", options.grid);
  } catch (const Error& e) {
    problem = e.what();
  }
  world.check(problem.empty(), problem);
  return shape;
}

// Per-phase seconds of one epoch on this rank: compute phases from the model's timers, communication
// phases from the collectives' counters. Returns {max, mean, max/mean} over ranks for each, as JSON, and
// a console summary.
nlohmann::json phase_report(const PhaseTimers& now, const PhaseTimers& before, const CommStats& comm_now,
                            const CommStats& comm_before, const Communicator& world, std::string& line) {
  static const char* compute[] = {"spmm", "gemm", "loss"};
  std::vector<std::string> names(std::begin(compute), std::end(compute));
  std::vector<double> seconds;
  for (const char* name : compute) seconds.push_back(now.get(name) - before.get(name));
  // Communication phases: every rank knows the same names (same grid); a rank that skipped one reports 0.
  static const std::pair<const char*, Collective> comm_phases[] = {
      {"forward allreduce a", Collective::AllReduce},
      {"forward allreduce b", Collective::AllReduce},
      {"backward allreduce c (weights)", Collective::AllReduce},
      {"backward allreduce a", Collective::AllReduce},
      {"backward allreduce c (inputs)", Collective::AllReduce},
      {"backward allgather a", Collective::AllGather},            // transform-first layers
      {"backward allreduce a (weights)", Collective::AllReduce},  // transform-first layers
      {"norm allreduce c", Collective::AllReduce},
      {"norm allreduce a", Collective::AllReduce},
      {"loss allreduce a", Collective::AllReduce},
      {"loss allreduce c", Collective::AllReduce}};
  for (const auto& [name, kind] : comm_phases) {
    names.push_back(name);
    seconds.push_back(comm_now.get(name, kind).seconds - comm_before.get(name, kind).seconds);
  }
  std::vector<double> max = seconds, sum = seconds;
  all_reduce(world, max.data(), int64_t(max.size()), ReduceOp::Max, "report");
  all_reduce(world, sum.data(), int64_t(sum.size()), ReduceOp::Sum, "report");
  nlohmann::json j;
  double comm_max = 0, comm_mean = 0;
  for (size_t k = 0; k < names.size(); ++k) {
    const double mean = sum[k] / world.size();
    if (max[k] <= 0) continue;
    j[names[k]] = {{"max_s", max[k]}, {"mean_s", mean}, {"max_over_mean", mean > 0 ? max[k] / mean : 1.0}};
    if (k >= 3) comm_max += max[k], comm_mean += mean;
  }
  char text[256];
  auto ms = [&](size_t k) { return std::make_pair(1e3 * max[k], 1e3 * sum[k] / world.size()); };
  std::snprintf(
      text, sizeof(text),
      "      phases max/mean ms: spmm %.1f/%.1f  gemm %.1f/%.1f  loss %.1f/%.1f  collectives %.1f/%.1f",
      ms(0).first, ms(0).second, ms(1).first, ms(1).second, ms(2).first, ms(2).second, 1e3 * comm_max,
      1e3 * comm_mean);
  line = text;
  return j;
}

// The logits block of every (c, a) position, from the b = 0 replica, summed into nodes x classes in node
// order on every rank (TrainOptions::keep_last_step).
std::vector<float> gather_logits(const LayerComms& comms, const Matrix<const float>& logits,
                                 const Vector<const int64_t>& output_ids, int64_t col_begin, int64_t nodes,
                                 int64_t classes, const Communicator& world) {
  std::vector<float> all(size_t(nodes * classes), 0.0f);
  if (comms.b->rank() == 0) {
    const auto x = Kokkos::create_mirror_view_and_copy(HostSpace(), logits);
    const auto ids = Kokkos::create_mirror_view_and_copy(HostSpace(), output_ids);
    for (size_t i = 0; i < ids.extent(0); ++i)
      for (int64_t j = 0; ids(i) >= 0 && j < int64_t(x.extent(1)) && col_begin + j < classes; ++j)
        all[size_t(ids(i) * classes + col_begin + j)] = x(i, size_t(j));
  }
  all_reduce(world, all.data(), int64_t(all.size()), ReduceOp::Sum, "gather logits");
  return all;
}

}  // namespace

Load3DOptions load_3d_options(const TrainOptions& options) {
  Load3DOptions load;
  load.hidden.assign(size_t(std::max(0, options.model.layers - 1)), options.model.hidden);
  load.permute = options.permute;
  load.seed = options.model.seed;
  load.normalize_features = options.normalize_features;
  return load;
}

ModelConfig model_config(const TrainOptions& options, const GraphMeta& meta) {
  ModelConfig config = options.model;
  config.in = meta.num_features;
  config.out = meta.num_classes;
  return config;
}

Model3DOptions model_3d_options(const TrainOptions& options) {
  return Model3DOptions{options.overlap ? kOverlapChunks : 0, options.comm_dtype, options.fuse};
}

Matrix<float> evaluate_3d(GcnModel3D& model, const LayerComms& out_comms, const Graph3D& g, int64_t epoch,
                          EpochRecord& r) {
  const Matrix<float> eval = model.forward(PassInfo{false, model.config().seed, epoch});
  auto accuracy = [&](const Vector<uint8_t>& mask) {
    const auto [hits, n] =
        count_correct_3d(out_comms, eval, model.logits_col_begin(), model.config().out, g.labels, mask);
    return n > 0 ? double(hits) / double(n) : 0.0;
  };
  r.train_acc = accuracy(g.train);
  r.valid_acc = accuracy(g.valid);
  r.test_acc = accuracy(g.test);
  return eval;
}

TrainResult train_3d(const TrainOptions& options, const Communicator& world) {
  check_train_options(options, world);
  world.check(options.model.kind == ModelKind::Gcn,
              "the 3D trainer supports --model gcn; GraphSAGE trains on one rank (no --grid)");
  Stopwatch load_watch;
  const GraphFileReader reader(world, options.data);
  const GridShape shape = parse_grid(options, reader.meta(), world);
  const ProcessGrid grid(world, shape);
  const Graph3D g = load_graph_3d(reader, grid, load_3d_options(options));
  const ModelConfig config = model_config(options, reader.meta());
  {
    const double peak = double(all_reduce_value(world, int64_t(peak_rss_bytes()), ReduceOp::Max, "report"));
    char line[320];
    std::snprintf(
        line, sizeof(line),
        "loaded %s on grid %s in %.2f s (permute %s, peak memory %.1f MiB per rank): adjacency blocks "
        "max/mean nonzeros %.3f; %s",
        options.data.c_str(), shape.str().c_str(), load_watch.seconds(), permute_mode_name(options.permute),
        peak / 1048576.0, g.mean_nnz > 0 ? g.max_nnz / g.mean_nnz : 1.0, config.describe().c_str());
    log_line(line);
  }
  GcnModel3D model(grid, g, config, model_3d_options(options));
  Adam optimizer(model.parameters(), options.optimizer);
  const int last = config.layers - 1;
  const LayerComms out_comms = layer_comms(grid, last);
  const int64_t col_begin = model.logits_col_begin(), classes = config.out;

  const std::string checkpoint = checkpoint_path(options);
  TrainingProgress progress = resume_if_asked(options, checkpoint_state(model, optimizer), world);
  std::ofstream metrics = open_metrics(options, progress, world);

  const int64_t out_rows = g.layout.padded_nodes() / shape.extent(roles_for_layer(last).c);
  const int64_t out_cols = g.layout.padded_dim(last + 1) / shape.extent(roles_for_layer(last).a);
  Matrix<float> grad("grad_logits", size_t(out_rows), size_t(out_cols));
  TrainResult result;
  std::vector<int64_t> best_predictions;
  for (int64_t epoch = progress.epochs_done; epoch < options.epochs; ++epoch) {
    EpochRecord r;
    r.epoch = epoch + 1;
    const CommStats before = world.stats();
    const PhaseTimers timers_before = model.timers();
    Stopwatch epoch_watch, phase;
    const PassInfo pass{true, config.seed, epoch};
    const Matrix<float> logits = model.forward(pass);
    Stopwatch loss_watch;
    const auto [loss_sum, count] = softmax_cross_entropy_3d(out_comms, logits, col_begin, classes, g.labels,
                                                            g.train, 1.0f / float(g.num_train), grad);
    model.timers().add("loss", loss_watch.seconds());
    r.loss = loss_sum / double(std::max<int64_t>(count, 1));
    Kokkos::fence();
    r.forward_s = phase.seconds();
    phase.restart();
    model.backward(grad, pass);
    Kokkos::fence();
    r.backward_s = phase.seconds();
    if (options.keep_last_step && epoch + 1 == options.epochs) {
      result.last_logits = gather_logits(out_comms, logits, g.output_ids[size_t(last)], col_begin,
                                         reader.meta().num_nodes, classes, world);
      result.last_gradients = model.gather_gradients(grid.replica());
    }
    phase.restart();
    optimizer.step();
    Kokkos::fence();
    r.optimizer_s = phase.seconds();
    phase.restart();
    r.evaluated = (epoch + 1) % options.eval_every == 0 || epoch + 1 == options.epochs;
    if (r.evaluated) {
      const Matrix<float> eval = evaluate_3d(model, out_comms, g, epoch, r);
      if (record_if_best(progress, r)) {
        if (!options.predictions_path.empty()) {
          // Rows of the output block, by node id, gathered on rank 0 from one replica of each block.
          const Vector<int64_t> pred = argmax_3d(out_comms, eval, col_begin, classes);
          const auto hp = Kokkos::create_mirror_view_and_copy(HostSpace(), pred);
          const auto ids = Kokkos::create_mirror_view_and_copy(HostSpace(), g.output_ids[size_t(last)]);
          std::vector<std::vector<int64_t>> to_root(static_cast<size_t>(world.size()));
          if (out_comms.a->rank() == 0 && out_comms.b->rank() == 0)
            for (size_t i = 0; i < ids.extent(0); ++i)
              if (ids(i) >= 0) to_root[0].insert(to_root[0].end(), {ids(i), hp(i)});
          const std::vector<int64_t> got = exchange_buckets(world, to_root, "predictions");
          best_predictions.assign(size_t(reader.meta().num_nodes), -1);
          for (size_t k = 0; k < got.size(); k += 2) best_predictions[size_t(got[k])] = got[k + 1];
        }
      }
    }
    r.eval_s = phase.seconds();
    r.seconds = epoch_watch.seconds();
    nlohmann::json comm = comm_delta(world, before);
    std::string phase_line;
    comm["phases"] = phase_report(model.timers(), timers_before, world.stats(), before, world, phase_line);
    result.history.push_back(r);
    report_epoch(r, options, metrics, comm);
    if (!options.quiet) log_line(phase_line);
    progress.epochs_done = r.epoch;
    if (options.checkpoint_every > 0 && progress.epochs_done % options.checkpoint_every == 0)
      save_checkpoint(checkpoint, checkpoint_state(model, optimizer), progress, world);
  }
  if (!checkpoint.empty() && options.checkpoint_every == 0)
    save_checkpoint(checkpoint, checkpoint_state(model, optimizer), progress, world);
  if (!options.predictions_path.empty())
    world.run_on(0, [&] { write_predictions_file(options.predictions_path, best_predictions); });
  result.best_epoch = progress.best_epoch;
  result.best_valid = progress.best_valid;
  result.test_at_best = progress.test_at_best;
  result.final_weights = model.gather_parameters(grid.replica());
  return result;
}

}  // namespace tessera
