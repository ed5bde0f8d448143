// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/prefetch/controller.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>

#include "agent_answer.hpp"
#include "agent_process.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

const char* prefetch_policy_name(PrefetchPolicy policy) {
  switch (policy) {
    case PrefetchPolicy::None:
      return "none";
    case PrefetchPolicy::Static:
      return "static";
    case PrefetchPolicy::Periodic:
      return "periodic";
    case PrefetchPolicy::Adaptive:
      return "adaptive";
    case PrefetchPolicy::External:
      return "external";
  }
  return "?";
}

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
  explicit ExternalController(const ControllerOptions& o)
      : options_(o), fallback_(PrefetchPolicy::Periodic, o.interval), window_(o.interval) {
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
                                 {"rank", options_.rank},
                                 {"window", window_id_},
                                 {"step", o.step},
                                 {"capacity", options_.capacity},
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
                 options_.rank, options_.agent.c_str(), why.c_str());
  }

  ControllerOptions options_;
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

std::unique_ptr<PrefetchController> make_controller(const ControllerOptions& options) {
  require(options.interval >= 1, "--prefetch-interval must be at least 1, not ", options.interval);
  require(options.agent_timeout_s > 0, "--prefetch-agent-timeout must be positive, not ",
          options.agent_timeout_s);
  switch (options.policy) {
    case PrefetchPolicy::Adaptive:
      return std::make_unique<AdaptiveController>(options.interval);
    case PrefetchPolicy::External:
      require(!options.agent.empty(), "--prefetch-policy external needs --prefetch-agent CMD");
      return std::make_unique<ExternalController>(options);
    default:
      return std::make_unique<FixedController>(options.policy, options.interval);
  }
}

}  // namespace tessera
