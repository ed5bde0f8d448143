// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/hooks.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"

namespace tessera {

void check_writable(const Communicator& comm, const std::string& path, const std::string& what) {
  comm.run_on(0, [&] {
    const std::string probe = path + ".tmp-" + std::to_string(getpid());
    std::FILE* f = std::fopen(probe.c_str(), "wb");
    require_os(f != nullptr, path, ": cannot write ", what);
    std::fclose(f);
    std::remove(probe.c_str());
  });
}

bool ConsoleReport::on_epoch(Trainer&, const EpochRecord& r) {
  char line[256];
  if (r.evaluated)
    std::snprintf(line, sizeof(line),
                  "epoch %4lld  loss %.4f  train %.4f  valid %.4f  test %.4f  time %.1f ms",
                  (long long)r.epoch, r.loss, r.train_acc, r.valid_acc, r.test_acc, 1e3 * r.seconds);
  else
    std::snprintf(line, sizeof(line), "epoch %4lld  loss %.4f  time %.1f ms", (long long)r.epoch, r.loss,
                  1e3 * r.seconds);
  log_line(line);
  for (const std::string& extra : r.lines) log_line(extra);
  return true;
}

void MetricsFile::on_start(Trainer& trainer) {
  int error = 0;
  if (trainer.world().rank() == 0) {
    out_.open(path_, trainer.progress().epochs_done > 0 ? std::ios::app : std::ios::trunc);
    error = out_ ? 0 : errno;
  }
  trainer.world().check(error == 0, path_ + ": cannot write metrics (" + std::strerror(error) + ")");
}

void MetricsFile::on_step(Trainer&, const StepRecord& s) {
  if (!out_.is_open()) return;
  nlohmann::json j = {{"kind", "step"}, {"epoch", s.epoch}, {"step", s.step}, {"loss", s.loss}};
  j.update(s.metrics);
  out_ << j.dump() << '\n';
}

bool MetricsFile::on_epoch(Trainer&, const EpochRecord& r) {
  if (!out_.is_open()) return true;
  nlohmann::json j = {{"epoch", r.epoch},           {"loss", r.loss},
                      {"epoch_s", r.seconds},       {"forward_s", r.forward_s},
                      {"backward_s", r.backward_s}, {"optimizer_s", r.optimizer_s},
                      {"eval_s", r.eval_s}};
  if (r.evaluated) {
    j["train_acc"] = r.train_acc;
    j["valid_acc"] = r.valid_acc;
    j["test_acc"] = r.test_acc;
  }
  j.update(r.metrics);
  if (first_.is_object()) j.update(first_);
  first_ = nullptr;
  out_ << j.dump() << '\n' << std::flush;
  return true;
}

void Checkpointer::on_start(Trainer& trainer) {
  const std::string path = path_in(dir_);
  check_writable(trainer.world(), path, "checkpoints");
  if (!resume_) return;
  trainer.progress() = load_checkpoint(
      path, checkpoint_state(trainer.model(), trainer.optimizer(), trainer.options().seed), trainer.world());
  log_line("resumed from " + path + " after epoch " + std::to_string(trainer.progress().epochs_done));
  saved_at_ =
      trainer.progress().epochs_done;  // on disk already: a run with nothing left to do rewrites nothing
}

void Checkpointer::save(Trainer& trainer) {
  save_checkpoint(path_in(dir_),
                  checkpoint_state(trainer.model(), trainer.optimizer(), trainer.options().seed),
                  trainer.progress(), trainer.world());
  saved_at_ = trainer.progress().epochs_done;
}

bool Checkpointer::on_epoch(Trainer& trainer, const EpochRecord& r) {
  if (every_ > 0 && r.epoch % every_ == 0) save(trainer);
  return true;
}

void Checkpointer::on_finish(Trainer& trainer) {
  // A run stopped by a signal is saved whatever --checkpoint-every says: it is meant to be resumed.
  if ((every_ == 0 || trainer.stop_signal() != 0) && saved_at_ != trainer.progress().epochs_done)
    save(trainer);
}

bool EarlyStopping::on_epoch(Trainer& trainer, const EpochRecord& r) {
  if (!r.evaluated) return true;
  since_best_ = r.best ? 0 : since_best_ + 1;
  if (since_best_ < patience_) return true;
  log_line("early stop after epoch " + std::to_string(r.epoch) + ": no better validation accuracy in " +
           std::to_string(patience_) + " evaluations (best " + std::to_string(trainer.progress().best_valid) +
           " at epoch " + std::to_string(trainer.progress().best_epoch) + ")");
  return false;
}

std::vector<Vector<float>> NodeOutputs::snapshot(Trainer& trainer) const {
  std::vector<Vector<float>> values;
  for (const ParameterRef& p : trainer.model().parameters()) {
    values.emplace_back("best." + p.param->name, p.param->value.extent(0));
    Kokkos::deep_copy(values.back(), p.param->value);
  }
  for (const BufferRef& b : trainer.model().buffers()) {
    values.emplace_back("best." + b.name, b.value->extent(0));
    Kokkos::deep_copy(values.back(), *b.value);
  }
  return values;
}

void NodeOutputs::restore(Trainer& trainer, const std::vector<Vector<float>>& values) const {
  size_t k = 0;
  for (const ParameterRef& p : trainer.model().parameters()) Kokkos::deep_copy(p.param->value, values[k++]);
  for (const BufferRef& b : trainer.model().buffers()) Kokkos::deep_copy(*b.value, values[k++]);
}

void NodeOutputs::on_start(Trainer& trainer) {
  if (!paths_.predictions.empty()) check_writable(trainer.world(), paths_.predictions, "predictions");
  if (!paths_.embeddings.empty()) check_writable(trainer.world(), paths_.embeddings, "embeddings");
}

bool NodeOutputs::on_epoch(Trainer& trainer, const EpochRecord& r) {
  if (r.best) {
    best_ = snapshot(trainer);
    best_epoch_ = r.epoch;
  }
  return true;
}

void NodeOutputs::on_finish(Trainer& trainer) {
  if (paths_.predictions.empty() && paths_.embeddings.empty()) return;
  if (trainer.stop_signal() != 0) {  // an interrupted run writes no outputs; its resumed run will
    log_line("stopped early: predictions and embeddings are written when the resumed run finishes");
    return;
  }
  const int64_t epoch = best_epoch_ >= 0 ? best_epoch_ : trainer.progress().epochs_done;
  if (best_epoch_ < 0) log_line("no evaluation in this run: node outputs come from the final model");
  std::vector<Vector<float>> final_state;
  if (best_epoch_ >= 0) {
    final_state = snapshot(trainer);
    restore(trainer, best_);
  }
  trainer.source().write_outputs(trainer.model(), epoch - 1, paths_);
  if (best_epoch_ >= 0) restore(trainer, final_state);
  std::string what;
  if (!paths_.predictions.empty()) what += "predictions to " + paths_.predictions;
  if (!paths_.embeddings.empty()) what += (what.empty() ? "" : ", ") + ("embeddings to " + paths_.embeddings);
  log_line("wrote " + what + " (epoch " + std::to_string(epoch) + ")");
}

}  // namespace tessera
