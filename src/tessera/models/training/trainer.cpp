// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/training/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/device_collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/kernel_profile.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/stop_signals.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/nn/optimizer.hpp"
#include "tessera/models/training/trainer_report.hpp"
#include "tessera/parallel3d/pmm.hpp"

namespace tessera {

namespace {

// A free function: nvcc's extended lambdas may not sit in private member functions.
void scale_vector(const Vector<float>& v, float factor) {
  Kokkos::parallel_for(
      "tessera::scale_vector", Kokkos::RangePolicy<ExecSpace>(0, int64_t(v.extent(0))),
      KOKKOS_LAMBDA(int64_t k) { v(k) *= factor; });
}

// Whether evaluation r is the new best (Selection); counts evaluations without progress. Accuracy: ties keep
// the earlier epoch, unless the graph has no validation nodes (best_is_last): then the latest.
bool record_if_best(TrainingProgress& progress, const EpochRecord& r, const TrainerOptions& options) {
  if (!r.evaluated) return false;
  const bool accuracy_held = r.valid_acc >= progress.max_valid,
             loss_held = r.valid_loss <= progress.min_valid_loss;
  progress.max_valid = std::max(progress.max_valid, r.valid_acc);
  progress.min_valid_loss = std::min(progress.min_valid_loss, r.valid_loss);
  bool best = options.best_is_last || r.valid_acc > progress.best_valid;
  bool progressed = best;
  if (options.selection == Selection::AccuracyAndLoss && !options.best_is_last) {
    best = accuracy_held && loss_held;
    progressed = accuracy_held || loss_held;
  }
  if (!progressed) {
    ++progress.evaluations_since_best;
    return false;
  }
  progress.evaluations_since_best = 0;
  if (!best) return false;
  progress.best_valid = r.valid_acc;
  progress.best_epoch = r.epoch;
  progress.test_at_best = r.test_acc;
  return true;
}

// The model's parameter values then buffers, copied (the best-validation state).
void snapshot_state(Model& model, std::vector<Vector<float>>& into) {
  const std::vector<ParameterRef> params = model.parameters();
  const std::vector<BufferRef> buffers = model.buffers();
  if (into.size() != params.size() + buffers.size()) into = arrays_like(params, buffers);
  size_t k = 0;
  for (const ParameterRef& p : params) Kokkos::deep_copy(into[k++], p.param->value);
  for (const BufferRef& b : buffers) Kokkos::deep_copy(into[k++], *b.value);
}

void restore_state(Model& model, const std::vector<Vector<float>>& values) {
  size_t k = 0;
  for (const ParameterRef& p : model.parameters()) Kokkos::deep_copy(p.param->value, values[k++]);
  for (const BufferRef& b : model.buffers()) Kokkos::deep_copy(*b.value, values[k++]);
}

}  // namespace

std::vector<float> gather_global(const std::vector<ParameterRef>& params, const Communicator& comm,
                                 bool gradients) {
  std::vector<float> all;
  for (const ParameterRef& ref : params) {
    const Parameter& p = *ref.param;
    const BlockPlacement& b = ref.placement;
    std::vector<float> global(static_cast<size_t>(b.rows * b.cols), 0.0f);
    if (b.owner) {
      const auto local = Kokkos::create_mirror_view_and_copy(HostSpace(), gradients ? p.grad : p.value);
      for (int64_t r = 0; r < p.rows; ++r)
        for (int64_t c = 0; c < p.cols; ++c) {
          const int64_t gr = b.row_begin + r, gc = b.col_begin + c;
          if (gr < b.rows && gc < b.cols) global[size_t(gr * b.cols + gc)] = local(r * p.cols + c);
        }
    }
    all_reduce(comm, global.data(), int64_t(global.size()), ReduceOp::Sum,
               gradients ? "gather gradients" : "gather parameters");
    all.insert(all.end(), global.begin(), global.end());
  }
  return all;
}

namespace {

// The optimizer's settings, checked on every rank before Adam is built (which would throw on each rank
// alone): a bad value is every rank's CollectiveError.
const AdamSettings& agreed(const AdamSettings& settings, const Communicator& world) {
  world.run_agreed([&] { settings.validate(); });
  return settings;
}

}  // namespace

Trainer::Trainer(Model& model, BatchSource& source, const Communicator& world, const TrainerOptions& options)
    : model_(model),
      source_(source),
      world_(world),
      options_(options),
      optimizer_(model.parameters(), agreed(options.optimizer, world)),
      loss_(std::make_unique<SoftmaxCrossEntropy>()),
      schedule_(std::make_unique<ConstantSchedule>()),
      step_(std::make_unique<DefaultStep>()),
      seed_(options.seed.value_or(model.seed())) {
  world.check(options.epochs >= 1, "`epochs` must be at least 1, not " + std::to_string(options.epochs));
  world.check(options.eval_every >= 0, "`eval-every` must not be negative");
  world.check(
      std::isfinite(options.clip_grad_norm) && options.clip_grad_norm >= 0,
      "`clip-grad-norm` must be finite and not negative, not " + std::to_string(options.clip_grad_norm));
  int64_t total = 0;
  for (const ParameterRef& p : model.parameters()) total += p.param->size();
  flat_grads_ = Vector<float>("trainer.gradients", size_t(total));
}

void Trainer::own_hook(std::unique_ptr<TrainerHook> hook) {
  require(hook != nullptr, "Trainer::add_hook: no hook");
  hooks_.push_back(hook.get());
  owned_hooks_.push_back(std::move(hook));
}

void Trainer::set_loss(std::unique_ptr<Loss> loss) {
  require(loss != nullptr, "Trainer::set_loss: no loss");
  loss_ = std::move(loss);
}

void Trainer::set_schedule(std::unique_ptr<LearningRateSchedule> schedule) {
  require(schedule != nullptr, "Trainer::set_schedule: no schedule");
  schedule_ = std::move(schedule);
}

void Trainer::set_step(std::unique_ptr<TrainStep> step) {
  require(step != nullptr, "Trainer::set_step: no step");
  step_ = std::move(step);
}

LogitsLayout Trainer::logits_layout() const {
  const ActivationLayout& out = model_.output_layout();
  return LogitsLayout{&model_.grid().axis(out.rows_axis), &model_.grid().axis(out.cols_axis), out.col_begin,
                      out.width};
}

Matrix<float> Trainer::logits_gradient(int64_t rows) {
  const size_t cols = size_t(model_.output_layout().local_cols);
  const Matrix<float> shared = model_.logits_gradient_buffer(rows, int64_t(cols));
  if (shared.data() != nullptr) return shared;
  if (int64_t(grad_capacity_.extent(0)) < rows || grad_capacity_.extent(1) != cols)
    grad_capacity_ =
        Matrix<float>("grad_logits", size_t(grown_capacity(int64_t(grad_capacity_.extent(0)), rows)), cols);
  return Kokkos::subview(grad_capacity_, std::make_pair(int64_t(0), rows), Kokkos::ALL());
}

// Every replica's weighted gradients, summed in one flat all-reduce over the data-parallel axis.
void Trainer::sum_gradients_over_replicas() {
  const Communicator& d = source_.replicas();
  if (d.size() == 1) return;
  int64_t at = 0;
  const std::vector<ParameterRef> params = model_.parameters();
  for (const ParameterRef& p : params) {
    Kokkos::deep_copy(Kokkos::subview(flat_grads_, std::make_pair(at, at + p.param->size())), p.param->grad);
    at += p.param->size();
  }
  device_all_reduce(d, flat_grads_.data(), at, ReduceOp::Sum, "gradient allreduce d");
  at = 0;
  for (const ParameterRef& p : params) {
    Kokkos::deep_copy(p.param->grad, Kokkos::subview(flat_grads_, std::make_pair(at, at + p.param->size())));
    at += p.param->size();
  }
}

// BatchNorm's running statistics averaged over the replicas, so every replica evaluates the same model.
void Trainer::average_buffers_over_replicas() {
  const Communicator& d = source_.replicas();
  if (d.size() == 1) return;
  for (const BufferRef& b : model_.buffers()) {
    device_all_reduce(d, b.value->data(), int64_t(b.value->extent(0)), ReduceOp::Sum,
                      "norm statistics allreduce d");
    scale_vector(*b.value, 1.0f / float(d.size()));
  }
  Kokkos::fence();
}

double DefaultStep::run(Trainer& trainer, const Batch& batch, const StepInfo& at, EpochRecord& record) {
  const StepForward forward = trainer.forward_and_loss(batch, at, record);
  trainer.backward(forward, at, record);
  trainer.update(at, record);
  return forward.loss;
}

StepForward Trainer::forward_and_loss(const Batch& b, const StepInfo& at, EpochRecord& r) {
  Stopwatch phase;
  StepForward f;
  f.batch = &b;
  f.logits = b.input_dtype == StorageDtype::Bf16 ? model_.forward_bf16(b.input_bf16, *b.graph, at.pass)
                                                 : model_.forward(b.input, *b.graph, at.pass);
  f.grad = logits_gradient(int64_t(f.logits.extent(0)));
  const LogitsLayout layout = logits_layout();
  // Timed on the stream: a wall clock here would also count the forward kernels still queued before it.
  time_phase(loss_timer_, "loss", [&] {
    const LossSum s = loss_->sum_and_gradient(
        LossInput{layout, f.logits, b.labels, b.mask, b.targets, b.nodes, at.pass.epoch, b.pairs}, f.grad);
    const double weight = source_.loss_weight(s.count);
    if (weight != 1.0) {
      axpby<float>(float(weight), f.grad, 0.0f, f.grad);  // in place: the path choice
      for (const ParameterRef& p : loss_->parameters()) scale_vector(p.param->grad, float(weight));
    }
    f.loss = weight * s.sum;
  });
  Kokkos::fence();
  source_.observe(f.logits, b, layout, *loss_);
  r.forward_s += phase.seconds();
  return f;
}

bool Trainer::is_last_step(const StepInfo& at) const {
  return at.epoch + 1 == options_.epochs && at.step + 1 == source_.steps_per_epoch();
}

void Trainer::backward(const StepForward& f, const StepInfo& at, EpochRecord& r) {
  Stopwatch phase;
  model_.backward(f.grad, at.pass);
  sum_gradients_over_replicas();
  Kokkos::fence();
  r.backward_s += phase.seconds();
  // Before the update (and clipping): the step's own gradients.
  if (options_.keep_last_step && is_last_step(at) && f.batch != nullptr) {
    kept_.last_logits = gather_logits(model_, f.logits, *f.batch, source_.num_nodes());
    kept_.last_gradients = gather_global(model_.parameters(), world_, true);
  }
}

void Trainer::update(const StepInfo& at, EpochRecord& r) {
  Stopwatch phase;
  if (options_.clip_grad_norm > 0)
    r.grad_norm =
        std::max(r.grad_norm, clip_gradient_norm(model_.parameters(), world_, options_.clip_grad_norm));
  const double steps = double(source_.steps_per_epoch());
  const ScheduleClock clock{double(at.epoch) + double(at.step) / steps, 1.0 / steps, double(options_.epochs)};
  optimizer_.set_lr(float(double(options_.optimizer.lr) * schedule_->factor(clock)));
  r.lr = optimizer_.lr();
  optimizer_.step();
  average_buffers_over_replicas();
  Kokkos::fence();
  r.optimizer_s += phase.seconds();
}

void Trainer::train_step(int64_t epoch, int64_t step, EpochRecord& r, TrainResult& result) {
  const Batch& b = source_.batch(epoch, step);
  const StepInfo at{epoch, step, PassInfo{true, seed_, source_.pass_key(epoch, step)}};
  double loss = step_->run(*this, b, at, r);
  if (options_.keep_last_step && is_last_step(at)) {
    result.last_logits = std::move(kept_.last_logits);
    result.last_gradients = std::move(kept_.last_gradients);
  }
  // The step's loss: the weighted sums of every replica make the mean the mode trains on.
  if (source_.replicas().size() > 1)
    loss = all_reduce_value(source_.replicas(), loss, ReduceOp::Sum, "report");
  // Every rank holds the same value here (summed over the replicas; inside one, the loss is reduced over a
  // and c and replicated over b), so every rank stops together. Checkpoints on disk are from earlier epochs.
  if (!std::isfinite(loss))
    throw CollectiveError(diverged(
        epoch + 1, "the training loss is " + std::to_string(loss) + " at step " + std::to_string(step + 1)));
  r.loss += loss / double(source_.steps_per_epoch());
  nlohmann::json metrics = source_.step_metrics();
  if (metrics.is_null()) return;
  const StepRecord s{epoch + 1, step + 1, loss, std::move(metrics)};
  for (TrainerHook* h : hooks_) h->on_step(*this, s);
}

std::string Trainer::diverged(int64_t epoch, const std::string& what) const {
  return "diverged at epoch " + std::to_string(epoch) + ": " + what +
         " (try a smaller `lr`); stopped before anything of this epoch was recorded or saved" +
         (last_checkpoint_.empty() ? std::string(" (no checkpoint was written)")
                                   : ": the last checkpoint, " + last_checkpoint_ + ", is unchanged");
}

// Collective: non-finite parameters or buffers on any rank, or a non-finite validation loss, stop the run
// before the epoch reaches the best-validation record, a hook, a checkpoint or an output.
void Trainer::stop_if_diverged(const EpochRecord& r) {
  int64_t bad[2] = {count_nonfinite(model_.parameters(), model_.buffers()),
                    r.evaluated && !std::isfinite(r.valid_loss) ? 1 : 0};
  all_reduce(world_, bad, 2, ReduceOp::Max, "report");
  if (bad[1] != 0)
    throw CollectiveError(diverged(r.epoch, "the validation loss is " + std::to_string(r.valid_loss)));
  if (bad[0] != 0)
    throw CollectiveError(diverged(r.epoch, "parameters hold values that are not finite (" +
                                                std::to_string(bad[0]) + " entries on one rank)"));
}

TrainResult Trainer::run() {
  std::optional<StopSignalWatch> watch;
  if (options_.stop_on_signal) watch.emplace();
  stop_signal_ = 0;
  for (TrainerHook* h : hooks_) h->on_start(*this);
  TrainResult result;
  bool go = true;
  for (int64_t epoch = progress_.epochs_done; epoch < options_.epochs && go; ++epoch) {
    EpochRecord r;
    r.epoch = epoch + 1;
    const CommStats comm_before = world_.stats();
    const PhaseTimers timers_before = model_.timers() ? *model_.timers() : PhaseTimers();
    const double loss_before = loss_timer_.get("loss");
    Stopwatch epoch_watch;
    {
      // Silent unless an epoch of many steps outlasts the report interval (rank 0, stderr).
      Progress steps("epoch " + std::to_string(epoch + 1) + " steps", source_.steps_per_epoch());
      for (int64_t step = 0; step < source_.steps_per_epoch(); ++step) {
        train_step(epoch, step, r, result);
        steps.set(step + 1);
      }
    }
    r.work = source_.epoch_work();
    Stopwatch eval_watch;
    r.evaluated =
        options_.eval_every > 0 && ((epoch + 1) % options_.eval_every == 0 || epoch + 1 == options_.epochs);
    if (r.evaluated) {
      const Accuracy a = source_.evaluate(model_, *loss_, epoch);
      r.train_acc = a.train, r.valid_acc = a.valid, r.test_acc = a.test, r.valid_loss = a.valid_loss;
      r.metric = a.metric;
    }
    stop_if_diverged(r);
    if (r.evaluated) {
      r.best = record_if_best(progress_, r, options_);
      if (r.best) snapshot_state(model_, best_);
    }
    r.eval_s = eval_watch.seconds();
    r.seconds = epoch_watch.seconds();
    r.metrics = comm_report(world_, comm_before);
    // In the metrics on every grid (one rank too: bench_fullgraph.sh reads them); on the console only where
    // there is more than one rank to compare.
    std::vector<std::string> quiet_lines;
    r.metrics["phases"] =
        phase_report(world_, model_.timers(), timers_before, loss_timer_.get("loss") - loss_before,
                     comm_before, model_.grid().replica().size() > 1 ? r.lines : quiet_lines);
    r.metrics.update(source_.epoch_metrics(r.lines));
    progress_.epochs_done = r.epoch;
    result.history.push_back(r);
    for (TrainerHook* h : hooks_) go = h->on_epoch(*this, r) && go;
    for (TrainerHook* h : hooks_) h->after_epoch(*this, r);
    // A stop is agreed by every rank (hooks decide from collective values, but a hang is never an option),
    // and so is a signal, which usually reaches one rank or reaches them at different times.
    int stop[2] = {go ? 0 : 1, options_.stop_on_signal ? StopSignalWatch::received() : 0};
    all_reduce(world_, stop, 2, ReduceOp::Max, "report");
    stop_signal_ = stop[1];
    go = stop[0] == 0 && stop_signal_ == 0;
  }
  for (TrainerHook* h : hooks_) h->on_finish(*this);
  result.best_epoch = progress_.best_epoch;
  result.best_valid = progress_.best_valid;
  result.test_at_best = progress_.test_at_best;
  result.stop_signal = stop_signal_;
  result.epochs_done = progress_.epochs_done;
  // Consumed: a later run in this process starts without it.
  if (options_.stop_on_signal) StopSignalWatch::clear();
  return result;
}

void Trainer::with_best_state(const std::function<void()>& fn) {
  if (best_.empty()) {
    fn();
    return;
  }
  std::vector<Vector<float>> final_state;
  snapshot_state(model_, final_state);
  restore_state(model_, best_);
  try {
    fn();
  } catch (...) {
    restore_state(model_, final_state);
    throw;
  }
  restore_state(model_, final_state);
}

}  // namespace tessera
