// SPDX-License-Identifier: BSD-3-Clause
// Prefetch controllers (docs/architecture.md §6, Rudder): who decides when the feature cache evicts.
//   none      no cache: every remote row is fetched every step
//   static    the initial fill only, never evicts
//   periodic  evicts every Delta steps (MassiveGNN)
//   adaptive  watches the hit rate over a window of Delta steps: evicts when it has fallen clearly below
//             its best since the last eviction, or when misses are rising; at least Delta / 2 and at most
//             4 Delta steps apart
//   external  sends every window's observations as one JSON line to a program (--prefetch-agent CMD) and
//             applies its answers when they arrive; on a timeout, a crash or a malformed answer it falls back
//             to periodic for the rest of the run and says so (protocol: docs/guide/sampled.md, "Prefetch
//             agents")
// Controllers are per rank and per cache: their decisions change which rows travel in a step's one
// request, never how many collectives run, so ranks may decide differently without any risk of a hang.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/core/enum_names.hpp"

namespace tessera {

/// Who decides the cache's evictions (see the file comment).
enum class PrefetchPolicy {
  None,      ///< no cache
  Static,    ///< the initial fill only
  Periodic,  ///< every Delta steps
  Adaptive,  ///< from the windowed hit rate and miss trend
  External   ///< an agent program's answers
};
/// The names of PrefetchPolicy's values (core/enum_names.hpp): what the command line, the bindings and
/// messages use.
inline constexpr EnumName<PrefetchPolicy> kPrefetchPolicyNames[] = {{PrefetchPolicy::None, "none"},
                                                                    {PrefetchPolicy::Static, "static"},
                                                                    {PrefetchPolicy::Periodic, "periodic"},
                                                                    {PrefetchPolicy::Adaptive, "adaptive"},
                                                                    {PrefetchPolicy::External, "external"}};
/// none or static or periodic or adaptive or external: the name of a value.
inline const char* prefetch_policy_name(PrefetchPolicy policy) {
  return name_of(kPrefetchPolicyNames, policy);
}

/// The prefetch cache's settings, the one home of the sampled mode's prefetch options: the cache's capacity
/// and scores (FeatureCache) and who decides its evictions (make_controller).
struct PrefetchOptions {
  PrefetchPolicy policy = PrefetchPolicy::Periodic;  ///< which controller (None: no cache)
  double fraction = 0.25;                            ///< capacity = floor(fraction * |halo|) slots
  /// When > 0, the capacity instead: as many rows as fit in these bytes (at the rows' storage dtype, so bf16
  /// rows twice as many), at most |halo|.
  int64_t cache_bytes = 0;
  double alpha = 0.05;         ///< per-step score decay: scores times (1 - alpha)
  int64_t interval = 16;       ///< Delta: steps between evictions (periodic), a controller's window
  std::string agent;           ///< external: the command (run with /bin/sh -c)
  double agent_timeout_s = 5;  ///< external: longest wait for an answer to a window
  /// Throws Error naming the first option out of range (policy and agent must agree).
  void validate() const;
};

/// What one step saw: the counts of RemoteFeatures' FetchStats.
struct StepObservation {
  int64_t step = 0;          ///< over the run, from 0
  int64_t remote_rows = 0;   ///< remote input rows needed
  int64_t hits = 0;          ///< found in the cache
  int64_t fetched_rows = 0;  ///< fetched (misses and refills)
  int64_t evictions = 0;     ///< slots refilled
};

/// Decides, step by step, whether the cache evicts.
class PrefetchController {
 public:
  virtual ~PrefetchController() = default;
  /// Whether step `step` carries an eviction. Asked once per step, before its fetch.
  virtual bool evict(int64_t step) = 0;
  /// What a step saw, after its fetch.
  virtual void observe(const StepObservation& o) = 0;
  /// The policy in force now ("periodic", "external", "external -> periodic (agent exited)").
  virtual std::string state() const = 0;
};

/// Throws Error on impossible options (interval < 1, external without an agent command).
std::unique_ptr<PrefetchController> make_controller(const PrefetchOptions& options, int rank = 0,
                                                    int64_t capacity = 0);

}  // namespace tessera
