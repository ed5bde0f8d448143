// SPDX-License-Identifier: BSD-3-Clause
// How much memory this process may still use: what the kernel says is available on the node, capped by
// the control group a batch system (Slurm's cgroup plugin, a container) confines the job to. A run
// compares it with the performance model's prediction before it loads anything. And buffers of their own
// pages, for a load's transient arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace tessera {

/// `bytes` of fresh zeroed pages in an anonymous mapping of their own, huge pages advised (null for 0
/// bytes); throws std::bad_alloc when the system has none to give.
void* map_pages(size_t bytes);
/// Returns pages from map_pages (null: nothing).
void unmap_pages(void* pages, size_t bytes);

/// An array of `count` T in pages of its own (map_pages), returned to the system when it is destroyed or
/// reset. For a load's transient arrays, which come and go between longer-lived ones: glibc's malloc raises
/// its mmap threshold up to 32 MiB as large blocks are freed and then serves such arrays from its heap,
/// where the holes they leave stay resident (the 3D load's peak grew with its exchange rounds instead of
/// falling). The pages read as zeros until written.
template <class T>
class PageBuffer {
  static_assert(std::is_trivially_copyable<T>::value, "PageBuffer holds plain values");

 public:
  /// No pages.
  PageBuffer() = default;
  /// `count` values, zero until written.
  explicit PageBuffer(size_t count) : count_(count), data_(static_cast<T*>(map_pages(count * sizeof(T)))) {}
  ~PageBuffer() { reset(); }
  /// Takes `other`'s pages, leaving it empty.
  PageBuffer(PageBuffer&& other) noexcept
      : count_(std::exchange(other.count_, 0)), data_(std::exchange(other.data_, nullptr)) {}
  /// Returns this buffer's pages and takes `other`'s, leaving it empty.
  PageBuffer& operator=(PageBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      count_ = std::exchange(other.count_, 0);
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  /// The values (null when empty).
  T* data() { return data_; }
  /// See data().
  const T* data() const { return data_; }
  /// Number of values.
  size_t size() const { return count_; }
  /// Value i.
  T& operator[](size_t i) { return data_[i]; }
  /// See operator[].
  const T& operator[](size_t i) const { return data_[i]; }
  /// Returns the pages now.
  void reset() {
    unmap_pages(data_, count_ * sizeof(T));
    data_ = nullptr;
    count_ = 0;
  }

 private:
  size_t count_ = 0;
  T* data_ = nullptr;
};

/// Bytes this process could still allocate, and where the number came from.
struct AvailableMemory {
  int64_t bytes = -1;  ///< -1: unknown (no /proc/meminfo)
  std::string source;  ///< "MemAvailable", "cgroup memory.max", ...
};

/// The smaller of /proc/meminfo's MemAvailable and the cgroup's limit less its usage (v2 or v1).
AvailableMemory available_memory();

/// Bytes free in the execution space's memory as its runtime reports them (cudaMemGetInfo, hipMemGetInfo);
/// -1 on host builds, whose kernels use host memory (available_memory), or where the runtime cannot say.
int64_t device_free_bytes();

}  // namespace tessera
