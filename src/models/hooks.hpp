// SPDX-License-Identifier: BSD-3-Clause
// The library's trainer hooks: what `tessera train` adds to the loop, each usable alone by an application.
//   ConsoleReport   one line per epoch on rank 0 (and the mode's extra lines)
//   MetricsFile     the same as JSON lines (--metrics), per step too where the mode reports steps
//   Checkpointer    checkpoints every K epochs or at the end (--checkpoint), and resume (--resume)
//   EarlyStopping   stops after K evaluations without a better validation accuracy (--patience)
//   NodeOutputs     predictions and embeddings of every node from the best-validation model
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "tessera/models/trainer.hpp"

namespace tessera {

/// One line per epoch on rank 0: loss, accuracies, time; then the mode's extra lines.
class ConsoleReport : public TrainerHook {
 public:
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;
};

/// JSON lines on rank 0: one per epoch (and per step for modes that report steps). Appends after a resume.
class MetricsFile : public TrainerHook {
 public:
  /// Collective checks happen in on_start (an unwritable path fails on every rank). `first` (an object, e.g.
  /// the load's phases) is merged into this run's first epoch record.
  explicit MetricsFile(std::string path, nlohmann::json first = nullptr)
      : path_(std::move(path)), first_(std::move(first)) {}
  void on_start(Trainer& trainer) override;
  void on_step(Trainer& trainer, const StepRecord& step) override;
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;

 private:
  std::string path_;
  nlohmann::json first_;
  std::ofstream out_;
};

/// DIR/checkpoint.h5 (parallel HDF5, global layout, written atomically) every `every` epochs, or at the end
/// when `every` is 0, and always when a signal stops the run (TrainerOptions::stop_on_signal); with
/// `resume`, loads it before the first epoch (the run continues from it).
class Checkpointer : public TrainerHook {
 public:
  /// The checkpoint's path in a directory.
  static std::string path_in(const std::string& dir) { return dir + "/checkpoint.h5"; }
  /// Checkpoints into `dir` every `every` epochs (0: at the end); `resume` loads DIR's checkpoint first.
  Checkpointer(std::string dir, int64_t every, bool resume)
      : dir_(std::move(dir)), every_(every), resume_(resume) {}
  /// Checks that DIR can take a checkpoint (before any epoch runs), then resumes when asked.
  void on_start(Trainer& trainer) override;
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;
  void on_finish(Trainer& trainer) override;

 private:
  void save(Trainer& trainer);
  std::string dir_;
  int64_t every_;
  bool resume_;
  int64_t saved_at_ = -1;
};

/// Stops after `patience` evaluations in a row without a new best validation accuracy.
class EarlyStopping : public TrainerHook {
 public:
  /// patience >= 1.
  explicit EarlyStopping(int64_t patience) : patience_(patience) {}
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;

 private:
  int64_t patience_, since_best_ = 0;
};

/// Keeps a copy of the model at its best-validation epoch and writes every node's prediction and
/// embedding from it when training ends (from the final model if this run saw no evaluation).
class NodeOutputs : public TrainerHook {
 public:
  /// Writes to the non-empty paths of `paths`.
  explicit NodeOutputs(NodeOutputPaths paths) : paths_(std::move(paths)) {}
  /// Checks that the paths can be written (before any epoch runs).
  void on_start(Trainer& trainer) override;
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;
  void on_finish(Trainer& trainer) override;

 private:
  std::vector<Vector<float>> snapshot(Trainer& trainer) const;
  void restore(Trainer& trainer, const std::vector<Vector<float>>& values) const;
  NodeOutputPaths paths_;
  std::vector<Vector<float>> best_;
  int64_t best_epoch_ = -1;
};

/// Collective: throws CollectiveError "<path>: cannot write <what> (<reason>)" on every rank unless rank 0
/// can create `path` (probed with a temporary file next to it, removed again).
void check_writable(const Communicator& comm, const std::string& path, const std::string& what);

}  // namespace tessera
