// SPDX-License-Identifier: BSD-3-Clause
// Wall-clock timing: a stopwatch and per-phase accumulators that trainers and loaders report.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

/// Seconds since an arbitrary fixed point (steady clock).
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Seconds since it was made (or restarted).
class Stopwatch {
 public:
  /// Starts now.
  Stopwatch() : start_(wall_seconds()) {}
  /// Seconds since the start.
  double seconds() const { return wall_seconds() - start_; }
  /// Starts again now.
  void restart() { start_ = wall_seconds(); }

 private:
  double start_;
};

/// Seconds accumulated per named phase ("spmm", "read features", ...). A phase may also be added later
/// (add_deferred): a device interval whose events are read only when a total is next asked for, so that
/// timing a kernel does not make the host wait for it.
class PhaseTimers {
 public:
  PhaseTimers() = default;
  /// A copy of the totals with every deferred time read.
  PhaseTimers(const PhaseTimers& other) : seconds_((other.settle(), other.seconds_)) {}
  /// The same as the copy constructor.
  PhaseTimers& operator=(const PhaseTimers& other) {
    other.settle();
    seconds_ = other.seconds_;
    pending_.clear();
    return *this;
  }
  /// Adds `seconds` to a phase.
  void add(const std::string& phase, double seconds) { seconds_[phase] += seconds; }
  /// Adds what `seconds()` returns to a phase when a total is next read.
  void add_deferred(const std::string& phase, std::function<double()> seconds) {
    pending_.emplace_back(phase, std::move(seconds));
  }
  /// A phase's total (0 when never added).
  double get(const std::string& phase) const {
    settle();
    auto it = seconds_.find(phase);
    return it == seconds_.end() ? 0.0 : it->second;
  }
  /// Every phase's total.
  const std::map<std::string, double>& all() const {
    settle();
    return seconds_;
  }
  /// Forgets everything.
  void clear() {
    seconds_.clear();
    pending_.clear();
  }

 private:
  void settle() const {
    for (auto& [phase, seconds] : pending_) seconds_[phase] += seconds();
    pending_.clear();
  }
  mutable std::map<std::string, double> seconds_;
  mutable std::vector<std::pair<std::string, std::function<double()>>> pending_;
};

/// Adds the lifetime of the scope to one phase.
class ScopedPhase {
 public:
  /// Times the scope into `phase` of `timers`.
  ScopedPhase(PhaseTimers& timers, std::string phase) : timers_(timers), phase_(std::move(phase)) {}
  ~ScopedPhase() { timers_.add(phase_, watch_.seconds()); }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimers& timers_;
  std::string phase_;
  Stopwatch watch_;
};

/// Peak resident memory of this process in bytes (getrusage).
long long peak_rss_bytes();

/// Hands the allocator's free memory back to the system (glibc's malloc_trim; nothing elsewhere). glibc
/// keeps freed arrays below its mmap threshold, which it raises up to 32 MiB as arrays are freed, in the
/// process; a phase that frees many such arrays calls this so that what it freed is not counted again
/// beside what the next phase allocates.
void release_free_memory();

}  // namespace tessera
