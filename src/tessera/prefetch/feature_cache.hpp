// SPDX-License-Identifier: BSD-3-Clause
// The remote-feature cache of partition-parallel sampled training (docs/architecture.md §6, MassiveGNN): a
// fixed number of slots holding feature rows of halo nodes (non-owned 1-hop neighbours of owned nodes),
// filled at start with the highest-degree halo nodes, scored so that rows nobody asks for fade, and refreshed
// every few steps with the halo nodes that missed most. The cache decides which rows to hold and to request;
// moving the rows is the caller's (one all-to-all per step carries misses and refills together).
//
// Per step: lookup() the rows the step needs (hits are served from the slots, misses are counted); on an
// eviction step plan_eviction(); request() lists what to fetch in the step's one message — its misses and
// the planned replacements, each node once —; install() the fetched replacement rows; end_step() decays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/core/bf16.hpp"
#include "tessera/core/flat_id_map.hpp"
#include "tessera/prefetch/controller.hpp"

namespace tessera {

/// Feature rows of halo nodes kept between steps, with MassiveGNN's scores, miss counts and eviction rule.
class FeatureCache {
 public:
  /// halo: the halo node ids (distinct); degree[k]: the degree of halo[k] (initial fill order). Rows are
  /// held in `dtype` (bf16: the owners' bf16 rows, as they store them).
  FeatureCache(std::vector<int64_t> halo, const std::vector<int64_t>& degree, int64_t feature_dim,
               const PrefetchOptions& options, StorageDtype dtype = StorageDtype::F32);
  /// The slots `options` give for `halo_nodes` halo nodes of `feature_dim` values held in `dtype`.
  static int64_t capacity_for(const PrefetchOptions& options, int64_t halo_nodes, int64_t feature_dim,
                              StorageDtype dtype);

  /// Slots.
  int64_t capacity() const { return int64_t(slot_node_.size()); }
  /// Values per row.
  int64_t feature_dim() const { return dim_; }
  /// How the rows are held.
  StorageDtype dtype() const { return dtype_; }
  /// Bytes of the rows held.
  int64_t held_bytes() const { return capacity() * dim_ * storage_bytes(dtype_); }
  /// The nodes of the initial fill (highest degree first, ties by lower id), one per slot, in slot order:
  /// fetch them and install_initial() their rows.
  const std::vector<int64_t>& slot_nodes() const { return slot_node_; }
  /// Installs initial fill rows for slots [first_slot, first_slot + rows.size() / feature_dim) (in slot
  /// order; a fill may come in pieces).
  void install_initial(const std::vector<float>& rows, int64_t first_slot = 0);
  /// The same for a bf16 cache.
  void install_initial(const std::vector<uint16_t>& rows, int64_t first_slot = 0);

  /// For each needed node: its slot, or -1 (a miss, counted if it is a halo node). Hit slots' scores are
  /// restored to 1 at end_step().
  std::vector<int64_t> lookup(const std::vector<int64_t>& nodes);
  /// The row held in a slot (an fp32 cache).
  const float* row(int64_t slot) const { return &rows_[size_t(slot * dim_)]; }
  /// The row held in a slot (a bf16 cache).
  const uint16_t* row_bf16(int64_t slot) const { return &rows_bf16_[size_t(slot * dim_)]; }

  /// The eviction plan of this step: slots whose score fell below (1 - alpha)^Delta and that this step's
  /// lookup did not hit, paired with the most-missed uncached halo nodes (ties by lower id), at most one per
  /// slot.
  struct Replacement {
    std::vector<int64_t> slots;  ///< slots to refill
    std::vector<int64_t> nodes;  ///< the node each gets
  };
  /// This step's plan (see Replacement).
  Replacement plan_eviction() const;
  /// The step's one request: the missed nodes, then the replacement nodes not among them, each once.
  static std::vector<int64_t> request(const std::vector<int64_t>& missed, const Replacement& plan);
  /// Puts the fetched rows of a planned replacement into its slots (score 1, miss counts reset).
  void install(const Replacement& plan, const std::vector<float>& rows);
  /// The same for a bf16 cache.
  void install(const Replacement& plan, const std::vector<uint16_t>& rows);
  /// Ends a step: every slot's score times (1 - alpha), hit slots back to 1.
  void end_step();

  /// A slot's score, (1 - alpha)^(steps since its last hit).
  double score(int64_t slot) const;
  /// Steps since a slot's last hit or install; eviction needs more than Delta of them.
  int64_t idle_steps(int64_t slot) const { return idle_[size_t(slot)]; }
  /// A halo node's misses since it was last installed.
  int64_t misses(int64_t node) const;
  /// A node's slot, -1 when not cached.
  int64_t slot_of(int64_t node) const;
  /// (1 - alpha)^Delta: slots scoring below it may be evicted.
  double threshold() const { return threshold_; }

 private:
  PrefetchOptions options_;
  int64_t dim_;
  double threshold_;
  std::vector<int64_t> halo_;       // sorted
  FlatIdMap halo_at_;               // node -> its index in halo_
  std::vector<int64_t> miss_;       // per halo index
  std::vector<int64_t> slot_at_;    // per halo index: its slot, -1 when not cached
  std::vector<int64_t> slot_node_;  // node in each slot
  std::vector<int64_t> idle_;       // per slot: steps since the last hit
  std::vector<uint8_t> hit_;        // per slot, this step
  StorageDtype dtype_;
  std::vector<float> rows_;                // capacity x dim, an fp32 cache
  std::vector<uint16_t> rows_bf16_;        // capacity x dim, a bf16 cache
  int64_t halo_index(int64_t node) const;  // -1 when not a halo node
  template <class Value>
  void install_initial_rows(const std::vector<Value>& rows, std::vector<Value>& slots, int64_t first_slot);
  template <class Value>
  void install_rows(const Replacement& plan, const std::vector<Value>& rows, std::vector<Value>& slots);
};

}  // namespace tessera
