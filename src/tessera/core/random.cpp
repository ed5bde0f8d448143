// SPDX-License-Identifier: BSD-3-Clause
// Many Philox draws at once. One Philox block is ten dependent rounds of two 32x32-bit products: a scalar
// loop waits on each round, a vector one runs 16 blocks per instruction. The library is built for the
// baseline x86-64 ISA, so the AVX-512 path is written out (sixteen 32-bit lanes: a product's high half from
// two even-lane multiplies, its low half from one 32-bit multiply) and chosen at run time where the CPU has
// AVX-512F; elsewhere the plain loop is compiled for AVX2 and the baseline and the loader picks (GCC's and
// Clang's target_clones). Every path computes philox4x32_10 exactly (tested against it).
#include "tessera/core/random.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(__HIPCC__)
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_* (GCC bug 105593);
// the warning is raised after inlining, at the headers' lines, so it is off for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define TESSERA_PHILOX_AVX512 1
#if defined(__has_attribute)
#if __has_attribute(target_clones)
#define TESSERA_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#endif
#ifndef TESSERA_VECTOR_CLONES
#define TESSERA_VECTOR_CLONES
#endif

namespace tessera {

namespace {

TESSERA_VECTOR_CLONES void philox_words(const uint64_t* a, const uint64_t* b, size_t count, uint32_t k0,
                                        uint32_t k1, uint64_t* words) {
  for (size_t i = 0; i < count; ++i) {
    const Philox4x32Block r =
        philox4x32_10(uint32_t(a[i]), uint32_t(a[i] >> 32), uint32_t(b[i]), uint32_t(b[i] >> 32), k0, k1);
    words[i] = uint64_t(r.v[2]) << 32 | r.v[3];
  }
}

TESSERA_VECTOR_CLONES void philox_run(uint64_t a, uint64_t b, int count, uint32_t k0, uint32_t k1,
                                      uint32_t* words) {
  for (int k = 0; k < count; ++k) {
    const uint64_t c = b + uint64_t(k);
    const Philox4x32Block r =
        philox4x32_10(uint32_t(a), uint32_t(a >> 32), uint32_t(c), uint32_t(c >> 32), k0, k1);
    for (int q = 0; q < 4; ++q) words[q * count + k] = r.v[q];
  }
}

#ifdef TESSERA_PHILOX_AVX512
#define TESSERA_AVX512 __attribute__((target("avx512f")))

// The high 32 bits of each lane's product with m (every lane of m the same multiplier).
TESSERA_AVX512 inline __m512i mulhi32(__m512i a, __m512i m) {
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(a, m), 32);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  return _mm512_mask_blend_epi32(__mmask16(0xAAAA), even, odd);
}

// Philox-4x32-10 of 16 counters (c0..c3 lane by lane) under key (k0, k1), in place.
TESSERA_AVX512 inline void philox16(__m512i& c0, __m512i& c1, __m512i& c2, __m512i& c3, uint32_t k0,
                                    uint32_t k1) {
  const __m512i m0 = _mm512_set1_epi32(int(0xD2511F53u)), m1 = _mm512_set1_epi32(int(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    const __m512i hi0 = mulhi32(c0, m0), lo0 = _mm512_mullo_epi32(c0, m0);
    const __m512i hi1 = mulhi32(c2, m1), lo1 = _mm512_mullo_epi32(c2, m1);
    c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32(int(k0)), 0x96);  // hi1 ^ c1 ^ k0
    c1 = lo1;
    c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32(int(k1)), 0x96);
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

// The low and high 32-bit halves of 16 64-bit values.
TESSERA_AVX512 inline void split16(const uint64_t* x, __m512i& lo, __m512i& hi) {
  const __m512i a = _mm512_loadu_si512(x), b = _mm512_loadu_si512(x + 8);
  lo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(a)), _mm512_cvtepi64_epi32(b), 1);
  hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(a, 32))),
                          _mm512_cvtepi64_epi32(_mm512_srli_epi64(b, 32)), 1);
}

TESSERA_AVX512 void philox_words_avx512(const uint64_t* a, const uint64_t* b, size_t count, uint32_t k0,
                                        uint32_t k1, uint64_t* words) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m512i c0, c1, c2, c3;
    split16(a + i, c0, c1);
    split16(b + i, c2, c3);
    philox16(c0, c1, c2, c3, k0, k1);
    for (int half = 0; half < 2; ++half) {  // words = v2 << 32 | v3, eight at a time
      const __m512i high = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(c2, half));
      const __m512i low = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(c3, half));
      _mm512_storeu_si512(words + i + 8 * half, _mm512_or_si512(_mm512_slli_epi64(high, 32), low));
    }
  }
  philox_words(a + i, b + i, count - i, k0, k1, words + i);
}

TESSERA_AVX512 void philox_run_avx512(uint64_t a, uint64_t b, int count, uint32_t k0, uint32_t k1,
                                      uint32_t* words) {
  const __m512i lanes = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  int k = 0;
  for (; k + 16 <= count; k += 16) {
    alignas(64) uint64_t c[16];
    const __m512i base = _mm512_set1_epi64((long long)(b + uint64_t(k)));
    _mm512_store_si512(c, _mm512_add_epi64(base, lanes));
    _mm512_store_si512(c + 8, _mm512_add_epi64(base, _mm512_add_epi64(lanes, _mm512_set1_epi64(8))));
    __m512i c0 = _mm512_set1_epi32(int(uint32_t(a))), c1 = _mm512_set1_epi32(int(uint32_t(a >> 32))), c2, c3;
    split16(c, c2, c3);
    philox16(c0, c1, c2, c3, k0, k1);
    _mm512_storeu_si512(words + k, c0);
    _mm512_storeu_si512(words + count + k, c1);
    _mm512_storeu_si512(words + 2 * count + k, c2);
    _mm512_storeu_si512(words + 3 * count + k, c3);
  }
  for (; k < count; ++k) {
    const uint64_t c = b + uint64_t(k);
    const Philox4x32Block r =
        philox4x32_10(uint32_t(a), uint32_t(a >> 32), uint32_t(c), uint32_t(c >> 32), k0, k1);
    for (int q = 0; q < 4; ++q) words[q * count + k] = r.v[q];
  }
}

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#endif

}  // namespace

void CounterRng::bits_run(uint64_t a, uint64_t b, int count, uint32_t* words) const {
#ifdef TESSERA_PHILOX_AVX512
  if (cpu_has_avx512()) return philox_run_avx512(a, b, count, k0_, k1_, words);
#endif
  philox_run(a, b, count, k0_, k1_, words);
}

void CounterRng::below_words(const uint64_t* a, const uint64_t* b, size_t count, uint64_t* words) const {
#ifdef TESSERA_PHILOX_AVX512
  if (cpu_has_avx512()) return philox_words_avx512(a, b, count, k0_, k1_, words);
#endif
  philox_words(a, b, count, k0_, k1_, words);
}

}  // namespace tessera
