// SPDX-License-Identifier: BSD-3-Clause
// Random permutations of [0, n) that need no table: p(i) and its inverse are evaluated in O(1) from the
// seed (a 4-round Feistel network over the smallest even bit width covering n, with cycle-walking back into
// [0, n)). Every rank computes the same p without communication or O(n) memory, which is what the double
// permutation of the 3D layout needs (docs/architecture.md §4). A chunked permutation moves runs of
// `chunk` consecutive ids as units, keeping each run's order: a graph numbered for locality (tessera prep
// reorder) keeps its neighbours together inside every rank's blocks.
#pragma once

#include <cstdint>

#include "tessera/core/enum_names.hpp"

#include "tessera/core/random.hpp"  // KOKKOS_INLINE_FUNCTION: p and p^-1 run on devices too

namespace tessera {

/// The 3D layout's permutations of the nodes (docs/architecture.md §4).
enum class PermuteMode {
  None,    ///< the file's order
  Single,  ///< one permutation for rows and columns
  Double   ///< two independent permutations (p1 rows of even layers, p2 of odd ones)
};
/// The names of PermuteMode's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<PermuteMode> kPermuteModeNames[] = {
    {PermuteMode::None, "none"},
    {PermuteMode::Single, "single"},
    {PermuteMode::Double, "double"}};
/// none or single or double: the name of a value.
inline const char* permute_mode_name(PermuteMode mode) { return name_of(kPermuteModeNames, mode); }

/// A permutation of [0, n) evaluated in O(1) without a table (a keyed Feistel network).
class RandomPermutation {
 public:
  /// The identity on [0, n).
  explicit RandomPermutation(int64_t n = 0) : n_(n) {}
  /// A permutation keyed by (seed, stream) of the runs [c * chunk, (c + 1) * chunk) of [0, n), each kept in
  /// order; the last n mod chunk ids stay where they are.
  RandomPermutation(int64_t n, uint64_t seed, uint64_t stream, int64_t chunk = 1);

  /// n.
  KOKKOS_INLINE_FUNCTION int64_t size() const { return n_; }
  /// The run length moved as one unit.
  KOKKOS_INLINE_FUNCTION int64_t chunk() const { return chunk_; }
  /// It is the identity.
  KOKKOS_INLINE_FUNCTION bool identity() const { return half_bits_ == 0; }
  /// p(i): the node at position i. Callable in device kernels (the object is copied into them).
  KOKKOS_INLINE_FUNCTION int64_t operator()(int64_t i) const;
  /// p^-1(v): the position of node v.
  KOKKOS_INLINE_FUNCTION int64_t inverse(int64_t v) const;

 private:
  KOKKOS_INLINE_FUNCTION uint64_t round(int r, uint64_t half) const;
  KOKKOS_INLINE_FUNCTION uint64_t forward_once(uint64_t x) const;
  KOKKOS_INLINE_FUNCTION uint64_t backward_once(uint64_t x) const;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  int64_t units_ = 0;                      // whole runs: the Feistel network's domain
  int half_bits_ = 0;                      // 0: identity
  uint64_t round_keys_[4] = {0, 0, 0, 0};  // from (seed, stream)
};

// A round: SplitMix64's finalizer of the half offset by the round's key. A Philox-4x32-10 block per round
// cost 165 ns per evaluation and made the inverse (one per nonzero) most of a 3D load's time; the
// finalizer's avalanche is enough for a permutation whose job is load balance (test_parallel3d checks the
// blocks it balances), not cryptography. Inline (in this header): a call per round is a stall in
// the sampler's inner loops, and the device sampler evaluates p in its kernels.
KOKKOS_INLINE_FUNCTION uint64_t RandomPermutation::round(int r, uint64_t half) const {
  uint64_t z = (half ^ round_keys_[r]) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) & ((uint64_t(1) << half_bits_) - 1);
}

KOKKOS_INLINE_FUNCTION uint64_t RandomPermutation::forward_once(uint64_t x) const {
  const uint64_t mask = (uint64_t(1) << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (int r = 0; r < 4; ++r) {
    const uint64_t next = left ^ round(r, right);
    left = right;
    right = next;
  }
  return left << half_bits_ | right;
}

KOKKOS_INLINE_FUNCTION uint64_t RandomPermutation::backward_once(uint64_t x) const {
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
KOKKOS_INLINE_FUNCTION int64_t RandomPermutation::operator()(int64_t i) const {
  if (identity()) return i;
  const int64_t unit = chunk_ == 1 ? i : i / chunk_;
  if (unit >= units_) return i;  // the tail after the last whole run
  uint64_t y = forward_once(uint64_t(unit));
  while (y >= uint64_t(units_)) y = forward_once(y);  // cycle-walk: fewer than 4 steps on average
  return chunk_ == 1 ? int64_t(y) : int64_t(y) * chunk_ + i % chunk_;
}

KOKKOS_INLINE_FUNCTION int64_t RandomPermutation::inverse(int64_t v) const {
  if (identity()) return v;
  const int64_t unit = chunk_ == 1 ? v : v / chunk_;
  if (unit >= units_) return v;
  uint64_t y = backward_once(uint64_t(unit));
  while (y >= uint64_t(units_)) y = backward_once(y);
  return chunk_ == 1 ? int64_t(y) : int64_t(y) * chunk_ + v % chunk_;
}

}  // namespace tessera
