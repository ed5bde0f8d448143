// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/simulated_network.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tessera/core/error.hpp"

namespace tessera {

std::string SimulatedNetwork::describe() const {
  if (!enabled()) return "off";
  char s[96];
  std::snprintf(s, sizeof(s), "%.3g us latency, %.3g GB/s", latency_s * 1e6, bytes_per_s * 1e-9);
  return s;
}

double SimulatedNetwork::exchange_seconds(const std::vector<int64_t>& sent,
                                          const std::vector<int64_t>& received, int self) const {
  if (!enabled()) return 0;
  int64_t out = 0, in = 0, peers = 0;
  for (size_t r = 0; r < sent.size(); ++r) {
    if (int(r) == self) continue;
    out += sent[r];
    in += received[r];
    peers += sent[r] > 0 || received[r] > 0;
  }
  return double(peers) * latency_s + double(std::max(out, in)) / bytes_per_s;
}

double SimulatedNetwork::all_reduce_seconds(int64_t bytes, int ranks) const {
  if (!enabled() || ranks < 2) return 0;
  return 2.0 * (ranks - 1) * latency_s + 2.0 * double(ranks - 1) / ranks * double(bytes) / bytes_per_s;
}

void SimulatedNetwork::delay(double seconds) const {
  if (enabled() && seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

}  // namespace tessera
