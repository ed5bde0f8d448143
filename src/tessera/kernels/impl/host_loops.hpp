// SPDX-License-Identifier: BSD-3-Clause
// Not installed: two host-loop aids of the attention kernels' host ops. TESSERA_SIMD asks for a loop to be
// vectorized (OpenMP's simd, where the build has OpenMP): GCC otherwise unrolls a short fixed-count loop
// of selects (LeakyReLU, a running maximum) into scalar branches before its vectorizer sees it.
// kPrefetchAhead: how many entries ahead a gather loop asks for rows (prefetch_bytes), as it waits on
// those loads. The requests run on past a row's last entry into the rows after it (entry_count bounds
// them): most rows of a power-law graph have fewer entries than that, and a loop that stopped at its row's
// end waited on every row's first gathers.
#pragma once

#include <cstdint>

#include "tessera/core/prefetch_hint.hpp"

#if defined(_OPENMP)
#define TESSERA_SIMD _Pragma("omp simd")
#else
#define TESSERA_SIMD
#endif

namespace tessera::impl {

/// Entries ahead whose gathered rows a host loop requests early: 4 KiB of 64-column rows, what the SpMM
/// host kernel keeps in flight (on the arxiv-shaped GAT step, 6 left the gathers waiting longer than 12
/// or 20, which were alike).
constexpr int64_t kPrefetchAhead = 16;

/// The entries of a block with row offsets rp: the bound of the prefetches.
template <class Offsets>
int64_t entry_count(const Offsets& rp) {
  return int64_t(rp(rp.extent(0) - 1));
}

using tessera::prefetch_bytes;

}  // namespace tessera::impl
