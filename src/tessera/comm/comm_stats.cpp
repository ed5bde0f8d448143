// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/comm_stats.hpp"

namespace tessera {

const char* collective_name(Collective kind) {
  switch (kind) {
    case Collective::AllReduce:
      return "allreduce";
    case Collective::AllGather:
      return "allgather";
    case Collective::ReduceScatter:
      return "reduce_scatter";
    case Collective::AllToAll:
      return "alltoall";
    case Collective::Broadcast:
      return "broadcast";
    default:
      return "?";
  }
}

CommStats::CommStats(const CommStats& other) : phases_((other.settle(), other.phases_)) {}

CommStats& CommStats::operator=(const CommStats& other) {
  other.settle();
  phases_ = other.phases_;
  pending_.clear();
  return *this;
}

void CommStats::settle() const {
  for (Pending& p : pending_) phases_[p.phase][size_t(p.kind)].seconds += p.seconds();
  pending_.clear();
}

void CommStats::record_deferred(const std::string& phase, Collective kind, int64_t bytes,
                                std::function<double()> seconds) {
  record(phase, kind, bytes, 0.0);
  pending_.push_back({phase, kind, std::move(seconds)});
}

void CommStats::record(const std::string& phase, Collective kind, int64_t bytes, double seconds) {
  CollectiveCounters& c = phases_[phase][size_t(kind)];
  c.calls += 1;
  c.bytes += bytes;
  c.seconds += seconds;
}

CollectiveCounters CommStats::get(const std::string& phase, Collective kind) const {
  settle();
  auto it = phases_.find(phase);
  return it == phases_.end() ? CollectiveCounters{} : it->second[size_t(kind)];
}

CollectiveCounters CommStats::total(Collective kind) const {
  settle();
  CollectiveCounters sum;
  for (const auto& [phase, per_kind] : phases_) {
    sum.calls += per_kind[size_t(kind)].calls;
    sum.bytes += per_kind[size_t(kind)].bytes;
    sum.seconds += per_kind[size_t(kind)].seconds;
  }
  return sum;
}

int64_t CommStats::total_bytes() const {
  int64_t bytes = 0;
  for (size_t k = 0; k < size_t(Collective::Count); ++k) bytes += total(Collective(k)).bytes;
  return bytes;
}

}  // namespace tessera
