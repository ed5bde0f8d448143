// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/memory.hpp"

#include <sys/mman.h>

#include <fstream>
#include <new>
#include <sstream>

#include "tessera/core/huge_pages.hpp"
#include "tessera/core/views.hpp"

namespace tessera {

void* map_pages(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* pages = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  // Fresh pages fault in when first written: 2 MiB at a time instead of 4 KiB (advice; failure is fine).
  if (bytes >= (size_t(2) << 20) && huge_page_advice_on()) (void)madvise(pages, bytes, MADV_HUGEPAGE);
#endif
  return pages;
}

void unmap_pages(void* pages, size_t bytes) {
  if (pages != nullptr) munmap(pages, bytes);
}

namespace {

// The first number in a file ("max" and unreadable files give -1).
int64_t number_in(const std::string& path) {
  std::ifstream in(path);
  long long value = -1;
  if (!(in >> value)) return -1;
  return value;
}

int64_t meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    long long kib = -1;
    if (fields >> key >> kib && key == "MemAvailable:") return int64_t(kib) * 1024;
  }
  return -1;
}

// The cgroup's limit less its usage; -1 when there is no limit. Version 2 first, then version 1.
int64_t cgroup_headroom(std::string& source) {
  const struct {
    const char *limit, *usage, *name;
  } files[] = {{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "cgroup memory.max"},
               {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                "cgroup memory.limit_in_bytes"}};
  for (const auto& f : files) {
    const int64_t limit = number_in(f.limit), usage = number_in(f.usage);
    // Version 1 reports "no limit" as a huge number rounded to the page size.
    if (limit <= 0 || usage < 0 || limit >= (int64_t(1) << 60)) continue;
    source = f.name;
    return limit > usage ? limit - usage : 0;
  }
  return -1;
}

}  // namespace

AvailableMemory available_memory() {
  AvailableMemory m{meminfo_available(), "MemAvailable"};
  std::string cgroup;
  const int64_t headroom = cgroup_headroom(cgroup);
  if (headroom >= 0 && (m.bytes < 0 || headroom < m.bytes)) m = {headroom, cgroup};
  return m;
}

int64_t device_free_bytes() {
#if defined(KOKKOS_ENABLE_CUDA)
  size_t free = 0, total = 0;
  return cudaMemGetInfo(&free, &total) == cudaSuccess ? int64_t(free) : -1;
#elif defined(KOKKOS_ENABLE_HIP)
  size_t free = 0, total = 0;
  return hipMemGetInfo(&free, &total) == hipSuccess ? int64_t(free) : -1;
#else
  return -1;
#endif
}

}  // namespace tessera
