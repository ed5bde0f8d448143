// SPDX-License-Identifier: BSD-3-Clause
// Device buffers that live for the process: a kernel launcher that needs temporary memory on every call
// takes it here instead of allocating a View each time, because on a GPU an allocation is a cudaMalloc and
// its release a cudaFree, which waits for the whole device: a step of small reductions would stall at each.
#pragma once

#include <cstddef>

#include "tessera/core/views.hpp"

namespace tessera {

/// Device memory of at least `bytes` under `key` (one buffer per key, grown as needed, released at
/// Kokkos::finalize). The memory is the caller's until its next call with the same key: a launcher uses it
/// for one call's temporaries and must not hold it across calls, nor two threads share a key.
void* scratch_bytes(const char* key, size_t bytes);

/// A rows x cols matrix on scratch_bytes(key) (contents undefined).
template <class Scalar>
Kokkos::View<Scalar**, Kokkos::LayoutRight, DeviceSpace, Kokkos::MemoryUnmanaged> scratch_matrix(
    const char* key, size_t rows, size_t cols) {
  using Out = Kokkos::View<Scalar**, Kokkos::LayoutRight, DeviceSpace, Kokkos::MemoryUnmanaged>;
  return Out(static_cast<Scalar*>(scratch_bytes(key, rows * cols * sizeof(Scalar))), rows, cols);
}

/// A vector of n on scratch_bytes(key) (contents undefined).
template <class Scalar>
Kokkos::View<Scalar*, DeviceSpace, Kokkos::MemoryUnmanaged> scratch_vector(const char* key, size_t n) {
  using Out = Kokkos::View<Scalar*, DeviceSpace, Kokkos::MemoryUnmanaged>;
  return Out(static_cast<Scalar*>(scratch_bytes(key, n * sizeof(Scalar))), n);
}

}  // namespace tessera
