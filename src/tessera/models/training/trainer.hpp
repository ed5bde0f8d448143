// SPDX-License-Identifier: BSD-3-Clause
// The one training loop (docs/architecture.md §9): epochs of steps from a BatchSource — forward, the loss
// over the grid (loss.hpp; softmax cross-entropy unless set), backward, gradients summed over the
// data-parallel replicas and optionally clipped, Adam at the schedule's learning rate (schedule.hpp) — then
// evaluation and the best-validation record. Everything else a run does is a hook: the console line, the
// metrics file, checkpoints and resume, early stopping, per-node outputs (hooks.hpp), or an application's
// own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/timer.hpp"
#include "tessera/models/nn/loss.hpp"
#include "tessera/models/nn/optimizer.hpp"
#include "tessera/models/nn/schedule.hpp"
#include "tessera/models/training/batch_source.hpp"
#include "tessera/models/training/checkpoint.hpp"

namespace tessera {

/// Which evaluation is the best (its state kept, its test accuracy reported, node outputs written from it)
/// and what counts as progress for early stopping.
enum class Selection {
  /// The highest validation accuracy (the earliest of ties); progress is a higher one.
  Accuracy,
  /// The GAT paper's (Velickovic et al. 2018, its reference code): progress is a validation accuracy at least
  /// the highest so far or a validation loss at most the lowest so far; the best is the last evaluation where
  /// both held.
  AccuracyAndLoss
};
/// The names of Selection's values (core/enum_names.hpp): what the command line, the bindings and messages
/// use.
inline constexpr EnumName<Selection> kSelectionNames[] = {{Selection::Accuracy, "accuracy"},
                                                          {Selection::AccuracyAndLoss, "accuracy-and-loss"}};
/// accuracy or accuracy-and-loss: the name of a value.
inline const char* selection_name(Selection selection) {
  return name_of(kSelectionNames, selection);
}

/// What the loop does besides the model and the data. Set the fields by name (C++20: designated
/// initializers, in this order).
struct TrainerOptions {
  AdamSettings optimizer{};  ///< Adam's settings
  int64_t epochs = 200;      ///< train until this many epochs are done (counting a resumed run's)
  int64_t eval_every = 1;    ///< evaluate every K epochs and after the last; 0: never
  /// Keys the dropout masks; a checkpoint must match it. Unset: the model's (Model::seed), so a run has one
  /// seed, given where the model is built.
  std::optional<uint64_t> seed{};
  bool keep_last_step = false;  ///< fill TrainResult::last_logits / last_gradients (tests, debugging)
  /// Catch SIGTERM and SIGUSR1 during run() (StopSignalWatch): a signal on any rank stops every rank at
  /// the end of the epoch (a Checkpointer then saves it) and sets TrainResult::stop_signal.
  bool stop_on_signal = false;
  /// The graph has no validation nodes: every evaluation counts as the best so far, so the best-validation
  /// record (and what node outputs are written from) is the last evaluated epoch.
  bool best_is_last = false;
  /// Which evaluation is the best, and what early stopping counts as progress.
  Selection selection = Selection::Accuracy;
  /// > 0: before each update, the gradients are scaled down to this global L2 norm where theirs is larger
  /// (clip_gradient_norm).
  double clip_grad_norm = 0;
};

/// One epoch, as hooks and reports see it.
struct EpochRecord {
  int64_t epoch = 0;       ///< 1-based
  bool evaluated = false;  ///< the accuracies are set
  bool best = false;       ///< a new best validation accuracy
  double loss = 0;         ///< mean training loss of the epoch's steps
  double train_acc = 0;    ///< score on the training nodes in `metric` (accuracy unless the loss says)
  double valid_acc = 0;    ///< on the validation nodes
  double test_acc = 0;     ///< on the test nodes
  double valid_loss = 0;   ///< the loss's mean on the validation nodes
  std::string metric = "accuracy";  ///< what the three scores measure (Loss::metric)
  double lr = 0;                    ///< the learning rate of the epoch's last step
  double grad_norm = 0;    ///< clipping on: the largest global gradient norm of its steps, before clipping
  double seconds = 0;      ///< the whole epoch
  EpochWork work;          ///< what the epoch processed (BatchSource::epoch_work)
  double forward_s = 0;    ///< forward and loss
  double backward_s = 0;   ///< backward and the gradient sums over replicas
  double optimizer_s = 0;  ///< Adam
  double eval_s = 0;       ///< evaluation
  nlohmann::json metrics = nlohmann::json::object();  ///< what the mode and the communication add
  std::vector<std::string> lines;                     ///< extra console lines
};

/// One step, for sources that report steps.
struct StepRecord {
  int64_t epoch = 0;       ///< 1-based
  int64_t step = 0;        ///< 1-based
  double loss = 0;         ///< the step's mean loss over every replica
  nlohmann::json metrics;  ///< the source's step metrics
};

/// What a run returns (on every rank).
struct TrainResult {
  std::vector<EpochRecord> history;  ///< epochs run by this call (after a resume: from the resumed epoch)
  int64_t best_epoch = -1;           ///< best-validation epoch (-1: never evaluated)
  double best_valid = 0;             ///< its validation accuracy
  double test_at_best = 0;           ///< its test accuracy
  /// With keep_last_step: the last step's logits (this 3D replica's rows, nodes x classes in node order).
  std::vector<float> last_logits;
  /// With keep_last_step: every parameter's gradient of the last step (before Adam), global layout, in
  /// parameter order (gather_global).
  std::vector<float> last_gradients;
  /// Sampled mode: what the feature cache saved over the run, summed over ranks; empty in the other modes.
  std::optional<PrefetchTotals> prefetch;
  /// With TrainOptions::keep_node_outputs (run_training): every node's prediction and embedding from the
  /// best-validation state, this rank's block of node ids (as NodeOutputs writes them); empty otherwise.
  std::optional<NodeOutputArrays> node_outputs;
  int stop_signal = 0;      ///< the signal that stopped the run early (stop_on_signal), else 0
  int64_t epochs_done = 0;  ///< epochs done over the whole run (a resumed run's earlier epochs too)
  int64_t peak_bytes = 0;   ///< largest peak resident memory over the ranks at the end (run_training)
};

class Trainer;

/// Where a training step is.
struct StepInfo {
  int64_t epoch = 0;  ///< 0-based epoch
  int64_t step = 0;   ///< 0-based step within it
  PassInfo pass;      ///< the forward's training flag and dropout keys
};

/// The forward half of a training step.
struct StepForward {
  const Batch* batch = nullptr;  ///< the batch it ran on
  Matrix<const float> logits;    ///< the model's output block (valid until its next forward)
  Matrix<float> grad;            ///< dL/d logits, weighted into the mode's mean: backward's input
  double loss = 0;               ///< this replica's loss, weighted alike
};

/// One training step: what the Trainer runs on each batch. The default (DefaultStep) is
/// Trainer::forward_and_loss, Trainer::backward and Trainer::update in that order; an application replaces it
/// (Trainer::set_step) to compose them otherwise — several forwards before an update, an update skipped —
/// every rank alike.
class TrainStep {
 public:
  virtual ~TrainStep() = default;
  /// Collective: trains on `batch`; returns the step's loss as forward_and_loss returns it (this
  /// replica's, weighted into the mode's mean; the Trainer sums it over the replicas for the record).
  virtual double run(Trainer& trainer, const Batch& batch, const StepInfo& at, EpochRecord& record) = 0;
};

/// forward_and_loss, backward, update.
class DefaultStep final : public TrainStep {
 public:
  double run(Trainer& trainer, const Batch& batch, const StepInfo& at, EpochRecord& record) override;
};

/// Something a run does at fixed points of the loop. Hooks run in the order they were added.
class TrainerHook {
 public:
  virtual ~TrainerHook() = default;
  /// Before the first epoch (a resume sets the progress here).
  virtual void on_start(Trainer& trainer) { (void)trainer; }
  /// After every step of a source that reports steps.
  virtual void on_step(Trainer& trainer, const StepRecord& step) { (void)trainer, (void)step; }
  /// After every epoch; returning false stops the run after it (every rank must agree).
  virtual bool on_epoch(Trainer& trainer, const EpochRecord& epoch) {
    (void)trainer, (void)epoch;
    return true;
  }
  /// After every hook's on_epoch of that epoch: what is saved here (a checkpoint) comes after everything the
  /// other hooks recorded of the epoch (a metrics line), so a job killed in between loses nothing on resume.
  virtual void after_epoch(Trainer& trainer, const EpochRecord& epoch) { (void)trainer, (void)epoch; }
  /// After the last epoch.
  virtual void on_finish(Trainer& trainer) { (void)trainer; }
};

/// The training loop over a model and a batch source.
class Trainer {
 public:
  /// Collective over `world` (every rank of the model's grid). The model and source must outlive it.
  Trainer(Model& model, BatchSource& source, const Communicator& world, const TrainerOptions& options);
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Adds a hook, which the trainer owns (hooks run in the order added); returns it, so that the
  /// application reads what it recorded after the run. The hook lives as long as the trainer.
  template <class H>
  H& add_hook(std::unique_ptr<H> hook) {
    H& ref = *hook;
    own_hook(std::move(hook));
    return ref;
  }
  /// Builds H(args...) as a hook the trainer owns (add_hook); returns it.
  template <class H, class... Args>
  H& emplace_hook(Args&&... args) {
    return add_hook(std::make_unique<H>(std::forward<Args>(args)...));
  }
  /// Replaces the loss (default: SoftmaxCrossEntropy); before run().
  void set_loss(std::unique_ptr<Loss> loss);
  /// Replaces the learning-rate schedule (default: ConstantSchedule); before run(). Its factors multiply
  /// the optimizer's learning rate (TrainerOptions::optimizer.lr).
  void set_schedule(std::unique_ptr<LearningRateSchedule> schedule);
  /// Replaces the training step (default: DefaultStep); before run().
  void set_step(std::unique_ptr<TrainStep> step);

