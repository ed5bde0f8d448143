// SPDX-License-Identifier: BSD-3-Clause
#include <cstdio>

#include "tessera/cli/commands.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/timer.hpp"

namespace tessera::app {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s", bytes, units[u]);
  return text;
}

std::string peak_memory_report(const Communicator& world) {
  const int64_t mine = peak_rss_bytes();
  const int64_t max = all_reduce_value(world, mine, ReduceOp::Max, "report");
  const int64_t sum = all_reduce_value(world, mine, ReduceOp::Sum, "report");
  return "peak memory: " + human_bytes(double(max)) + " max per rank, " + human_bytes(double(sum)) + " all " +
         std::to_string(world.size()) + " ranks";
}

}  // namespace tessera::app
