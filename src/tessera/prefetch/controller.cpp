// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/prefetch/controller.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>

#include "agent_answer.hpp"
#include "agent_process.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

namespace {

class FixedController : public PrefetchController {
 public:
  FixedController(PrefetchPolicy policy, int64_t interval) : policy_(policy), interval_(interval) {}
  bool evict(int64_t step) override {
    return policy_ == PrefetchPolicy::Periodic && step > 0 && step % interval_ == 0;
  }
  void observe(const StepObservation&) override {}
  std::string state() const override { return prefetch_policy_name(policy_); }

 private:
  PrefetchPolicy policy_;
  int64_t interval_;
};

// Sliding window of per-step hit rates and misses.
class Window {
 public:
  explicit Window(int64_t size) : size_(size_t(std::max<int64_t>(size, 2))) {}
  void push(const StepObservation& o) {
    steps_.push_back(o);
    if (steps_.size() > size_) steps_.pop_front();
  }
  bool full() const { return steps_.size() == size_; }
  double hit_rate() const {
    int64_t hits = 0, remote = 0;
    for (const StepObservation& o : steps_) {
      hits += o.hits;
      remote += o.remote_rows;
    }
    return remote > 0 ? double(hits) / double(remote) : 1.0;
  }
  /// Misses of the newer half over misses of the older half (> 1: rising).
  double miss_trend() const {
    const size_t half = steps_.size() / 2;
    double older = 0, newer = 0;
    for (size_t k = 0; k < steps_.size(); ++k)
      (k < half ? older : newer) += double(steps_[k].remote_rows - steps_[k].hits);
    return older > 0 ? newer / older : 1.0;
  }

 private:
  size_t size_;
  std::deque<StepObservation> steps_;
};

class AdaptiveController : public PrefetchController {
 public:
  explicit AdaptiveController(int64_t interval) : interval_(interval), window_(interval) {}
  bool evict(int64_t step) override {
    const int64_t since = step - last_eviction_;
    if (step == 0 || since < std::max<int64_t>(1, interval_ / 2)) return false;
    const bool stale = window_.full() && (window_.hit_rate() < best_ - kDrop || window_.miss_trend() > kRise);
    if (!stale && since < 4 * interval_) return false;
    last_eviction_ = step;
    best_ = 0;
    return true;
  }
  void observe(const StepObservation& o) override {
    window_.push(o);
    if (window_.full()) best_ = std::max(best_, window_.hit_rate());
  }
  std::string state() const override { return "adaptive"; }

 private:
  static constexpr double kDrop = 0.02, kRise = 1.05;
  int64_t interval_, last_eviction_ = 0;
  double best_ = 0;
  Window window_;
};

class ExternalController : public PrefetchController {
 public:
  ExternalController(const PrefetchOptions& o, int rank, int64_t capacity)
      : options_(o),
        rank_(rank),
        capacity_(capacity),
        fallback_(PrefetchPolicy::Periodic, o.interval),
        window_(o.interval) {
    try {
      agent_ = std::make_unique<AgentProcess>(o.agent);
    } catch (const Error& e) {
      fall_back(e.what());
    }
  }
  bool evict(int64_t step) override {
    if (agent_) poll(step);
    if (!agent_) return fallback_.evict(step);
    const bool answer = evict_next_;
    evict_next_ = false;
    return answer;
  }
  void observe(const StepObservation& o) override {
    window_.push(o);
    totals_.hits += o.hits;
    totals_.remote_rows += o.remote_rows;
    totals_.fetched_rows += o.fetched_rows;
    totals_.evictions += o.evictions;
    if (!agent_ || (o.step + 1) % options_.interval != 0) return;
    const nlohmann::json line = {{"type", "observation"},
                                 {"rank", rank_},
                                 {"window", window_id_},
                                 {"step", o.step},
                                 {"capacity", capacity_},
                                 {"window_hit_rate", window_.hit_rate()},
                                 {"miss_trend", window_.miss_trend()},
                                 {"remote_rows", totals_.remote_rows},
                                 {"hits", totals_.hits},
                                 {"fetched_rows", totals_.fetched_rows},
                                 {"evictions", totals_.evictions}};
    totals_ = StepObservation{};
    if (!agent_->send(line.dump())) return fall_back("it does not read its input (exited or stuck)");
    if (!waiting_) {
      waiting_ = true;
      waiting_since_ = Clock::now();
    }
    ++outstanding_;
    ++window_id_;
  }
  std::string state() const override {
    return agent_ ? "external" : "external -> periodic (" + reason_ + ")";
  }

