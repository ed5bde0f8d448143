// SPDX-License-Identifier: BSD-3-Clause
// The library's trainer hooks: what `tessera train` adds to the loop, each usable alone by an application.
//   ConsoleReport   one line per epoch on rank 0 (and the mode's extra lines)
//   MetricsFile     the same as JSON lines (--metrics), per step too where the mode reports steps
//   Checkpointer    checkpoints every K epochs or at the end (--checkpoint), and resume (--resume)
//   EarlyStopping   stops after K evaluations without a better validation accuracy (--patience)
//   NodeOutputs     predictions and embeddings of every node from the best-validation model
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/kernel_profile.hpp"
#include "tessera/models/training/checkpoint_lock.hpp"
#include "tessera/models/training/trainer.hpp"

namespace tessera {

/// What a ConsoleReport prints besides the one line per epoch.
struct ConsoleOptions {
  bool verbose = false;       ///< the mode's extra lines (phases, sampling, cache) after every epoch
  int64_t details_every = 0;  ///< ... or after every K-th epoch (0: only with verbose)
};

/// One line per epoch on rank 0: loss, accuracies, validation loss, time and throughput; the mode's extra
/// lines (per-phase times over the ranks, sampling, cache) as ConsoleOptions say.
class ConsoleReport : public TrainerHook {
 public:
  /// Prints as `options` say.
  explicit ConsoleReport(ConsoleOptions options = {}) : options_(options) {}
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;

 private:
  ConsoleOptions options_;
};

/// Training throughput of an epoch: its work per second of its steps (evaluation left out); 0 if unknown.
double epoch_throughput(const EpochRecord& epoch);

/// An epoch as the metrics file records it (its "epoch" lines less "kind" and "mode"): loss, learning rate,
/// times, the scores and validation loss where evaluated, throughput, and the mode's metrics.
nlohmann::json epoch_json(const EpochRecord& epoch);

/// JSON lines on rank 0: a header record, then one per epoch (and per step for modes that report steps);
/// every record has "kind" ("header", "epoch", "step") and "mode" (BatchSource::mode). After a resume the
/// file is first cut back to the checkpoint's epoch (through a temporary and a rename), then appended, so it
/// holds each epoch once and keeps the header of the run's first job.
class MetricsFile : public TrainerHook {
 public:
  /// Collective checks happen in on_start (an unwritable path fails on every rank). `first` (an object, e.g.
  /// the load's phases) is merged into this run's first epoch record; `header` (an object: configuration,
  /// grid, dataset, ...) into the header record, written when the file starts.
  explicit MetricsFile(std::string path, nlohmann::json first = nullptr, nlohmann::json header = nullptr)
      : path_(std::move(path)), first_(std::move(first)), header_(std::move(header)) {}
  void on_start(Trainer& trainer) override;
  void on_step(Trainer& trainer, const StepRecord& step) override;
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;

 private:
  std::string path_;
  nlohmann::json first_;
  nlohmann::json header_;
  std::string mode_;
  std::ofstream out_;
};

/// What a Checkpointer does.
struct CheckpointOptions {
  std::string dir;      ///< checkpoints go to DIR/checkpoint.h5
  int64_t every = 0;    ///< also every K epochs (0: only at the end); the end of a run always saves
  bool resume = false;  ///< load DIR/checkpoint.h5 before the first epoch
  /// Without resume: replace a checkpoint already in DIR (otherwise the run is refused before any epoch).
  bool overwrite = false;
  /// The directory's lock (checkpoint_lock.hpp), held for the run: taken by on_start when not given.
  std::shared_ptr<CheckpointLock> lock;
  /// The run's identity (CheckpointState::run): saved, and compared on resume.
  nlohmann::json run = nlohmann::json::object();
  bool accept_run_differences = false;  ///< resume although `run` differs (said in the log)
};

/// DIR/checkpoint.h5 (parallel HDF5, global layout, written atomically) every `every` epochs and at the end
/// of the run (a stop by a signal or a hook too); with `resume`, loads it before the first epoch (the run
/// continues from it, best-validation state and patience included).
class Checkpointer : public TrainerHook {
 public:
  /// The checkpoint's path in a directory.
  static std::string path_in(const std::string& dir) { return dir + "/checkpoint.h5"; }
  /// Checkpoints as `options` say (see CheckpointOptions).
  explicit Checkpointer(CheckpointOptions options) : options_(std::move(options)) {}
  /// Takes DIR's lock, checks that DIR can take a checkpoint and refuses one already there unless asked to
  /// resume or overwrite it (before any epoch runs), then resumes when asked.
  void on_start(Trainer& trainer) override;
  /// Saves every `every` epochs, after the other hooks recorded the epoch.
  void after_epoch(Trainer& trainer, const EpochRecord& epoch) override;
  void on_finish(Trainer& trainer) override;

 private:
  CheckpointState state(Trainer& trainer) const;
  void save(Trainer& trainer);
  CheckpointOptions options_;
  int64_t saved_at_ = -1;
};

/// Stops after `patience` evaluations in a row without progress (a better validation accuracy; with
/// Selection::AccuracyAndLoss, or a loss at most the lowest), counted by the trainer, so a resumed run keeps
/// counting where the checkpoint left off.
class EarlyStopping : public TrainerHook {
 public:
  /// patience >= 1.
  explicit EarlyStopping(int64_t patience) : patience_(patience) {}
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;

 private:
  int64_t patience_;
};

/// Times every kernel, copy and vendor call of the epochs after the first (KernelProfile) and prints the
/// largest per epoch against the epochs' measured time when training ends, on rank 0 (its own kernels).
class KernelProfileReport : public TrainerHook {
 public:
  /// `top`: how many kernels the table lists.
  explicit KernelProfileReport(int top = 15) : top_(top) {}
  ~KernelProfileReport() override;
  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override;
  void on_finish(Trainer& trainer) override;

 private:
  int top_;
  std::unique_ptr<KernelProfile> profile_;
  int64_t epochs_ = 0;
  double seconds_ = 0;
};

/// Writes every node's prediction and embedding when training ends, from the trainer's best-validation
/// state (restored from the checkpoint after a resume), or from the final model if no evaluation set one;
/// and keeps them in memory where `paths.arrays` says.
class NodeOutputs : public TrainerHook {
 public:
  /// Writes to the non-empty paths of `paths`, and into paths.arrays (which must outlive the run) if set.
  explicit NodeOutputs(NodeOutputPaths paths) : paths_(std::move(paths)) {}
  /// Checks that the paths can be written (before any epoch runs).
  void on_start(Trainer& trainer) override;
  void on_finish(Trainer& trainer) override;

 private:
  NodeOutputPaths paths_;
};

/// Collective: throws CollectiveError "<path>: cannot write <what> (<reason>)" on every rank unless rank 0
/// can create `path` (probed with a temporary file next to it, removed again).
void check_writable(const Communicator& comm, const std::string& path, const std::string& what);

/// Local: throws Error when DIR/checkpoint.h5 exists and the run neither resumes nor overwrites it.
void refuse_existing_checkpoint(const std::string& dir, bool resume, bool overwrite);

}  // namespace tessera
