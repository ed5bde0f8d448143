// SPDX-License-Identifier: BSD-3-Clause
// Byte and time counters for collectives, per named phase ("spmm allreduce", "load edges", ...).
// Bytes are what this rank contributes, so analytic volumes can be checked exactly:
//   all-reduce: the buffer; all-gather: this rank's block; reduce-scatter: the whole input;
//   all-to-all(v): bytes addressed to other ranks (not to itself); broadcast: the buffer, on the root only.
// Time runs from the call (or the post of a non-blocking one) to its completion.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

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

  /// Adds one completed collective.
  void record(const std::string& phase, Collective kind, int64_t bytes, double seconds);
  /// Every phase recorded so far.
  const std::map<std::string, PerKind>& phases() const { return phases_; }
  /// Counters of one phase and kind (zeros if never recorded).
  CollectiveCounters get(const std::string& phase, Collective kind) const;
  /// Sum over all phases of one kind.
  CollectiveCounters total(Collective kind) const;
  /// Bytes over every phase and kind.
  int64_t total_bytes() const;
  /// Forgets everything.
  void clear() { phases_.clear(); }

 private:
  std::map<std::string, PerKind> phases_;
};

}  // namespace tessera
