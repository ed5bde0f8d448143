// SPDX-License-Identifier: BSD-3-Clause
// Transparent huge pages for the large host Views (activations, gathered features, adjacency blocks).
// Why: Kokkos writes every page of a View it allocates, and a layer's buffers are hundreds of MB; with
// 4 KiB pages that first touch is one page fault per 4 KiB, which on a virtualized node measured here
// (2 cores, ogbn-arxiv-shaped sampled step) cost more than the step's arithmetic, and every random row a
// kernel gathers misses the TLB. Linux's default THP mode on many systems is `madvise`, so nothing gets huge
// pages unless it asks. A Kokkos allocation hook asks, for host Views of at least a threshold, before
// Kokkos first touches them; it chains to any Kokkos tool already loaded.
#pragma once

#include <cstdint>

namespace tessera {

/// Host Views of at least `min_bytes` are advised MADV_HUGEPAGE from now on. Idempotent (a second call only
/// changes the threshold). Returns false where the platform has no transparent huge pages (not Linux).
bool advise_huge_pages_for_host_views(int64_t min_bytes = int64_t(4) << 20);

/// Whether advise_huge_pages_for_host_views is in effect (the runtime turns it on unless
/// TESSERA_HUGE_PAGES=0): buffers that take their own pages (map_pages) then ask for huge ones too.
bool huge_page_advice_on();

/// For programs (not the library): glibc's malloc asks for huge pages only when the tunable
/// glibc.malloc.hugetlb=1 is in GLIBC_TUNABLES at start, and the hook above reaches Kokkos Views only (the
/// sampler's and exchanges' std::vectors are malloc's). Where GLIBC_TUNABLES and TESSERA_HUGE_PAGES are
/// unset and THP is `madvise` or `always`, re-executes this program (/proc/self/exe resolved) with the same
/// arguments and GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (same process id and name, before MPI starts, once:
/// TESSERA_HUGE_PAGES=1 marks the restart). Returns when it did not restart. Call it first thing in main(). A
/// TESSERA_HUGE_PAGES other than 0 or 1 is an error: one line on stderr, exit 1.
void restart_with_huge_page_malloc(char** argv);

/// The system's THP mode from /sys/kernel/mm/transparent_hugepage/enabled: "always", "madvise", "never",
/// or "" where the file is absent.
const char* transparent_huge_page_mode();

/// What the hook has advised so far in this process.
struct HugePageAdvice {
  int64_t views = 0;  ///< host Views advised
  int64_t bytes = 0;  ///< bytes of whole 2 MiB pages inside them
};
/// Host Views advised so far in this process, and their bytes.
HugePageAdvice huge_page_advice();

}  // namespace tessera
