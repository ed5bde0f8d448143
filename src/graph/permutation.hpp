// SPDX-License-Identifier: BSD-3-Clause
// Random permutations of [0, n) that need no table: p(i) and its inverse are evaluated in O(1) from the
// seed (a 4-round Feistel network over the smallest even bit width covering n, with cycle-walking back into
// [0, n)). Every rank computes the same p without communication or O(n) memory, which is what the double
// permutation of the 3D layout needs (docs/architecture.md §4). A chunked permutation moves runs of
// `chunk` consecutive ids as units, keeping each run's order: a graph numbered for locality (tessera prep
// reorder) keeps its neighbours together inside every rank's blocks.
#pragma once

#include <cstdint>

namespace tessera {

/// The 3D layout's permutations of the nodes (docs/architecture.md §4).
enum class PermuteMode {
  None,    ///< the file's order
  Single,  ///< one permutation for rows and columns
  Double   ///< two independent permutations (p1 rows of even layers, p2 of odd ones)
};
/// "none", "single" or "double".
const char* permute_mode_name(PermuteMode mode);

/// A permutation of [0, n) evaluated in O(1) without a table (a keyed Feistel network).
class RandomPermutation {
 public:
  /// The identity on [0, n).
  explicit RandomPermutation(int64_t n = 0) : n_(n) {}
  /// A permutation keyed by (seed, stream) of the runs [c * chunk, (c + 1) * chunk) of [0, n), each kept in
  /// order; the last n mod chunk ids stay where they are.
  RandomPermutation(int64_t n, uint64_t seed, uint64_t stream, int64_t chunk = 1);

  /// n.
  int64_t size() const { return n_; }
  /// The run length moved as one unit.
  int64_t chunk() const { return chunk_; }
  /// It is the identity.
  bool identity() const { return half_bits_ == 0; }
  /// p(i): the node at position i.
  int64_t operator()(int64_t i) const;
  /// p^-1(v): the position of node v.
  int64_t inverse(int64_t v) const;

 private:
  uint64_t round(int r, uint64_t half) const;
  uint64_t forward_once(uint64_t x) const;
  uint64_t backward_once(uint64_t x) const;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  int64_t units_ = 0;                      // whole runs: the Feistel network's domain
  int half_bits_ = 0;                      // 0: identity
  uint64_t round_keys_[4] = {0, 0, 0, 0};  // from (seed, stream)
};

}  // namespace tessera
