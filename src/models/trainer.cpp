// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/trainer.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/kernels/loss.hpp"
#include "tessera/models/checkpoint.hpp"
#include "trainer_common.hpp"

namespace tessera {
namespace {

struct LoadedGraph {
  GraphOps<float> ops;
  Matrix<float> features;
  Vector<int64_t> labels;
  Vector<uint8_t> train, valid, test;
  int64_t num_train = 0;
  HostVector<int64_t> host_labels;
};

Vector<uint8_t> split_mask(const GraphFileReader& reader, const std::string& name, int64_t n) {
  HostVector<uint8_t> mask("mask." + name, size_t(n));
  if (reader.has_split(name)) {
    for (const SplitInfo& s : reader.splits())
      if (s.name == name)
        for (int64_t id : reader.read_split(name, 0, s.size)) mask(id) = 1;
  }
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), mask);
}

LoadedGraph load(const TrainOptions& options, ModelConfig& model, const Communicator& world) {
  const GraphFileReader reader(world, options.data);
  const GraphMeta& meta = reader.meta();
  const std::string& file = options.data;
  world.check(reader.has_split("train"), file + ": no split named 'train' (the trainer needs /split/train)");
  world.check(meta.num_classes > 0, file + ": num_classes is 0 (the file has no labels to train on)");
  GraphSlice slice = reader.read_rows(0, meta.num_nodes);
  if (options.normalize_features) normalize_feature_rows(slice.features);

  LoadedGraph g;
  g.ops.num_nodes = meta.num_nodes;
  CsrMatrix<float, HostSpace> a =
      model.kind == ModelKind::Gcn ? gcn_normalize(slice.adjacency) : mean_normalize(slice.adjacency);
  // A_hat of a symmetric graph is its own transpose; otherwise the transpose is stored explicitly.
  const bool self_transpose = meta.symmetric && model.kind == ModelKind::Gcn;
  g.ops.aggregate_transpose =
      CsrSpmm<float>(csr_to_space<float, DeviceSpace>(self_transpose ? a : csr_transpose(a)));
  g.ops.aggregate = CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a));
  g.features = Kokkos::create_mirror_view_and_copy(DeviceSpace(), slice.features);
  g.host_labels = slice.labels;
  g.labels = Kokkos::create_mirror_view_and_copy(DeviceSpace(), slice.labels);
  g.train = split_mask(reader, "train", meta.num_nodes);
  g.valid = split_mask(reader, "valid", meta.num_nodes);
  g.test = split_mask(reader, "test", meta.num_nodes);
  const auto train_host = Kokkos::create_mirror_view_and_copy(HostSpace(), g.train);
  for (int64_t v = 0; v < meta.num_nodes; ++v) g.num_train += train_host(v) && slice.labels(v) >= 0;
  world.check(g.num_train > 0, file + ": no labeled node in split 'train'");
  model.in = meta.num_features;
  model.out = meta.num_classes;
  return g;
}

double accuracy(const Matrix<const float>& logits, const LoadedGraph& g, const Vector<uint8_t>& mask) {
  const auto [correct, count] = count_correct<float>(logits, g.labels, mask);
  return count > 0 ? double(correct) / double(count) : 0.0;
}

// Writes text atomically: a temporary file renamed over the target.
void write_predictions(const std::string& path, const std::vector<int64_t>& predictions) {
  const std::string temp = path + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream out(temp);
    require_os(bool(out), path, ": cannot write predictions");
    for (int64_t p : predictions) out << p << '\n';
    require(bool(out), path, ": write failed (disk full?)");
  }
  require_os(std::rename(temp.c_str(), path.c_str()) == 0, path, ": cannot rename");
}

}  // namespace

void report_epoch(const EpochRecord& r, const TrainOptions& options, std::ofstream& metrics,
                  const nlohmann::json& extra) {
  if (!options.quiet) {
    char line[256];
    if (r.evaluated)
      std::snprintf(line, sizeof(line),
                    "epoch %4lld  loss %.4f  train %.4f  valid %.4f  test %.4f  time %.1f ms",
                    (long long)r.epoch, r.loss, r.train_acc, r.valid_acc, r.test_acc, 1e3 * r.seconds);
    else
      std::snprintf(line, sizeof(line), "epoch %4lld  loss %.4f  time %.1f ms", (long long)r.epoch, r.loss,
                    1e3 * r.seconds);
    log_line(line);
  }
  if (metrics.is_open()) {
    nlohmann::json j = {{"epoch", r.epoch},           {"loss", r.loss},
                        {"epoch_s", r.seconds},       {"forward_s", r.forward_s},
                        {"backward_s", r.backward_s}, {"optimizer_s", r.optimizer_s},
                        {"eval_s", r.eval_s}};
    if (r.evaluated) {
      j["train_acc"] = r.train_acc;
      j["valid_acc"] = r.valid_acc;
      j["test_acc"] = r.test_acc;
    }
    j.update(extra);
    metrics << j.dump() << '\n' << std::flush;
  }
}