 private:
  using Clock = std::chrono::steady_clock;

  void poll(int64_t step) {
    while (auto line = agent_->take_line()) {
      const std::optional<bool> evict = parse_agent_answer(*line);
      if (!evict)
        return fall_back("malformed answer '" + line->substr(0, 80) + "' (expected {\"evict\": true|false})");
      evict_next_ = evict_next_ || *evict;
      outstanding_ = std::max<int64_t>(0, outstanding_ - 1);
      waiting_ = outstanding_ > 0;
      waiting_since_ = Clock::now();
    }
    if (agent_->finished()) return fall_back("the agent exited");
    const double waited = std::chrono::duration<double>(Clock::now() - waiting_since_).count();
    if (waiting_ && waited > options_.agent_timeout_s) {
      char why[128];
      std::snprintf(why, sizeof(why), "no answer within %.3g s (step %lld)", options_.agent_timeout_s,
                    (long long)step);
      fall_back(why);
    }
  }
  void fall_back(const std::string& why) {
    reason_ = why;
    agent_.reset();
    // Every rank runs its own agent; each reports its own fallback.
    std::fprintf(stderr, "tessera: rank %d: prefetch agent '%s': %s; falling back to periodic eviction\n",
                 rank_, options_.agent.c_str(), why.c_str());
  }

  PrefetchOptions options_;
  int rank_ = 0;          // reported to the agent and in the fallback message
  int64_t capacity_ = 0;  // cache slots (reported to the agent)
  FixedController fallback_;
  Window window_;
  std::unique_ptr<AgentProcess> agent_;
  std::string reason_;
  StepObservation totals_;
  int64_t window_id_ = 0, outstanding_ = 0;
  bool waiting_ = false, evict_next_ = false;
  Clock::time_point waiting_since_;
};

}  // namespace

void PrefetchOptions::validate() const {
  require(fraction >= 0 && fraction <= 1, "`prefetch-fraction` must be in [0, 1], not ", fraction);
  require(cache_bytes >= 0, "`cache-size` must not be negative, not ", cache_bytes);
  require(alpha > 0 && alpha < 1, "`prefetch-alpha` must be in (0, 1), not ", alpha);
  require(interval >= 1 && interval <= (int64_t(1) << 30), "`prefetch-interval` must be in [1, ",
          int64_t(1) << 30, "], not ", interval);
  require(std::isfinite(agent_timeout_s) && agent_timeout_s > 0 && agent_timeout_s <= 86400,
          "`prefetch-agent-timeout` must be in (0, 86400] seconds, not ", agent_timeout_s);
  require(policy == PrefetchPolicy::External || agent.empty(),
          "`prefetch-agent` needs `prefetch-policy` external");
  require(policy != PrefetchPolicy::External || !agent.empty(),
          "`prefetch-policy` external needs `prefetch-agent` CMD");
}

std::unique_ptr<PrefetchController> make_controller(const PrefetchOptions& options, int rank,
                                                    int64_t capacity) {
  options.validate();
  switch (options.policy) {
    case PrefetchPolicy::Adaptive:
      return std::make_unique<AdaptiveController>(options.interval);
    case PrefetchPolicy::External:
      return std::make_unique<ExternalController>(options, rank, capacity);
    default:
      return std::make_unique<FixedController>(options.policy, options.interval);
  }
}

}  // namespace tessera
