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

void CommStats::record(const std::string& phase, Collective kind, int64_t bytes, double seconds) {
  CollectiveCounters& c = phases_[phase][size_t(kind)];
  c.calls += 1;
  c.bytes += bytes;
  c.seconds += seconds;
}

CollectiveCounters CommStats::get(const std::string& phase, Collective kind) const {
  auto it = phases_.find(phase);
  return it == phases_.end() ? CollectiveCounters{} : it->second[size_t(kind)];
}

CollectiveCounters CommStats::total(Collective kind) const {
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
