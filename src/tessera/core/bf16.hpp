// SPDX-License-Identifier: BSD-3-Clause
// bfloat16 as a transport and storage format: the upper 16 bits of an IEEE float, rounded to nearest even.
// Used where docs/architecture.md §5 sends activations and their gradients in half the bytes and sums them in
// fp32 on arrival, and where the sampled mode keeps feature rows in half the memory (StorageDtype) and widens
// them to fp32 as a step gathers them.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tessera/core/enum_names.hpp"

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

/// A stored value as the float it stands for: itself, or the bf16 bits widened (device code too).
KOKKOS_INLINE_FUNCTION float widened(float v) {
  return v;
}
/// The float of bf16 bits (from_bf16).
KOKKOS_INLINE_FUNCTION float widened(uint16_t bits) {
  return from_bf16(bits);
}

/// How stored rows hold their values: fp32, or bf16 widened to fp32 where they are read (exactly: a bf16 row
/// read back is the fp32 row rounded once).
enum class StorageDtype {
  F32,  ///< 4 bytes a value
  Bf16  ///< 2 bytes a value, rounded to nearest even when stored
};
/// The names of StorageDtype's values (core/enum_names.hpp).
inline constexpr EnumName<StorageDtype> kStorageDtypeNames[] = {
    {StorageDtype::F32, "f32"}, {StorageDtype::F32, "fp32", true}, {StorageDtype::Bf16, "bf16"}};
/// f32 or bf16: the name of a value.
inline const char* storage_dtype_name(StorageDtype dtype) {
  return name_of(kStorageDtypeNames, dtype);
}
/// Bytes a stored value takes.
inline int64_t storage_bytes(StorageDtype dtype) {
  return dtype == StorageDtype::Bf16 ? 2 : 4;
}

/// out[i] = to_bf16(in[i]) for n values.
inline void round_to_bf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}
/// out[i] = from_bf16(in[i]) for n values.
inline void widen_bf16(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = from_bf16(in[i]);
}
/// Rounds n floats in place to the fp32 values their bf16 roundings stand for (what bf16 storage reads back).
inline void round_through_bf16(float* values, size_t n) {
  for (size_t i = 0; i < n; ++i) values[i] = from_bf16(to_bf16(values[i]));
}

}  // namespace tessera
