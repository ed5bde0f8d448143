// SPDX-License-Identifier: BSD-3-Clause
// Byte and time counters for collectives, per named phase ("spmm allreduce", "load edges", ...).
// Bytes are what this rank contributes, so analytic volumes can be checked exactly:
//   all-reduce: the buffer; all-gather: this rank's block; reduce-scatter: the whole input;
//   all-to-all(v): bytes addressed to other ranks (not to itself); broadcast: the buffer, on the root only.
// Time runs from the call (or the post of a non-blocking one) to its completion; a collective the device's
// stream carries (NCCL) is timed by events around it on the stream, read when the counters are next read.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessera {

/// The kinds of collective that are counted.
enum class Collective {
  AllReduce,      ///< all-reduce
  AllGather,      ///< all-gather
  ReduceScatter,  ///< reduce-scatter
  AllToAll,       ///< all-to-all (fixed or variable counts)
  Broadcast,      ///< broadcast
  Count           ///< the number of kinds
};
/// "allreduce", "allgather", ...
const char* collective_name(Collective kind);

/// What was counted for one phase and kind.
struct CollectiveCounters {
  int64_t calls = 0;     ///< collectives completed
  int64_t bytes = 0;     ///< bytes this rank contributed (see the file comment)
  double seconds = 0.0;  ///< time from call (or post) to completion
};

/// Counters per phase name and collective kind.
class CommStats {
 public:
  /// One phase's counters, by kind.
  using PerKind = std::array<CollectiveCounters, size_t(Collective::Count)>;

  CommStats() = default;
  /// A copy of the counters with every deferred time read.
  CommStats(const CommStats& other);
  /// The same as the copy constructor.
  CommStats& operator=(const CommStats& other);

  /// Adds one completed collective.
  void record(const std::string& phase, Collective kind, int64_t bytes, double seconds);
  /// Adds one collective enqueued on a stream: its calls and bytes now, what `seconds()` returns when the
  /// counters are next read.
  void record_deferred(const std::string& phase, Collective kind, int64_t bytes,
                       std::function<double()> seconds);
  /// Every phase recorded so far.
  const std::map<std::string, PerKind>& phases() const {
    settle();
    return phases_;
  }
  /// Counters of one phase and kind (zeros if never recorded).
  CollectiveCounters get(const std::string& phase, Collective kind) const;
  /// Sum over all phases of one kind.
  CollectiveCounters total(Collective kind) const;
  /// Bytes over every phase and kind.
  int64_t total_bytes() const;
  /// Forgets everything.
  void clear() {
    phases_.clear();
    pending_.clear();
  }

 private:
  struct Pending {
    std::string phase;
    Collective kind;
    std::function<double()> seconds;
  };
  void settle() const;
  mutable std::map<std::string, PerKind> phases_;
  mutable std::vector<Pending> pending_;
};

}  // namespace tessera
