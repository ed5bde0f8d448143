// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/scratch.hpp"

#include <map>
#include <mutex>
#include <string>

namespace tessera {

namespace {
std::mutex scratch_mutex;
std::map<std::string, Vector<char>>* buffers = nullptr;  // made on first use, freed before finalize
}  // namespace

void* scratch_bytes(const char* key, size_t bytes) {
  const std::lock_guard<std::mutex> lock(scratch_mutex);
  if (!buffers) {
    buffers = new std::map<std::string, Vector<char>>();
    Kokkos::push_finalize_hook([] {
      const std::lock_guard<std::mutex> hold(scratch_mutex);
      delete buffers;
      buffers = nullptr;
    });
  }
  Vector<char>& buffer = (*buffers)[key];
  if (buffer.extent(0) < bytes) {
    const int64_t grown = grown_capacity(int64_t(buffer.extent(0)), int64_t(bytes));
    buffer = Vector<char>();  // the old one goes first: both need not fit at once
    buffer = Vector<char>(Kokkos::ViewAllocateWithoutInitializing(key), size_t(grown));
  }
  return buffer.data();
}

}  // namespace tessera
