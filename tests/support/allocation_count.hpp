// SPDX-License-Identifier: BSD-3-Clause
// Counts Kokkos allocations (any memory space) while an object lives: tests of buffers kept between steps
// check that a step no larger than one before allocates nothing.
#pragma once

#include <Kokkos_Core.hpp>

namespace tessera::fixtures {

// Kokkos allocations of any memory space while alive (the Kokkos Tools hook, chained to one set before).
class AllocationCount {
 public:
  AllocationCount() {
    count_ = 0;
    chained_ = Kokkos::Tools::Experimental::get_callbacks().allocate_data;
    Kokkos::Tools::Experimental::set_allocate_data_callback(&on_allocate);
  }
  ~AllocationCount() { Kokkos::Tools::Experimental::set_allocate_data_callback(chained_); }
  AllocationCount(const AllocationCount&) = delete;
  AllocationCount& operator=(const AllocationCount&) = delete;
  int count() const { return count_; }

 private:
  static void on_allocate(const Kokkos_Profiling_SpaceHandle space, const char* label, const void* ptr,
                          const uint64_t size) {
    ++count_;
    if (chained_ != nullptr) chained_(space, label, ptr, size);
  }
  static inline int count_ = 0;
  static inline Kokkos_Profiling_allocateDataFunction chained_ = nullptr;
};

}  // namespace tessera::fixtures
