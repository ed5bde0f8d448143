// SPDX-License-Identifier: BSD-3-Clause
// Not installed: two host-loop aids of the attention kernels' host ops. TESSERA_SIMD asks for a loop to be
// vectorized (OpenMP's simd, where the build has OpenMP): GCC otherwise unrolls a short fixed-count loop
// of selects (LeakyReLU, a running maximum) into scalar branches before its vectorizer sees it.
// kPrefetchAhead: how many entries ahead a gather loop asks for rows (prefetch_bytes), as it waits on
// those loads.
#pragma once

#include <cstdint>

#include "tessera/core/prefetch_hint.hpp"

#if defined(_OPENMP)
#define TESSERA_SIMD _Pragma("omp simd")
#else
#define TESSERA_SIMD
#endif

namespace tessera::impl {

/// Entries ahead whose gathered rows a host loop requests early.
constexpr int64_t kPrefetchAhead = 6;

using tessera::prefetch_bytes;

}  // namespace tessera::impl