  /// Collective (a step's piece): the model's forward on `batch` and the loss, whose gradient is weighted
  /// into the mode's mean; the source observes the logits. Adds its time to record.forward_s.
  StepForward forward_and_loss(const Batch& batch, const StepInfo& at, EpochRecord& record);
  /// Collective (a step's piece): the model's backward from `forward.grad` (which it may overwrite), then
  /// every gradient summed over the data-parallel replicas. Adds its time to record.backward_s.
  void backward(const StepForward& forward, const StepInfo& at, EpochRecord& record);
  /// Collective (a step's piece): clipping (TrainerOptions::clip_grad_norm), the schedule's learning rate
  /// for `at`, Adam, and the replicas' buffers averaged. Sets record.lr; adds to record.optimizer_s.
  void update(const StepInfo& at, EpochRecord& record);
  /// Collective: trains until options().epochs are done or a hook stops it.
  TrainResult run();

  /// The model.
  Model& model() { return model_; }
  /// The data.
  BatchSource& source() { return source_; }
  /// The loss it minimizes.
  Loss& loss() { return *loss_; }
  /// The learning-rate schedule.
  const LearningRateSchedule& schedule() const { return *schedule_; }
  /// The optimizer (its moments and step count are checkpointed).
  Adam& optimizer() { return optimizer_; }
  /// Every rank of the run.
  const Communicator& world() const { return world_; }
  /// The loop's settings.
  const TrainerOptions& options() const { return options_; }
  /// The seed that keys the dropout masks (TrainerOptions::seed, else the model's).
  uint64_t seed() const { return seed_; }
  /// Epochs done and the best-validation record; a resuming hook sets it in on_start.
  TrainingProgress& progress() { return progress_; }
  /// The signal every rank agreed to stop on (stop_on_signal), 0 while none; hooks read it in on_finish.
  int stop_signal() const { return stop_signal_; }
  /// The parameter values then buffers of the best-validation epoch (local blocks, in parameters() then
  /// buffers() order); empty until an evaluation set one. Checkpoints save and restore it.
  std::vector<Vector<float>>& best_state() { return best_; }
  /// Tells the trainer what a checkpointing hook last saved or resumed from ("ck/checkpoint.h5 after epoch
  /// 4"): the message of a run stopped by divergence names it.
  void note_checkpoint(std::string what) { last_checkpoint_ = std::move(what); }
  /// Collective where `fn` is: runs `fn` with the best-validation state in the model (the final state if
  /// there is none), then puts the final state back.
  void with_best_state(const std::function<void()>& fn);

