// SPDX-License-Identifier: BSD-3-Clause
// A hash map from node ids (int64 >= 0) to int64 values, with open addressing and linear probing in two
// flat arrays. Why not std::unordered_map: sampling a block asks "have I seen u, and where?" once per
// sampled edge — millions of times a step — and the node-per-allocation chains of std::unordered_map made
// that lookup 6% of a sampled training step, more than the sampling itself. Ids only: -1 marks a free slot.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera {

/// Node id -> int64 value, insert and find only (what sampling needs); not thread-safe.
class FlatIdMap {
 public:
  /// Room for `expected` keys without growing.
  explicit FlatIdMap(size_t expected = 0) { rehash(capacity_for(expected)); }

  /// The value stored for `id`, after storing `value` if `id` was absent; second: whether it was absent.
  std::pair<int64_t, bool> try_emplace(int64_t id, int64_t value) {
    require(id >= 0, "FlatIdMap: node ids are non-negative, got ", id);
    if ((size_ + 1) * 2 > keys_.size()) rehash(keys_.size() * 2);
    size_t slot = home(id);
    while (keys_[slot] != kFree) {
      if (keys_[slot] == id) return {values_[slot], false};
      slot = (slot + 1) & mask_;
    }
    keys_[slot] = id;
    values_[slot] = value;
    ++size_;
    return {value, true};
  }

  /// The value stored for `id`, or -1.
  int64_t find(int64_t id) const {
    if (id < 0) return -1;
    for (size_t slot = home(id); keys_[slot] != kFree; slot = (slot + 1) & mask_)
      if (keys_[slot] == id) return values_[slot];
    return -1;
  }

  /// Asks for the line find(id) starts at (a hint: looking up many ids, each a likely cache miss).
  void prefetch(int64_t id) const {
    if (id < 0) return;
    __builtin_prefetch(keys_.data() + home(id));
    __builtin_prefetch(values_.data() + home(id));
  }

  /// Ids stored.
  size_t size() const { return size_; }

  /// Forgets every id and keeps the table (a map reused for each layer of a sample allocates once).
  void clear() {
    if (size_ == 0) return;
    std::fill(keys_.begin(), keys_.end(), kFree);
    size_ = 0;
  }

 private:
  static constexpr int64_t kFree = -1;

  // At most half full: short probe sequences.
  static size_t capacity_for(size_t expected) {
    size_t c = 16;
    while (c < expected * 2) c *= 2;
    return c;
  }
  // Fibonacci hashing: consecutive ids (a partition's contiguous range) spread over the table.
  size_t home(int64_t id) const { return size_t((uint64_t(id) * 0x9E3779B97F4A7C15ull) >> shift_); }

  void rehash(size_t capacity) {
    std::vector<int64_t> old_keys(capacity, kFree), old_values(capacity);
    old_keys.swap(keys_);
    old_values.swap(values_);
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != kFree) try_emplace(old_keys[i], old_values[i]);
  }

  std::vector<int64_t> keys_, values_;
  size_t mask_ = 0, size_ = 0;
  int shift_ = 64;
};

}  // namespace tessera
