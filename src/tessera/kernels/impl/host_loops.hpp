// SPDX-License-Identifier: BSD-3-Clause
// Not installed: two host-loop aids of the attention kernels' host ops. TESSERA_SIMD asks for a loop to be
// vectorized (OpenMP's simd, where the build has OpenMP): GCC otherwise unrolls a short fixed-count loop
// of selects (LeakyReLU, a running maximum) into scalar branches before its vectorizer sees it.
// prefetch_rows asks for the rows of entries a few ahead of a gather loop, which waits on those loads.
#pragma once

#include <cstdint>

#if defined(_OPENMP)
#define TESSERA_SIMD _Pragma("omp simd")
#else
#define TESSERA_SIMD
#endif

namespace tessera::impl {

/// Entries ahead whose gathered rows a host loop requests early.
constexpr int64_t kPrefetchAhead = 6;

/// Requests the cache lines of `bytes` bytes from `p` (a hint: never faults, even past the data's end).
inline void prefetch_bytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b);
}

}  // namespace tessera::impl
