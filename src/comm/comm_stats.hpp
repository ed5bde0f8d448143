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

enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Count };
const char* collective_name(Collective kind);

struct CollectiveCounters {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0.0;
};

class CommStats {
 public:
  using PerKind = std::array<CollectiveCounters, size_t(Collective::Count)>;

  void record(const std::string& phase, Collective kind, int64_t bytes, double seconds);
  const std::map<std::string, PerKind>& phases() const { return phases_; }
  /// Counters of one phase and kind (zeros if never recorded).
  CollectiveCounters get(const std::string& phase, Collective kind) const;
  /// Sum over all phases of one kind.
  CollectiveCounters total(Collective kind) const;
  int64_t total_bytes() const;
  void clear() { phases_.clear(); }

 private:
  std::map<std::string, PerKind> phases_;
};

}  // namespace tessera
