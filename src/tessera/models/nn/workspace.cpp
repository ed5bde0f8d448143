// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/workspace.hpp"

#include <string>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {

constexpr int64_t kAlignFloats = 16;  // 64 bytes

int64_t aligned(int64_t floats) {
  return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}

// `buffer`, reallocated to exactly `floats` when it is smaller. Exact, not with headroom: the buffers are
// shared by layers of different sizes, so a growth means a larger layer, not a larger batch; a mini-batch
// run grows it only when a step needs more than every step before (a few times over a run). The old buffer
// is released before the new one is allocated: its contents are dead.
float* grown(Vector<float>& buffer, int64_t floats, const char* name) {
  if (int64_t(buffer.extent(0)) < floats) {
    buffer = Vector<float>();
    buffer = Vector<float>(Kokkos::ViewAllocateWithoutInitializing(name), size_t(floats));
  }
  return buffer.data();
}

}  // namespace

LayerWorkspace::Pieces LayerWorkspace::scratch(std::initializer_list<int64_t> floats) {
  require(floats.size() <= kMaxPieces, "a workspace call for ", floats.size(), " pieces (at most ",
          kMaxPieces, ")");
  int64_t total = 0;
  for (int64_t n : floats) {
    require(n >= 0, "a workspace piece of ", n, " floats");
    total += aligned(n);
  }
  float* base = grown(scratch_, total, "workspace.scratch");
  Pieces pieces{};
  int64_t offset = 0;
  size_t k = 0;
  for (int64_t n : floats) {
    pieces[k++] = base + offset;
    offset += aligned(n);
  }
  return pieces;
}

void LayerWorkspace::reserve_input_gradient(int64_t floats) {
  retired_gradient_ = Vector<float>();
  grown(gradient_, floats, "workspace.input_gradient");
}

Matrix<float> LayerWorkspace::input_gradient(int64_t rows, int64_t cols) {
  require(rows >= 0 && cols >= 0, "an input gradient of ", rows, "x", cols);
  retired_gradient_ = Vector<float>();
  if (int64_t(gradient_.extent(0)) < rows * cols) {
    retired_gradient_ = gradient_;
    gradient_ = Vector<float>(Kokkos::ViewAllocateWithoutInitializing("workspace.input_gradient"),
                              size_t(rows * cols));
  }
  return Matrix<float>(gradient_.data(), size_t(rows), size_t(cols));
}

int64_t LayerWorkspace::allocated_floats() const {
  return int64_t(scratch_.extent(0) + gradient_.extent(0) + retired_gradient_.extent(0));
}

}  // namespace tessera
