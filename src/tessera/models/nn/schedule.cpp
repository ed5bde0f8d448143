// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/schedule.hpp"

#include <cmath>
#include <cstdio>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {
std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", x);
  return text;
}
constexpr double kPi = 3.14159265358979323846;
}  // namespace

double ConstantSchedule::factor(const ScheduleClock& at) const {
  (void)at;
  return 1.0;
}

StepSchedule::StepSchedule(double every, double gamma) : every_(every), gamma_(gamma) {
  require(std::isfinite(every) && every > 0, "`lr-step-every` must be positive, not ", every);
  require(gamma > 0 && gamma <= 1, "`lr-gamma` must be in (0, 1], not ", gamma);
}

double StepSchedule::factor(const ScheduleClock& at) const {
  // A small tolerance: progress is a sum of step fractions, and a decay due at epoch 30 must not wait a step.
  return std::pow(gamma_, std::floor(at.progress / every_ + 1e-9));
}

std::string StepSchedule::describe() const {
  return "step: x" + number(gamma_) + " every " + number(every_) + " epochs";
}

CosineSchedule::CosineSchedule(double min_factor) : min_(min_factor) {
  require(min_factor >= 0 && min_factor <= 1, "the cosine schedule's floor must be in [0, 1] of `lr`, not ",
          min_factor);
}

double CosineSchedule::factor(const ScheduleClock& at) const {
  const double t = at.total > 0 ? std::min(1.0, std::max(0.0, at.progress / at.total)) : 1.0;
  return min_ + (1.0 - min_) * 0.5 * (1.0 + std::cos(kPi * t));
}

std::string CosineSchedule::describe() const {
  return "cosine to " + number(min_) + "x";
}

WarmupSchedule::WarmupSchedule(double epochs, std::unique_ptr<LearningRateSchedule> after)
    : epochs_(epochs), after_(std::move(after)) {
  require(std::isfinite(epochs) && epochs > 0, "`lr-warmup` must be positive, not ", epochs);
  require(after_ != nullptr, "a warm-up needs the schedule that follows it");
}

double WarmupSchedule::factor(const ScheduleClock& at) const {
  const ScheduleClock rest{std::max(0.0, at.progress - epochs_), at.step, std::max(0.0, at.total - epochs_)};
  const double ramp = std::min(1.0, (at.progress + at.step) / epochs_);
  return ramp * after_->factor(rest);
}

std::string WarmupSchedule::describe() const {
  return "linear warm-up over " + number(epochs_) + " epochs, then " + after_->describe();
}


void ScheduleSettings::validate(double lr, int64_t epochs) const {
  require(std::isfinite(warmup_epochs) && warmup_epochs >= 0, "`lr-warmup` must not be negative, not ",
          warmup_epochs);
  require(warmup_epochs < double(epochs) || warmup_epochs == 0, "`lr-warmup` (", warmup_epochs,
          " epochs) must end before the run does (`epochs` ", epochs, ")");
  require(std::isfinite(step_every) && step_every > 0, "`lr-step-every` must be positive, not ", step_every);
  require(gamma > 0 && gamma <= 1, "`lr-gamma` must be in (0, 1], not ", gamma);
  require(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr, "`lr-min` must be in [0, `lr` = ", lr,
          "], not ", min_lr);
}

std::unique_ptr<LearningRateSchedule> make_schedule(const ScheduleSettings& s, double lr) {
  std::unique_ptr<LearningRateSchedule> decay;
  if (s.kind == ScheduleKind::Step)
    decay = std::make_unique<StepSchedule>(s.step_every, s.gamma);
  else if (s.kind == ScheduleKind::Cosine)
    decay = std::make_unique<CosineSchedule>(lr > 0 ? s.min_lr / lr : 0.0);
  else
    decay = std::make_unique<ConstantSchedule>();
  if (s.warmup_epochs > 0) return std::make_unique<WarmupSchedule>(s.warmup_epochs, std::move(decay));
  return decay;
}

}  // namespace tessera
