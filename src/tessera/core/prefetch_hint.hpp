// SPDX-License-Identifier: BSD-3-Clause
// A hint for loops that gather rows from random places (a sample's feature rows, an SpMM's source rows):
// ask for the cache lines of a row some entries ahead, so their misses overlap the work on this one.
#pragma once

#include <cstdint>

namespace tessera {

/// Requests the cache lines of `bytes` bytes from `p` (a hint: never faults, even past the data's end).
inline void prefetch_bytes(const void* p, int64_t bytes) {
#if defined(__GNUC__)
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace tessera
