// SPDX-License-Identifier: BSD-3-Clause
// Kokkos View aliases with explicit memory spaces. "Device" is the default execution space's memory
// (CUDA memory on a CUDA build, host memory otherwise); nothing here uses unified memory.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace tessera {

/// Where kernels run: the build's default Kokkos execution space.
using ExecSpace = Kokkos::DefaultExecutionSpace;
/// Its memory (a GPU's on a device build).
using DeviceSpace = ExecSpace::memory_space;
/// Host memory.
using HostSpace = Kokkos::HostSpace;

/// A one-dimensional array in memory space Space.
template <class T, class Space = DeviceSpace>
using Vector = Kokkos::View<T*, Space>;

/// Row-major dense matrix (rows are nodes, columns are features).
template <class T, class Space = DeviceSpace>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Space>;

/// A Vector in host memory.
template <class T>
using HostVector = Vector<T, HostSpace>;
/// A Matrix in host memory.
template <class T>
using HostMatrix = Matrix<T, HostSpace>;

/// Rows (or entries) to allocate for a reusable buffer that holds `capacity` and must hold `needed`:
/// exactly `needed` the first time (a full graph's blocks never change size, and Kokkos writes every page
/// it allocates, so headroom is resident memory), a quarter more on a later growth (mini-batches vary).
inline int64_t grown_capacity(int64_t capacity, int64_t needed) {
  return capacity == 0 ? needed : needed + needed / 4;
}

/// Grows `v` to hold at least `n` entries (a quarter more, for sizes that vary from step to step), keeping
/// it where it already does: scratch a kernel reuses between steps. The old contents are not kept.
template <class T>
void reserve_vector(Vector<T>& v, int64_t n, const char* name) {
  if (int64_t(v.extent(0)) < n)
    v = Vector<T>(Kokkos::ViewAllocateWithoutInitializing(name), size_t(n + n / 4));
}

/// A row-major rows x cols array where kernels read it: a view of `v` itself on host builds (no second copy;
/// v must outlive the view and not be resized), a copy in the execution space's memory otherwise.
template <class T>
Matrix<const T> kernel_view(const std::vector<T>& v, size_t rows, size_t cols, const char* name) {
  const Kokkos::View<const T**, Kokkos::LayoutRight, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(
      v.data(), rows, cols);
  if constexpr (std::is_same<DeviceSpace, HostSpace>::value) {
    return host;
  } else {
    Matrix<T> copy(Kokkos::ViewAllocateWithoutInitializing(name), rows, cols);
    Kokkos::deep_copy(copy, host);
    return copy;
  }
}

/// kernel_view of a one-dimensional array.
template <class T>
Vector<const T> kernel_view(const std::vector<T>& v, const char* name) {
  const Kokkos::View<const T*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(v.data(), v.size());
  if constexpr (std::is_same<DeviceSpace, HostSpace>::value) {
    return host;
  } else {
    Vector<T> copy(Kokkos::ViewAllocateWithoutInitializing(name), v.size());
    Kokkos::deep_copy(copy, host);
    return copy;
  }
}

}  // namespace tessera
