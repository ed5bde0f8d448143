// SPDX-License-Identifier: BSD-3-Clause
// Not installed: e^x and e^x - 1 in float, written out so that a loop of them vectorizes on the host
// (glibc's expf and expm1f are scalar calls the compiler cannot widen) and gives the same bits on every
// path that calls them. exp_approx is within 2 ulp of the correctly rounded result wherever that is a
// normal float, expm1_approx within 4 (test_kernels samples [-88, 88] and walks every float around the
// places where the formulas change, against double-precision exp and expm1).
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>

namespace tessera::impl {

KOKKOS_INLINE_FUNCTION int32_t float_bits(float x) {
  int32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

KOKKOS_INLINE_FUNCTION float bits_float(int32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

/// e^x: 0 where it is below the smallest normal float (x < -87.3365), +inf past the largest float
/// (x > 88.7228), NaN for NaN. x = k ln2 + r
/// with |r| <= ln2 / 2 (k by the 1.5 * 2^23 rounding trick: no rounding instruction needed), e^r by its
/// Taylor series to r^7 (error below 2^-24 on that interval), scaled by 2^k built in the exponent bits.
KOKKOS_INLINE_FUNCTION float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 in 16 bits: k * kLn2Hi is exact for |k| < 2^8
  constexpr float kLn2Lo = 1.42860682030941723e-06f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const float clamped = x < -87.3365478f ? -87.3365478f : (x > 88.7228317f ? 88.7228317f : x);
  const float shifted = clamped * kLog2e + kRound;
  const float k = shifted - kRound;
  const int32_t ki = float_bits(shifted) - float_bits(kRound);
  const float r = (clamped - k * kLn2Hi) - k * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^k as two factors: k reaches 128 at the top of the range, one past the largest exponent.
  const int32_t half = ki >> 1;
  // Shifted as unsigned: for a NaN x, k is garbage (the result is NaN through r) and must not overflow.
  const float scale_a = bits_float(int32_t(uint32_t(half + 127) << 23)),
              scale_b = bits_float(int32_t(uint32_t(ki - half + 127) << 23));
  const float y = p * scale_a * scale_b;
  return x < -87.3365478f ? 0.0f : (x > 88.7228317f ? INFINITY : y);
}

/// e^x - 1 without the cancellation of exp_approx(x) - 1 near 0: its Taylor series to x^9 on
/// |x| < 0.25 (error below 2^-24 relative), exp_approx(x) - 1 elsewhere (where the result is at least
/// 0.22 in magnitude, so the subtraction costs at most two bits).
KOKKOS_INLINE_FUNCTION float expm1_approx(float x) {
  float p = 1.0f / 362880.0f;
  p = p * x + 1.0f / 40320.0f;
  p = p * x + 1.0f / 5040.0f;
  p = p * x + 1.0f / 720.0f;
  p = p * x + 1.0f / 120.0f;
  p = p * x + 1.0f / 24.0f;
  p = p * x + 1.0f / 6.0f;
  p = p * x + 0.5f;
  const float small = x + x * x * p;
  const float large = exp_approx(x) - 1.0f;
  return (x > -0.25f && x < 0.25f) ? small : large;
}

}  // namespace tessera::impl
