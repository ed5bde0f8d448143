// SPDX-License-Identifier: BSD-3-Clause
// Mini-batch GCN training on a 4D grid (DESIGN §5): D data-parallel 3D replicas, each training on its own
// uniform vertex sample per step (no message to agree on it), weight gradients averaged over D, a full-graph
// 3D forward for evaluation. A sampler thread builds step t + 1's blocks while step t trains.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/models/minibatch.hpp"
#include "tessera/models/model3d.hpp"
#include "tessera/models/optimizer.hpp"
#include "tessera/sampling/pipeline.hpp"
#include "trainer_common.hpp"

namespace tessera {

namespace {

GridShape parse_4d_grid(const TrainOptions& options, const Communicator& world) {
  std::string problem;
  GridShape shape;
  try {
    require(!options.grid.empty(), "--mode minibatch needs --grid DxXxYxZ (e.g. ", world.size(), "x1x1x1)");
    shape = GridShape::parse(options.grid);
    require(shape.size() == world.size(), "--grid ", options.grid, " has ", shape.size(),
            " ranks but the job has ", world.size());
    require(options.checkpoint_dir.empty(), "--checkpoint is supported in full-graph mode only");
    require(options.model.kind == ModelKind::Gcn, "--mode minibatch trains --model gcn");
  } catch (const Error& e) {
    problem = e.what();
  }
  world.check(problem.empty(), problem);
  return shape;
}

// Weight gradients (and BatchNorm's running statistics) averaged over the data-parallel axis: every replica
// then takes the same optimizer step and keeps the same weights.
void average(const Communicator& d_axis, const Vector<float>& v, const char* phase) {
  const float inverse = 1.0f / float(d_axis.size());
  Kokkos::fence();
  all_reduce(d_axis, v.data(), int64_t(v.extent(0)), ReduceOp::Sum, phase);
  Kokkos::parallel_for(
      "tessera::average_d", Kokkos::RangePolicy<ExecSpace>(0, int64_t(v.extent(0))),
      KOKKOS_LAMBDA(int64_t k) { v(k) *= inverse; });
}

void average_over_d(const Communicator& d_axis, GcnModel3D& model, bool gradients) {
  if (d_axis.size() == 1) return;
  if (gradients)
    for (Parameter<float>* p : model.parameters()) average(d_axis, p->grad, "gradient allreduce d");
  else
    for (auto& [name, buffer] : model.buffers()) average(d_axis, *buffer, "norm statistics allreduce d");
  Kokkos::fence();
}

void scale(const Matrix<float>& m, float factor) {
  Kokkos::parallel_for(
      "tessera::scale_rows", Kokkos::RangePolicy<ExecSpace>(0, int64_t(m.extent(0))),
      KOKKOS_LAMBDA(int64_t i) {
        for (size_t j = 0; j < m.extent(1); ++j) m(i, j) *= factor;
      });
}

}  // namespace

TrainResult train_minibatch(const TrainOptions& options, const Communicator& world) {
  check_train_options(options, world);
  const GridShape shape = parse_4d_grid(options, world);
  Stopwatch load_watch;
  const GraphFileReader reader(world, options.data);
  const ProcessGrid grid(world, shape);
  int64_t batch = 0;
  {
    std::string problem;
    try {
      batch = parse_batch_size(options.batch_size, reader.meta().num_nodes);
    } catch (const Error& e) {
      problem = e.what();
    }
    world.check(problem.empty(), problem);
  }
  const Graph3D g = load_graph_3d(reader, grid, load_3d_options(options));
  const ModelConfig config = model_config(options, reader.meta());
  GcnModel3D model(grid, g, config, model_3d_options(options));
  Adam optimizer(model.parameters(), options.optimizer);
  const MinibatchBuilder builder(grid, g, batch);
  const int64_t n = reader.meta().num_nodes, replicas = shape.d;
  const int64_t steps = options.steps_per_epoch > 0
                            ? options.steps_per_epoch
                            : std::max<int64_t>(1, (n + batch * replicas - 1) / (batch * replicas));
  {
    char line[320];
    std::snprintf(line, sizeof(line),
                  "loaded %s on grid %s in %.2f s: mini-batches of %lld of %lld vertices (p = %.4f), %lld "
                  "steps per epoch, %s; sampler %s",
                  options.data.c_str(), shape.d == 1 ? ("1x" + shape.str()).c_str() : shape.str().c_str(),
                  load_watch.seconds(), (long long)batch, (long long)n, pair_inclusion_probability(n, batch),
                  (long long)steps, config.describe().c_str(), options.sampler_thread ? "thread" : "inline");
    log_line(line);
  }
  const int last = config.layers - 1;
  const LayerComms out_comms = layer_comms(grid, last);
  const int64_t col_begin = model.logits_col_begin(), classes = config.out;
  const int d = grid.coords().get(Axis::D);
  const int64_t out_cols = g.layout.padded_dim(last + 1) / shape.extent(roles_for_layer(last).a);
  Matrix<float> grad_buffer("grad_logits", g.labels.extent(0), size_t(out_cols));
  std::ofstream metrics = open_metrics(options, TrainingProgress{}, world);

  TrainResult result;
  TrainingProgress progress;
  BatchPipeline<HostBatch> pipeline(options.sampler_thread);
  auto key = [&](int64_t epoch, int64_t step) { return SampleKey{config.seed, epoch, step, d}; };
  pipeline.request([&builder, k = key(0, 0)] { return builder.build(k); });
  for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    EpochRecord r;
    r.epoch = epoch + 1;
    const CommStats before = world.stats();
    const double build_before = pipeline.build_seconds(), wait_before = pipeline.waited_seconds();
    Stopwatch epoch_watch;
    double loss_total = 0;
    int64_t loss_steps = 0;
    for (int64_t step = 0; step < steps; ++step) {
      Stopwatch phase;
      const HostBatch host = pipeline.take();
      // Ask for the next batch before training on this one: the sampler thread works meanwhile.
      const bool more = step + 1 < steps || epoch + 1 < options.epochs;
      if (more) {
        const SampleKey next = step + 1 < steps ? key(epoch, step + 1) : key(epoch + 1, 0);
        pipeline.request([&builder, next] { return builder.build(next); });
      }
      const DeviceBatch b = builder.upload(host);
      const int64_t global_step = epoch * steps + step;
      const PassInfo pass{true, config.seed, global_step * replicas + d};
      const Matrix<float> logits = model.forward(b.input, b.input_ids, b.views, pass);
      const Matrix<float> grad =
          Kokkos::subview(grad_buffer, std::make_pair(int64_t(0), int64_t(logits.extent(0))), Kokkos::ALL());
      const auto [loss_sum, count] =
          softmax_cross_entropy_3d(out_comms, logits, col_begin, classes, b.labels, b.train, 1.0f, grad);
      // The loss is the mean over the sample's labeled training vertices (known only after the sum).
      if (count > 0) scale(grad, 1.0f / float(count));
      Kokkos::fence();
      r.forward_s += phase.seconds();
      phase.restart();
      model.backward(grad, pass);
      average_over_d(grid.axis(Axis::D), model, true);
      Kokkos::fence();
      r.backward_s += phase.seconds();
      phase.restart();
      if (options.keep_last_step && !more) result.last_gradients = model.gather_gradients(grid.replica());
      optimizer.step();
      average_over_d(grid.axis(Axis::D), model, false);
      Kokkos::fence();
      r.optimizer_s += phase.seconds();
      // Every replica's loss, averaged over D, for the report.
      const double step_loss =
          all_reduce_value(grid.axis(Axis::D), count > 0 ? loss_sum / double(count) : 0.0, ReduceOp::Sum,
                           "report") /
          double(replicas);
      loss_total += step_loss;
      ++loss_steps;
    }
    r.loss = loss_total / double(std::max<int64_t>(loss_steps, 1));
    Stopwatch eval_watch;
    r.evaluated = (epoch + 1) % options.eval_every == 0 || epoch + 1 == options.epochs;
    if (r.evaluated) {
      evaluate_3d(model, out_comms, g, epoch, r);
      record_if_best(progress, r);
    }
    r.eval_s = eval_watch.seconds();
    r.seconds = epoch_watch.seconds();
    nlohmann::json extra = comm_delta(world, before);
    extra["steps"] = steps;
    extra["sample_s"] =
        all_reduce_value(world, pipeline.build_seconds() - build_before, ReduceOp::Max, "report");
    extra["sample_wait_s"] =
        all_reduce_value(world, pipeline.waited_seconds() - wait_before, ReduceOp::Max, "report");
    result.history.push_back(r);
    report_epoch(r, options, metrics, extra);
    if (!options.quiet) {
      char line[200];
      std::snprintf(line, sizeof(line), "      sampling %.1f ms per epoch, trainer waited %.1f ms for it",
                    1e3 * extra["sample_s"].get<double>(), 1e3 * extra["sample_wait_s"].get<double>());
      log_line(line);
    }
    progress.epochs_done = r.epoch;
  }
  result.best_epoch = progress.best_epoch;
  result.best_valid = progress.best_valid;
  result.test_at_best = progress.test_at_best;
  result.final_weights = model.gather_parameters(grid.replica());
  return result;
}

}  // namespace tessera
