// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the columns of an attention row (H heads of `width` features, head by head) walked one
// head's run at a time, so that a kernel's inner loop runs over contiguous features of one head with the
// head's scalars (its attention weight, its score term) read once, instead of a division per column.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>

namespace tessera::impl {

/// f(h, begin, end) for each head h whose columns meet [c0, c1), with [begin, end) their common part.
template <class F>
KOKKOS_INLINE_FUNCTION void for_head_segments(int64_t c0, int64_t c1, int64_t width, const F& f) {
  for (int64_t c = c0; c < c1;) {
    const int64_t h = c / width, end = (h + 1) * width < c1 ? (h + 1) * width : c1;
    f(h, c, end);
    c = end;
  }
}

}  // namespace tessera::impl
