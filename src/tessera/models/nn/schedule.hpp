// SPDX-License-Identifier: BSD-3-Clause
// Learning-rate schedules: a factor on the optimizer's learning rate for each step, a function of where the
// step is in the run (so a resumed run follows the same schedule as the uninterrupted one). The library's
// pieces: constant, step decay, cosine decay, and a linear warm-up before any of them. An application may
// derive its own from LearningRateSchedule; the command line builds one from ScheduleSettings.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/core/enum_names.hpp"

namespace tessera {

/// Where a step is in the run, in epochs.
struct ScheduleClock {
  double progress = 0;  ///< epochs done when the step starts: epoch + step / steps_per_epoch (0-based)
  double step = 1;      ///< one step's share of an epoch: 1 / steps_per_epoch
  double total = 1;     ///< epochs of the whole run
};

/// A factor on the learning rate, per step.
class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  /// The factor on the optimizer's learning rate for the step at `at`.
  virtual double factor(const ScheduleClock& at) const = 0;
  /// One line for the log ("cosine to 0.1x").
  virtual std::string describe() const = 0;
};

/// 1 throughout.
class ConstantSchedule final : public LearningRateSchedule {
 public:
  double factor(const ScheduleClock& at) const override;
  std::string describe() const override { return "constant"; }
};

/// gamma^floor(progress / every): the rate times gamma after every `every` epochs (torch's StepLR).
class StepSchedule final : public LearningRateSchedule {
 public:
  /// Throws Error unless every > 0 and 0 < gamma <= 1.
  StepSchedule(double every, double gamma);
  double factor(const ScheduleClock& at) const override;
  std::string describe() const override;

 private:
  double every_, gamma_;
};

/// min + (1 - min) (1 + cos(pi progress / total)) / 2: from 1 down to `min` at the end of the run, per step
/// (torch's CosineAnnealingLR with T_max the run's steps).
class CosineSchedule final : public LearningRateSchedule {
 public:
  /// Throws Error unless 0 <= min_factor <= 1.
  explicit CosineSchedule(double min_factor = 0);
  double factor(const ScheduleClock& at) const override;
  std::string describe() const override;

 private:
  double min_;
};

/// A linear warm-up over the first `epochs` epochs, then `after` over the rest of the run, whose clock
/// starts when the warm-up ends: step k of the warm-up's W steps gets (k + 1) / W of after's first factor.
class WarmupSchedule final : public LearningRateSchedule {
 public:
  /// Throws Error unless epochs > 0 and `after` is set.
  WarmupSchedule(double epochs, std::unique_ptr<LearningRateSchedule> after);
  double factor(const ScheduleClock& at) const override;
  std::string describe() const override;

 private:
  double epochs_;
  std::unique_ptr<LearningRateSchedule> after_;
};

/// The schedule the command line names.
enum class ScheduleKind {
  Constant,  ///< ConstantSchedule
  Step,      ///< StepSchedule
  Cosine     ///< CosineSchedule
};
/// The names of ScheduleKind's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<ScheduleKind> kScheduleKindNames[] = {
    {ScheduleKind::Constant, "constant"},
    {ScheduleKind::Step, "step"},
    {ScheduleKind::Cosine, "cosine"}};
/// constant or step or cosine: the name of a value.
inline const char* schedule_name(ScheduleKind kind) { return name_of(kScheduleKindNames, kind); }

/// A schedule as options (`--lr-schedule`, `--lr-warmup`, `--lr-step-every`, `--lr-gamma`, `--lr-min`).
struct ScheduleSettings {
  ScheduleKind kind = ScheduleKind::Constant;  ///< the decay
  double warmup_epochs = 0;                    ///< > 0: a linear warm-up first (WarmupSchedule)
  double step_every = 30;                      ///< Step: epochs between decays
  double gamma = 0.1;                          ///< Step: the factor of each decay
  double min_lr = 0;                           ///< Cosine: the learning rate at the end of the run
  /// Throws Error naming the option of the first bad value; `lr` is the optimizer's (min_lr must not
  /// exceed it), `epochs` the run's (the warm-up must end before the run does).
  void validate(double lr, int64_t epochs) const;
  /// Whether the factors depend on the run's length (cosine): a resumed run must keep its epochs.
  bool depends_on_epochs() const { return kind == ScheduleKind::Cosine || warmup_epochs > 0; }
  /// Whether it is the constant rate (no schedule).
  bool constant() const { return kind == ScheduleKind::Constant && warmup_epochs == 0; }
};

/// The schedule the settings describe, for an optimizer whose learning rate is `lr`.
std::unique_ptr<LearningRateSchedule> make_schedule(const ScheduleSettings& settings, double lr);

}  // namespace tessera
