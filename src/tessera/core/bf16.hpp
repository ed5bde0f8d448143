// SPDX-License-Identifier: BSD-3-Clause
// bfloat16 as a transport format: the upper 16 bits of an IEEE float, rounded to nearest even. Used where
// docs/architecture.md §5 sends activations and their gradients in half the bytes and sums them in fp32 on arrival.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>

namespace tessera {

/// x rounded to bf16 (nearest, ties to even; NaN stays NaN), as its 16 bits.
KOKKOS_INLINE_FUNCTION uint16_t to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return uint16_t((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);      // round to nearest, ties to even
  return uint16_t(bits >> 16);
}

/// The float a bf16 bit pattern stands for (exact).
KOKKOS_INLINE_FUNCTION float from_bf16(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

}  // namespace tessera
