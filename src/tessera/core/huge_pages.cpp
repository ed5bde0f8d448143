// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/huge_pages.hpp"

#include <Kokkos_Core.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace tessera {

namespace {

constexpr uintptr_t kHugePage = uintptr_t(2) << 20;

std::atomic<int64_t> min_bytes_{0};  // set before the hook is installed
std::atomic<int64_t> advised_views_{0}, advised_bytes_{0};
Kokkos_Profiling_allocateDataFunction chained_ = nullptr;
bool installed_ = false;

// The whole 2 MiB pages inside [ptr, ptr + size): only those can be huge.
void advise(const void* ptr, uint64_t size) {
#ifdef MADV_HUGEPAGE
  const uintptr_t begin = (uintptr_t(ptr) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (uintptr_t(ptr) + size) & ~(kHugePage - 1);
  if (end <= begin) return;
  // Advice, not a requirement: a kernel without THP, or a range it will not take, keeps 4 KiB pages.
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0) {
    advised_views_.fetch_add(1, std::memory_order_relaxed);
    advised_bytes_.fetch_add(int64_t(end - begin), std::memory_order_relaxed);
  }
#else
  (void)ptr;
  (void)size;
#endif
}

void on_allocate(const Kokkos_Profiling_SpaceHandle space, const char* label, const void* ptr,
                 const uint64_t size) {
  const int64_t threshold = min_bytes_.load(std::memory_order_relaxed);
  if (int64_t(size) >= threshold && std::strcmp(space.name, "Host") == 0) advise(ptr, size);
  if (chained_ != nullptr) chained_(space, label, ptr, size);
}

}  // namespace

bool advise_huge_pages_for_host_views(int64_t min_bytes) {
#ifdef MADV_HUGEPAGE
  min_bytes_.store(min_bytes < 0 ? 0 : min_bytes);
  if (!installed_) {
    chained_ = Kokkos::Tools::Experimental::get_callbacks().allocate_data;
    Kokkos::Tools::Experimental::set_allocate_data_callback(&on_allocate);
    installed_ = true;
  }
  return true;
#else
  (void)min_bytes;
  return false;
#endif
}

bool huge_page_advice_on() {
  return installed_;
}

void restart_with_huge_page_malloc(char** argv) {
#ifdef __linux__
  const char* choice = std::getenv("TESSERA_HUGE_PAGES");
  if (choice != nullptr) {  // "0": the user said no; "1": set by the user or by the restart
    if (std::strcmp(choice, "0") == 0 || std::strcmp(choice, "1") == 0) return;
    // Before MPI starts, so no collective error: every rank reads the same variable and says the same.
    std::fprintf(stderr, "tessera: error: TESSERA_HUGE_PAGES must be 0 or 1, not '%s'\n", choice);
    std::exit(1);
  }
  const std::string mode = transparent_huge_page_mode();
  if (mode != "madvise" && mode != "always") return;
  // A user's own tunables are left alone: glibc (Debian's 2.36) cuts the variable at the first ':' while it
  // parses it, so what this process could read back and extend is not what the user wrote.
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && *tunables != '\0') return;
  // The program's own path, not /proc/self/exe: the kernel names a process after the file it executes,
  // and job tools (pgrep, ps, Slurm's step listings) look for "tessera", not "exe".
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0 || size_t(length) >= sizeof(self) - 1) return;
  self[length] = '\0';
  // Started through the dynamic loader (`ld-linux-x86-64.so.2 tessera ...`), /proc/self/exe is the loader,
  // which would take argv[1] for the program: go on without the restart.
  const char* base = std::strrchr(self, '/');
  base = base ? base + 1 : self;
  if (std::strncmp(base, "ld-", 3) == 0 || std::strncmp(base, "ld.so", 5) == 0 ||
      std::strncmp(base, "ld64", 4) == 0)
    return;
  if (setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1) != 0 || setenv("TESSERA_HUGE_PAGES", "1", 1) != 0)
    return;
  execv(self, argv);
  // exec failed (no /proc, say): go on with 4 KiB pages for malloc; the View hook still applies.
#else
  (void)argv;
#endif
}

const char* transparent_huge_page_mode() {
  static const std::string mode = [] {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(in, line);  // e.g. "always [madvise] never": the bracketed word is the mode
    const size_t open = line.find('['), close = line.find(']');
    return open == std::string::npos || close == std::string::npos ? std::string()
                                                                   : line.substr(open + 1, close - open - 1);
  }();
  return mode.c_str();
}

HugePageAdvice huge_page_advice() {
  return {advised_views_.load(), advised_bytes_.load()};
}

}  // namespace tessera
