// SPDX-License-Identifier: BSD-3-Clause
// --simulate-network LAT_US,GBPS, for benchmarks only: after each exchange a rank sleeps as long as its
// messages would take on a network of that latency and bandwidth, so one shared-memory machine can show
// what fewer remote bytes save on a real interconnect. The model (documented in docs/guide/sampled.md): an
// exchange costs latency per peer it talks to plus max(bytes sent, bytes received) / bandwidth; a ring
// all-reduce of B bytes on P ranks costs 2(P-1) latencies plus 2(P-1)/P * B / bandwidth. Off by default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/collectives.hpp"

namespace tessera {

/// The network a benchmark pretends to run on.
struct SimulatedNetwork {
  double latency_s = 0;    ///< per message
  double bytes_per_s = 0;  ///< bandwidth; 0: off
  /// A network is simulated.
  bool enabled() const { return bytes_per_s > 0; }
  /// "2 us latency, 25 GB/s", or "off".
  std::string describe() const;
  /// What an exchange costs a rank: latency per peer it talks to plus max(sent, received) / bandwidth.
  double exchange_seconds(const std::vector<int64_t>& sent_bytes, const std::vector<int64_t>& received_bytes,
                          int self) const;
  /// What a ring all-reduce of `bytes` on `ranks` ranks costs.
  double all_reduce_seconds(int64_t bytes, int ranks) const;
  /// Sleeps for `seconds` when enabled (busy-free).
  void delay(double seconds) const;
};

namespace detail {
// The simulated network's delay for an exchange of counts[r] values of `value_bytes` to each rank r and
// got_counts[r] from each.
inline void delay_exchange(const Communicator& comm, const SimulatedNetwork& network,
                           const std::vector<int64_t>& counts, const std::vector<int64_t>& got_counts,
                           int64_t value_bytes) {
  if (!network.enabled()) return;
  std::vector<int64_t> sent(counts.size()), received(got_counts.size());
  for (size_t r = 0; r < counts.size(); ++r) sent[r] = counts[r] * value_bytes;
  for (size_t r = 0; r < got_counts.size(); ++r) received[r] = got_counts[r] * value_bytes;
  network.delay(network.exchange_seconds(sent, received, comm.rank()));
}
}  // namespace detail

/// exchange_buckets followed by the simulated network's delay for what this rank sent and received.
template <class T>
std::vector<T> exchange_buckets_on(const Communicator& comm, const std::vector<std::vector<T>>& buckets,
                                   const std::string& phase, const SimulatedNetwork& network,
                                   std::vector<int64_t>* recv_counts = nullptr) {
  std::vector<int64_t> counts, got_counts;
  for (const std::vector<T>& bucket : buckets) counts.push_back(int64_t(bucket.size()));
  std::vector<T> out = exchange_buckets(comm, buckets, phase, &got_counts);
  detail::delay_exchange(comm, network, counts, got_counts, int64_t(sizeof(T)));
  if (recv_counts) *recv_counts = std::move(got_counts);
  return out;
}

/// exchange_grouped_into followed by the simulated network's delay for what this rank sent and received.
template <class T>
void exchange_grouped_into_on(const Communicator& comm, const std::vector<T>& send,
                              const std::vector<int64_t>& counts, const std::string& phase,
                              std::vector<T>& recv, const SimulatedNetwork& network) {
  std::vector<int64_t> got_counts;
  exchange_grouped_into(comm, send, counts, phase, recv, &got_counts);
  detail::delay_exchange(comm, network, counts, got_counts, int64_t(sizeof(T)));
}

}  // namespace tessera
