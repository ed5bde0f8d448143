// SPDX-License-Identifier: BSD-3-Clause
// A set of distinct integers in [0, n) as one bit each plus a running count per 64-bit word: membership
// and rank (the member's index in increasing order) in O(1) without a branch. The sampler uses it where a
// sort would otherwise order distinct keys (a sample's vertices, their positions in an ordering) and to
// renumber a block's kept columns. Internal to the sampling area.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {
namespace sampling_impl {

// Where the build targets baseline x86-64 (no POPCNT), the sampler's hottest loop is compiled twice and the
// CPU picks at run time: POPCNT cuts the induced-block cut by a fifth. Not under nvcc or hipcc (never tried
// through their front ends: those builds count bits in software, as before).
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__POPCNT__) && !defined(__CUDACC__) && \
    !defined(__HIPCC__)
#define TESSERA_SAMPLING_POPCNT_DISPATCH 1
#define TESSERA_SAMPLING_TARGET_POPCNT __attribute__((target("popcnt")))
#endif

// Bits set in x. kHardware: the caller is compiled for POPCNT (TESSERA_SAMPLING_TARGET_POPCNT, or a build
// that targets it); otherwise the count avoids an instruction the CPU may lack.
template <bool kHardware = false>
__attribute__((always_inline)) inline int64_t bit_count(uint64_t x) {
#if defined(__POPCNT__)
  return __builtin_popcountll(x);
#else
  if constexpr (kHardware) {
    return __builtin_popcountll(x);
  } else {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return int64_t((x * 0x0101010101010101ull) >> 56);
  }
#endif
}

/// Whether this CPU runs the POPCNT forms (always false where the build does not compile them).
inline bool cpu_has_popcnt() {
#if defined(TESSERA_SAMPLING_POPCNT_DISPATCH)
  static const bool has = __builtin_cpu_supports("popcnt");
  return has;
#else
  return false;
#endif
}

// Why bits and counts, not an index per key: every probe lands at a random key; at 1 bit per key the
// table stays in L1/L2, and a probe has no branch (membership is a coin flip no predictor learns).
class RankBitmap {
 public:
  /// The set of members (distinct, in [0, n), any order).
  RankBitmap(int64_t n, const std::vector<int64_t>& members)
      : bits_(size_t((n + 63) / 64), 0), before_(bits_.size() + 1, 0) {
    for (int64_t m : members) bits_[size_t(m >> 6)] |= uint64_t(1) << (m & 63);
    for (size_t w = 0; w < bits_.size(); ++w) before_[w + 1] = before_[w] + bit_count(bits_[w]);
  }

  /// Whether x is a member (0 or 1).
  int64_t contains(int64_t x) const { return int64_t((bits_[size_t(x >> 6)] >> (x & 63)) & 1u); }
  /// How many members are below x (a member's index among them, in increasing order); kHardware as for
  /// bit_count.
  template <bool kHardware = false>
  __attribute__((always_inline)) int64_t rank(int64_t x) const {
    const uint64_t below = (uint64_t(1) << (x & 63)) - 1;
    return before_[size_t(x >> 6)] + bit_count<kHardware>(bits_[size_t(x >> 6)] & below);
  }
  /// The members in increasing order.
  std::vector<int64_t> members() const {
    std::vector<int64_t> out(size_t(before_.back()));
    size_t k = 0;
    for (size_t w = 0; w < bits_.size(); ++w)
      for (uint64_t word = bits_[w]; word != 0; word &= word - 1)
        out[k++] = int64_t(w * 64) + __builtin_ctzll(word);
    return out;
  }

 private:
  std::vector<uint64_t> bits_;
  std::vector<int64_t> before_;
};

// Whether ordering `count` distinct keys of [0, n) through a RankBitmap (O(n / 64 + count) time, n / 4
// bytes) is cheaper than a sort (O(count log count)): a small batch of a huge graph still sorts, so no
// step touches O(n) memory for a handful of keys.
inline bool rank_bitmap_pays(int64_t n, int64_t count) {
  return n / 64 <= 4 * count;
}

}  // namespace sampling_impl
}  // namespace tessera