 private:
  void train_step(int64_t epoch, int64_t step, EpochRecord& record, TrainResult& result);
  void stop_if_diverged(const EpochRecord& record);
  std::string diverged(int64_t epoch, const std::string& what) const;
  bool is_last_step(const StepInfo& at) const;
  void own_hook(std::unique_ptr<TrainerHook> hook);
  void sum_gradients_over_replicas();
  void average_buffers_over_replicas();
  LogitsLayout logits_layout() const;
  Matrix<float> logits_gradient(int64_t rows);

  Model& model_;
  BatchSource& source_;
  const Communicator& world_;
  TrainerOptions options_;
  Adam optimizer_;
  std::unique_ptr<Loss> loss_;
  std::unique_ptr<LearningRateSchedule> schedule_;
  std::unique_ptr<TrainStep> step_;
  TrainResult kept_;  // keep_last_step: the last step's logits and gradients
  TrainingProgress progress_;
  std::vector<TrainerHook*> hooks_;
  std::vector<Vector<float>> best_;
  std::vector<std::unique_ptr<TrainerHook>> owned_hooks_;
  Matrix<float> grad_capacity_;
  Vector<float> flat_grads_;
  PhaseTimers loss_timer_;  ///< the loss's device time ("loss")
  int stop_signal_ = 0;
  uint64_t seed_ = 0;
  std::string last_checkpoint_;  // note_checkpoint
};

/// Collective over `comm`: every parameter (or its gradient) in global layout, concatenated in order.
/// Each block is written by its owner, so `comm` must hold every replica (the run's world).
std::vector<float> gather_global(const std::vector<ParameterRef>& params, const Communicator& comm,
                                 bool gradients);

}  // namespace tessera
