// SPDX-License-Identifier: BSD-3-Clause
// How much memory this process may still use: what the kernel says is available on the node, capped by
// the control group a batch system (Slurm's cgroup plugin, a container) confines the job to. A run
// compares it with the performance model's prediction before it loads anything.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

/// Bytes this process could still allocate, and where the number came from.
struct AvailableMemory {
  int64_t bytes = -1;  ///< -1: unknown (no /proc/meminfo)
  std::string source;  ///< "MemAvailable", "cgroup memory.max", ...
};

/// The smaller of /proc/meminfo's MemAvailable and the cgroup's limit less its usage (v2 or v1).
AvailableMemory available_memory();

}  // namespace tessera