void check_train_options(const TrainOptions& options, const Communicator& world) {
  std::string invalid;
  try {
    ModelConfig config = options.model;
    config.in = std::max<int64_t>(config.in, 1);
    config.out = std::max<int64_t>(config.out, 1);
    config.validate();
    require(options.epochs >= 1, "--epochs must be at least 1, not ", options.epochs);
    require(options.checkpoint_every >= 0, "--checkpoint-every must not be negative");
    require(options.eval_every >= 1 || (options.sampled && options.eval_every == 0),
            "--eval-every must be at least 1 (0, no evaluation, only with --mode sampled), not ",
            options.eval_every);
    require(!options.resume || !options.checkpoint_dir.empty(), "--resume needs --checkpoint DIR");
    require(options.checkpoint_every == 0 || !options.checkpoint_dir.empty(),
            "--checkpoint-every needs --checkpoint DIR");
  } catch (const Error& e) {
    invalid = e.what();
  }
  world.check(invalid.empty(), invalid);
}

nlohmann::json comm_delta(const Communicator& world, const CommStats& before) {
  const CommStats& now = world.stats();
  nlohmann::json j;
  int64_t bytes = 0;
  double seconds = 0;
  for (int k = 0; k < int(Collective::Count); ++k) {
    const Collective kind = Collective(k);
    const int64_t delta = now.total(kind).bytes - before.total(kind).bytes;
    if (delta > 0) j[std::string("bytes_") + collective_name(kind)] = delta;
    bytes += delta;
    seconds += now.total(kind).seconds - before.total(kind).seconds;
  }
  j["comm_s"] = seconds;
  // The slowest rank's communication, so the line describes the whole grid.
  j["bytes_max_rank"] = all_reduce_value(world, bytes, ReduceOp::Max, "report");
  return j;
}

bool record_if_best(TrainingProgress& progress, const EpochRecord& r) {
  if (!r.evaluated || r.valid_acc <= progress.best_valid) return false;
  progress.best_valid = r.valid_acc;
  progress.best_epoch = r.epoch;
  progress.test_at_best = r.test_acc;
  return true;
}

std::string checkpoint_path(const TrainOptions& options) {
  return options.checkpoint_dir.empty() ? "" : options.checkpoint_dir + "/checkpoint.h5";
}

TrainingProgress resume_if_asked(const TrainOptions& options, const CheckpointState& state,
                                 const Communicator& world) {
  if (!options.resume) return TrainingProgress{};
  const TrainingProgress progress = load_checkpoint(checkpoint_path(options), state, world);
  log_line("resumed from " + checkpoint_path(options) + " after epoch " +
           std::to_string(progress.epochs_done));
  return progress;
}

std::ofstream open_metrics(const TrainOptions& options, const TrainingProgress& progress,
                           const Communicator& world) {
  std::ofstream metrics;
  int error = 0;
  if (!options.metrics_path.empty() && world.rank() == 0) {
    metrics.open(options.metrics_path, progress.epochs_done > 0 ? std::ios::app : std::ios::trunc);
    error = metrics ? 0 : errno;
  }
  world.check(error == 0, options.metrics_path + ": cannot write metrics (" + std::strerror(error) + ")");
  return metrics;
}

void write_predictions_file(const std::string& path, const std::vector<int64_t>& predictions) {
  write_predictions(path, predictions);
}

// The logits and gradients of this step, host copies (TrainOptions::keep_last_step).
void keep_step(GnnModel<float>& model, const Matrix<float>& logits, TrainResult& result) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), logits);
  result.last_logits.assign(host.data(), host.data() + host.size());
  result.last_gradients.clear();
  for (Parameter<float>* p : model.parameters()) {
    const auto g = Kokkos::create_mirror_view_and_copy(HostSpace(), p->grad);
    result.last_gradients.insert(result.last_gradients.end(), g.data(), g.data() + g.extent(0));
  }
}

