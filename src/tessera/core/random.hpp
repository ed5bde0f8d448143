// SPDX-License-Identifier: BSD-3-Clause
// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11). A number is a pure function of
// (seed, stream, counter), so any rank, thread count or backend that asks for the same key gets the same
// value: dropout masks, initial weights and synthetic graphs do not depend on how work is split.
// Streams name what the numbers are for (weights of layer 3, R-MAT edges, ...); counters are global
// coordinates such as (row, col).
#pragma once

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>

namespace tessera {

/// The output of one Philox block: four 32-bit random words.
struct Philox4x32Block {
  uint32_t v[4];  ///< the words
};

/// One Philox-4x32 block with 10 rounds: counter (c0..c3), key (k0, k1).
KOKKOS_INLINE_FUNCTION Philox4x32Block philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                     uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0;
    const uint64_t p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4x32Block{{c0, c1, c2, c3}};
}

/// SplitMix64 finalizer: mixes a 64-bit value into a well-distributed one.
KOKKOS_INLINE_FUNCTION uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// High 64 bits of a 64x64-bit product, without 128-bit integers (not portable to device code).
KOKKOS_INLINE_FUNCTION uint64_t mul_high64(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32, b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo, hi_lo = a_hi * b_lo, lo_hi = a_lo * b_hi, hi_hi = a_hi * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFu) + lo_hi;
  return hi_hi + (hi_lo >> 32) + (cross >> 32);
}

/// Random numbers addressed by a 128-bit counter (a, b) under a key derived from (seed, stream).
/// Copyable by value into device kernels.
class CounterRng {
 public:
  /// The generator of stream `stream` under `seed`.
  KOKKOS_INLINE_FUNCTION CounterRng(uint64_t seed, uint64_t stream) {
    const uint64_t key = splitmix64(seed ^ splitmix64(stream));
    k0_ = uint32_t(key);
    k1_ = uint32_t(key >> 32);
  }

  /// Four independent 32-bit words for counter (a, b).
  KOKKOS_INLINE_FUNCTION Philox4x32Block bits(uint64_t a, uint64_t b) const {
    return philox4x32_10(uint32_t(a), uint32_t(a >> 32), uint32_t(b), uint32_t(b >> 32), k0_, k1_);
  }

  /// Uniform float in [0, 1) with 24 random bits, from word `lane` (0..3) of counter (a, b).
  KOKKOS_INLINE_FUNCTION float uniform(uint64_t a, uint64_t b, int lane = 0) const {
    return float(bits(a, b).v[lane & 3] >> 8) * (1.0f / 16777216.0f);
  }

  /// Uniform double in [0, 1) with 53 random bits (words 0 and 1).
  KOKKOS_INLINE_FUNCTION double uniform_double(uint64_t a, uint64_t b) const {
    const Philox4x32Block r = bits(a, b);
    const uint64_t x = (uint64_t(r.v[0]) << 32 | r.v[1]) >> 11;
    return double(x) * (1.0 / 9007199254740992.0);
  }

  /// Uniform integer in [0, n), n > 0 (Lemire's multiply-high; bias below n / 2^64).
  KOKKOS_INLINE_FUNCTION uint64_t below(uint64_t a, uint64_t b, uint64_t n) const {
    const Philox4x32Block r = bits(a, b);
    return mul_high64(uint64_t(r.v[2]) << 32 | r.v[3], n);
  }

  /// The 64 random bits below(a[i], b[i], n) scales, for i < count, in one pass the compiler vectorizes
  /// (AVX-512 or AVX2 where the CPU has them): below(a, b, n) == mul_high64(words[i], n). Host only.
  void below_words(const uint64_t* a, const uint64_t* b, size_t count, uint64_t* words) const;

  /// bits(a, b + k) for k < count, word q of block k into words[q * count + k], in one vectorized pass
  /// (host only): a run of counters along one row, as dropout masks use them.
  void bits_run(uint64_t a, uint64_t b, int count, uint32_t* words) const;

  /// Standard normal (Box-Muller on words 0 and 1).
  KOKKOS_INLINE_FUNCTION float normal(uint64_t a, uint64_t b) const {
    const Philox4x32Block r = bits(a, b);
    const double u1 = (double(r.v[0]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
    const double u2 = double(r.v[1]) * (1.0 / 4294967296.0);
    return float(::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586 * u2));
  }

 private:
  uint32_t k0_, k1_;
};

}  // namespace tessera
