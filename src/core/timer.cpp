// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/timer.hpp"

#include <sys/resource.h>

namespace tessera {

long long peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<long long>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

}  // namespace tessera
