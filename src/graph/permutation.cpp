// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/permutation.hpp"

#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"

namespace tessera {

const char* permute_mode_name(PermuteMode mode) {
  return mode == PermuteMode::None ? "none" : mode == PermuteMode::Single ? "single" : "double";
}

RandomPermutation::RandomPermutation(int64_t n, uint64_t seed, uint64_t stream, int64_t chunk)
    : n_(n), chunk_(chunk), units_(chunk > 0 ? n / chunk : 0) {
  require(n >= 0 && n < (int64_t(1) << 62), "permutation size ", n, " out of range");
  require(chunk >= 1, "permutation chunk ", chunk, " must be at least 1");
  half_bits_ = 1;
  while ((int64_t(1) << (2 * half_bits_)) < units_) ++half_bits_;
  const uint64_t key = splitmix64(seed ^ splitmix64(stream ^ 0x5045524du));
  for (int r = 0; r < 4; ++r) {
    const Philox4x32Block b = CounterRng(key, uint64_t(r)).bits(0, 0);
    round_keys_[r] = uint64_t(b.v[0]) << 32 | b.v[1];
  }
}

// A round: SplitMix64's finalizer of the half offset by the round's key. A Philox-4x32-10 block per round
// cost 165 ns per evaluation and made the inverse (one per nonzero) most of a 3D load's time; the
// finalizer's avalanche is enough for a permutation whose job is load balance (test_parallel3d checks the
// blocks it balances), not cryptography. Inline: every caller is in this file, and a call per round is
// a stall in the sampler's inner loops.
inline uint64_t RandomPermutation::round(int r, uint64_t half) const {
  uint64_t z = (half ^ round_keys_[r]) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) & ((uint64_t(1) << half_bits_) - 1);
}

inline uint64_t RandomPermutation::forward_once(uint64_t x) const {
  const uint64_t mask = (uint64_t(1) << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (int r = 0; r < 4; ++r) {
    const uint64_t next = left ^ round(r, right);
    left = right;
    right = next;
  }
  return left << half_bits_ | right;
}

inline uint64_t RandomPermutation::backward_once(uint64_t x) const {
  const uint64_t mask = (uint64_t(1) << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (int r = 3; r >= 0; --r) {
    const uint64_t previous = right ^ round(r, left);
    right = left;
    left = previous;
  }
  return left << half_bits_ | right;
}

// Chunk 1 skips the division: these run once per nonzero in the 3D load and the sampler's loops.
int64_t RandomPermutation::operator()(int64_t i) const {
  if (identity()) return i;
  const int64_t unit = chunk_ == 1 ? i : i / chunk_;
  if (unit >= units_) return i;  // the tail after the last whole run
  uint64_t y = forward_once(uint64_t(unit));
  while (y >= uint64_t(units_)) y = forward_once(y);  // cycle-walk: fewer than 4 steps on average
  return chunk_ == 1 ? int64_t(y) : int64_t(y) * chunk_ + i % chunk_;
}

int64_t RandomPermutation::inverse(int64_t v) const {
  if (identity()) return v;
  const int64_t unit = chunk_ == 1 ? v : v / chunk_;
  if (unit >= units_) return v;
  uint64_t y = backward_once(uint64_t(unit));
  while (y >= uint64_t(units_)) y = backward_once(y);
  return chunk_ == 1 ? int64_t(y) : int64_t(y) * chunk_ + v % chunk_;
}

}  // namespace tessera