void finish_result(TrainResult& result, const TrainingProgress& progress, GnnModel<float>& model) {
  result.best_epoch = progress.best_epoch;
  result.best_valid = progress.best_valid;
  result.test_at_best = progress.test_at_best;
  for (Parameter<float>* p : model.parameters()) {
    const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), p->value);
    result.final_weights.insert(result.final_weights.end(), host.data(), host.data() + host.extent(0));
  }
}

TrainResult train_full_graph(const TrainOptions& options, const Communicator& world) {
  if (options.sampled) return train_sampled(options, world);
  if (options.minibatch) return train_minibatch(options, world);
  if (!options.grid.empty() || world.size() > 1) return train_3d(options, world);
  check_train_options(options, world);
  ModelConfig config = options.model;

  Stopwatch load_watch;
  LoadedGraph g = load(options, config, world);
  GnnModel<float> model(config);
  model.set_static_features(true);
  Adam optimizer(model.parameters(), options.optimizer);
  log_line("loaded " + options.data + " in " + std::to_string(load_watch.seconds()).substr(0, 5) +
           " s; model " + config.describe());

  const std::string checkpoint = checkpoint_path(options);
  TrainingProgress progress = resume_if_asked(options, checkpoint_state(model, optimizer), world);
  std::ofstream metrics = open_metrics(options, progress, world);

  const int64_t n = g.ops.num_nodes;
  Matrix<float> grad("grad_logits", size_t(n), size_t(config.out));
  Vector<int64_t> predictions("predictions", size_t(n));
  std::vector<int64_t> best_predictions;
  TrainResult result;
  for (int64_t epoch = progress.epochs_done; epoch < options.epochs; ++epoch) {
    EpochRecord r;
    r.epoch = epoch + 1;
    Stopwatch epoch_watch, phase;
    const PassInfo train_pass{true, config.seed, epoch};
    const Matrix<float> logits = model.forward(g.ops, g.features, train_pass);
    const auto [loss_sum, count] =
        masked_softmax_cross_entropy<float>(logits, g.labels, g.train, 1.0f / float(g.num_train), grad);
    r.loss = loss_sum / double(std::max<int64_t>(count, 1));
    Kokkos::fence();
    r.forward_s = phase.seconds();
    phase.restart();
    model.backward(g.ops, grad, train_pass);
    Kokkos::fence();
    r.backward_s = phase.seconds();
    if (options.keep_last_step && epoch + 1 == options.epochs) keep_step(model, logits, result);
    phase.restart();
    optimizer.step();
    Kokkos::fence();
    r.optimizer_s = phase.seconds();
    phase.restart();
    r.evaluated = (epoch + 1) % options.eval_every == 0 || epoch + 1 == options.epochs;
    if (r.evaluated) {
      const Matrix<float> eval_logits = model.forward(g.ops, g.features, PassInfo{false, config.seed, epoch});
      r.train_acc = accuracy(eval_logits, g, g.train);
      r.valid_acc = accuracy(eval_logits, g, g.valid);
      r.test_acc = accuracy(eval_logits, g, g.test);
      if (record_if_best(progress, r)) {
        if (!options.predictions_path.empty()) {
          argmax_rows<float>(eval_logits, predictions);
          const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), predictions);
          best_predictions.assign(host.data(), host.data() + n);
        }
      }
    }
    r.eval_s = phase.seconds();
    r.seconds = epoch_watch.seconds();
    progress.epochs_done = epoch + 1;
    result.history.push_back(r);

    report_epoch(r, options, metrics, nlohmann::json::object());
    if (options.checkpoint_every > 0 && progress.epochs_done % options.checkpoint_every == 0)
      save_checkpoint(checkpoint, checkpoint_state(model, optimizer), progress, world);
  }
  if (!options.checkpoint_dir.empty() && options.checkpoint_every == 0)
    save_checkpoint(checkpoint, checkpoint_state(model, optimizer), progress, world);
  if (!options.predictions_path.empty() && !best_predictions.empty())
    world.run_on(0, [&] { write_predictions(options.predictions_path, best_predictions); });

  finish_result(result, progress, model);
  return result;
}

}  // namespace tessera
