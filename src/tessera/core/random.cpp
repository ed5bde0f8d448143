// SPDX-License-Identifier: BSD-3-Clause
// Many Philox draws at once. One Philox block is ten dependent rounds of two 32x32-bit products: a
// scalar loop waits on each round, a vectorized one runs 4 to 8 blocks per instruction. The library is
// built for the baseline x86-64 ISA, so on x86-64 the loop is compiled for AVX-512, AVX2 and the baseline,
// and the loader picks the CPU's best (GCC's and Clang's target_clones).
#include "tessera/core/random.hpp"

namespace tessera {

namespace {

#if defined(__x86_64__) && !defined(__CUDACC__) && !defined(__HIPCC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define TESSERA_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef TESSERA_VECTOR_CLONES
#define TESSERA_VECTOR_CLONES
#endif

TESSERA_VECTOR_CLONES void philox_words(const uint64_t* a, const uint64_t* b, size_t count, uint32_t k0,
                                        uint32_t k1, uint64_t* words) {
  for (size_t i = 0; i < count; ++i) {
    const Philox4x32Block r =
        philox4x32_10(uint32_t(a[i]), uint32_t(a[i] >> 32), uint32_t(b[i]), uint32_t(b[i] >> 32), k0, k1);
    words[i] = uint64_t(r.v[2]) << 32 | r.v[3];
  }
}

}  // namespace

void CounterRng::below_words(const uint64_t* a, const uint64_t* b, size_t count, uint64_t* words) const {
  philox_words(a, b, count, k0_, k1_, words);
}

}  // namespace tessera
