// SPDX-License-Identifier: BSD-3-Clause
// The mini-batch pipeline (docs/architecture.md §5): a sampler thread builds step t+1's batch while step t trains. One
// batch in flight at a time; the trainer asks for the next batch right after taking the current one. The
// builder must not touch Kokkos or MPI (plain host containers): it runs beside the main thread's kernels
// and needs no MPI_THREAD_MULTIPLE. Exceptions thrown by the builder reappear in take().
#pragma once

#include <functional>
#include <future>
#include <utility>

#include "tessera/core/timer.hpp"

namespace tessera {

/// Builds batches of type Batch one ahead of the trainer, on a thread of its own or inline.
template <class Batch>
class BatchPipeline {
 public:
  /// background = false builds each batch inside take() (the no-overlap baseline).
  explicit BatchPipeline(bool background) : background_(background) {}
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;
  ~BatchPipeline() {
    if (pending_.valid()) pending_.wait();
  }

  /// Starts building the next batch.
  void request(std::function<Batch()> build) {
    auto timed = [this, build = std::move(build)] {
      Stopwatch watch;
      Batch b = build();
      last_build_s_ = watch.seconds();
      return b;
    };
    if (background_)
      pending_ = std::async(std::launch::async, std::move(timed));
    else
      deferred_ = std::move(timed);
  }

  /// The batch requested last; adds the time spent waiting for it to waited_seconds().
  Batch take() {
    Stopwatch watch;
    Batch b = background_ ? pending_.get() : deferred_();
    waited_s_ += watch.seconds();
    build_s_ += last_build_s_;
    return b;
  }

  /// Sampling time of all batches taken so far.
  double build_seconds() const { return build_s_; }
  /// Of it, time the trainer stood waiting.
  double waited_seconds() const { return waited_s_; }

 private:
  bool background_;
  std::future<Batch> pending_;
  std::function<Batch()> deferred_;
  double last_build_s_ = 0, build_s_ = 0, waited_s_ = 0;
};

}  // namespace tessera
