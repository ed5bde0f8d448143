// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/training/hooks.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <unistd.h>

#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/paths.hpp"

namespace tessera {

void refuse_existing_checkpoint(const std::string& dir, bool resume, bool overwrite) {
  const std::string path = Checkpointer::path_in(dir);
  require(resume || overwrite || file_kind(path).empty(), path,
          ": a checkpoint of an earlier run is there; `resume` continues it, `overwrite-checkpoint` starts "
          "over (replacing it at this run's first save)");
}

void check_writable(const Communicator& comm, const std::string& path, const std::string& what) {
  comm.run_on(0, [&] { probe_writable(path, what); });
}

double epoch_throughput(const EpochRecord& r) {
  const double training_s = r.seconds - r.eval_s;
  return r.work.count > 0 && training_s > 0 ? r.work.count / training_s : 0.0;
}

bool ConsoleReport::on_epoch(Trainer&, const EpochRecord& r) {
  char part[160];
  std::snprintf(part, sizeof(part), "epoch %4lld  loss %.4f", (long long)r.epoch, r.loss);
  std::string line = part;
  if (r.evaluated) {
    if (r.metric != "accuracy") line += "  " + r.metric;  // accuracy goes unnamed, as it always has
    std::snprintf(part, sizeof(part), "  train %.4f  valid %.4f  test %.4f  valid loss %.4f", r.train_acc,
                  r.valid_acc, r.test_acc, r.valid_loss);
    line += part;
  }
  std::snprintf(part, sizeof(part), "  %.1f ms", 1e3 * r.seconds);
  line += part;
  if (const double rate = epoch_throughput(r); rate > 0) {
    std::snprintf(part, sizeof(part), "  %.3g ", rate);
    line += part + r.work.unit + "/s";
  }
  log_line(line);
  const bool details =
      options_.verbose || (options_.details_every > 0 && r.epoch % options_.details_every == 0);
  if (details)
    for (const std::string& extra : r.lines) log_line(extra);
  return true;
}

namespace {

// Rank 0: keeps the records of epochs up to `epochs_done` (records without an epoch too), through a
// temporary and a rename (write_text_output); a missing file stays missing.
void cut_metrics_back(const std::string& path, int64_t epochs_done) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_object() && record.contains("epoch") && record["epoch"].is_number_integer() &&
        record["epoch"].get<int64_t>() > epochs_done)
      continue;
    kept += line + '\n';
  }
  write_text_output(path, kept, "metrics");
}

}  // namespace

void MetricsFile::on_start(Trainer& trainer) {
  const int64_t done = trainer.progress().epochs_done;
  mode_ = trainer.source().mode();
  trainer.world().run_on(0, [&] {
    if (done > 0) cut_metrics_back(path_, done);
    out_.open(path_, done > 0 ? std::ios::app : std::ios::trunc);
    require_os(bool(out_), path_, ": cannot write metrics");
    if (out_.tellp() > 0) return;  // a resumed run's file keeps the header of its first job
    nlohmann::json j = {{"kind", "header"}, {"mode", mode_}};
    if (header_.is_object()) j.update(header_);
    out_ << j.dump() << '\n' << std::flush;
  });
}

nlohmann::json epoch_json(const EpochRecord& r) {
  nlohmann::json j = {{"epoch", r.epoch},
                      {"loss", r.loss},
                      {"lr", r.lr},
                      {"epoch_s", r.seconds},
                      {"forward_s", r.forward_s},
                      {"backward_s", r.backward_s},
                      {"optimizer_s", r.optimizer_s},
                      {"eval_s", r.eval_s}};
  if (r.grad_norm > 0) j["grad_norm"] = r.grad_norm;
  if (r.evaluated) {
    j["metric"] = r.metric;
    j["train_acc"] = r.train_acc;
    j["valid_acc"] = r.valid_acc;
    j["test_acc"] = r.test_acc;
    j["valid_loss"] = r.valid_loss;
  }
  if (const double rate = epoch_throughput(r); rate > 0) {
    j["throughput"] = rate;
    j["throughput_unit"] = r.work.unit + "/s";
  }
  j.update(r.metrics);
  return j;
}

void MetricsFile::on_step(Trainer&, const StepRecord& s) {
  if (!out_.is_open()) return;
  nlohmann::json j = {
      {"kind", "step"}, {"mode", mode_}, {"epoch", s.epoch}, {"step", s.step}, {"loss", s.loss}};
  j.update(s.metrics);
  out_ << j.dump() << '\n';
}

bool MetricsFile::on_epoch(Trainer&, const EpochRecord& r) {
  if (!out_.is_open()) return true;
  nlohmann::json j = {{"kind", "epoch"}, {"mode", mode_}};
  j.update(epoch_json(r));
  if (first_.is_object()) j.update(first_);
  first_ = nullptr;
  out_ << j.dump() << '\n' << std::flush;
  return true;
}

CheckpointState Checkpointer::state(Trainer& trainer) const {
  CheckpointState s = checkpoint_state(trainer.model(), trainer.optimizer(), trainer.seed());
  s.best = &trainer.best_state();
  s.run = options_.run;
  s.accept_run_differences = options_.accept_run_differences;
  return s;
}

void Checkpointer::on_start(Trainer& trainer) {
  const std::string path = path_in(options_.dir);
  if (!options_.lock) options_.lock = std::make_shared<CheckpointLock>(options_.dir, trainer.world());
  check_writable(trainer.world(), path, "checkpoints");
  trainer.world().run_on(
      0, [&] { refuse_existing_checkpoint(options_.dir, options_.resume, options_.overwrite); });
  if (!options_.resume) return;
  trainer.progress() = load_checkpoint(path, state(trainer), trainer.world());
  log_line("resumed from " + path + " after epoch " + std::to_string(trainer.progress().epochs_done));
  trainer.note_checkpoint(path + " after epoch " + std::to_string(trainer.progress().epochs_done));
  saved_at_ =
      trainer.progress().epochs_done;  // on disk already: a run with nothing left to do rewrites nothing
}

void Checkpointer::save(Trainer& trainer) {
  save_checkpoint(path_in(options_.dir), state(trainer), trainer.progress(), trainer.world());
  saved_at_ = trainer.progress().epochs_done;
  trainer.note_checkpoint(path_in(options_.dir) + " after epoch " + std::to_string(saved_at_));
}

void Checkpointer::after_epoch(Trainer& trainer, const EpochRecord& r) {
  if (options_.every > 0 && r.epoch % options_.every == 0) save(trainer);
}

void Checkpointer::on_finish(Trainer& trainer) {
  // Whatever --checkpoint-every says, the end of a run is saved: a signal's stop is meant to be resumed,
  // and a finished run can be extended or predicted from.
  if (saved_at_ != trainer.progress().epochs_done) save(trainer);
}

bool EarlyStopping::on_epoch(Trainer& trainer, const EpochRecord& r) {
  const TrainingProgress& p = trainer.progress();
  if (!r.evaluated || p.evaluations_since_best < patience_) return true;
  const bool both = trainer.options().selection == Selection::AccuracyAndLoss;
  log_line("early stop after epoch " + std::to_string(r.epoch) + ": no better validation accuracy" +
           (both ? " or loss" : "") + " in " + std::to_string(patience_) + " evaluations (best " +
           std::to_string(p.best_valid) + " at epoch " + std::to_string(p.best_epoch) + ")");
  return false;
}

void NodeOutputs::on_start(Trainer& trainer) {
  if (!paths_.predictions.empty()) check_writable(trainer.world(), paths_.predictions, "predictions");
  if (!paths_.embeddings.empty()) check_writable(trainer.world(), paths_.embeddings, "embeddings");
}

void NodeOutputs::on_finish(Trainer& trainer) {
  if (!paths_.want_predictions() && !paths_.want_embeddings()) return;
  if (trainer.stop_signal() != 0) {  // an interrupted run writes no outputs; its resumed run will
    log_line("stopped early: predictions and embeddings are written when the resumed run finishes");
    return;
  }
  const bool best = !trainer.best_state().empty();
  const int64_t epoch = best ? trainer.progress().best_epoch : trainer.progress().epochs_done;
  if (!best) log_line("no evaluation in this run: node outputs come from the final model");
  trainer.with_best_state([&] { trainer.source().write_outputs(trainer.model(), epoch - 1, paths_); });
  std::string what;
  if (!paths_.predictions.empty()) what += "predictions to " + paths_.predictions;
  if (!paths_.embeddings.empty()) what += (what.empty() ? "" : ", ") + ("embeddings to " + paths_.embeddings);
  if (!what.empty()) log_line("wrote " + what + " (epoch " + std::to_string(epoch) + ")");
}

KernelProfileReport::~KernelProfileReport() = default;

bool KernelProfileReport::on_epoch(Trainer& trainer, const EpochRecord& epoch) {
  (void)trainer;
  // The first epoch makes the vendor libraries' descriptors and workspaces: it is left out.
  if (profile_) {
    ++epochs_;
    seconds_ += epoch.seconds;
  } else {
    profile_ = std::make_unique<KernelProfile>();
  }
  return true;
}

void KernelProfileReport::on_finish(Trainer& trainer) {
  if (!profile_) return;
  const std::vector<KernelTime> totals = profile_->totals();
  const AllocationTotals allocations = profile_->allocations();
  profile_.reset();
  if (trainer.world().rank() != 0) return;
  if (epochs_ == 0) {
    log_line("kernel profile: no epoch after the first ran (it needs two epochs or more)");
    return;
  }
  for (const std::string& line :
       describe_kernel_profile(totals, allocations, epochs_, seconds_ / double(epochs_), top_))
    log_line(line);
}

}  // namespace tessera
