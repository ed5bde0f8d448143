// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/prefetch/feature_cache.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessera/core/error.hpp"

namespace tessera {

int64_t FeatureCache::capacity_for(const PrefetchOptions& options, int64_t halo_nodes, int64_t feature_dim,
                                   StorageDtype dtype) {
  if (options.cache_bytes <= 0) return int64_t(std::floor(options.fraction * double(halo_nodes)));
  const int64_t row_bytes = std::max<int64_t>(1, feature_dim * storage_bytes(dtype));
  return std::min(halo_nodes, options.cache_bytes / row_bytes);
}

FeatureCache::FeatureCache(std::vector<int64_t> halo, const std::vector<int64_t>& degree, int64_t feature_dim,
                           const PrefetchOptions& options, StorageDtype dtype)
    : options_(options), dim_(feature_dim), dtype_(dtype) {
  require(halo.size() == degree.size(), "FeatureCache: ", halo.size(), " halo nodes but ", degree.size(),
          " degrees");
  options.validate();
  threshold_ = std::pow(1.0 - options.alpha, double(options.interval));
  // The halo sorted (ties of the eviction plan go to the lower id, the lower index) and indexed: a step
  // looks up each remote source row's node, tens of thousands a step, where a binary search over the halo
  // and a std::unordered_map of the cached nodes were each a cache miss or several.
  halo_ = halo;
  std::sort(halo_.begin(), halo_.end());
  require(std::adjacent_find(halo_.begin(), halo_.end()) == halo_.end(), "FeatureCache: halo nodes repeat");
  halo_at_ = FlatIdMap(halo_.size());
  for (size_t h = 0; h < halo_.size(); ++h) halo_at_.try_emplace(halo_[h], int64_t(h));
  miss_.assign(halo_.size(), 0);
  slot_at_.assign(halo_.size(), -1);
  // Initial fill: highest degree first, ties by lower id.
  std::vector<size_t> order(halo.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return degree[a] != degree[b] ? degree[a] > degree[b] : halo[a] < halo[b];
  });
  const auto capacity = size_t(capacity_for(options, int64_t(halo.size()), feature_dim, dtype));
  for (size_t k = 0; k < capacity; ++k) {
    const int64_t node = halo[order[k]];
    slot_at_[size_t(halo_index(node))] = int64_t(k);
    slot_node_.push_back(node);
  }
  idle_.assign(capacity, 0);
  hit_.assign(capacity, 0);
  (dtype == StorageDtype::Bf16 ? rows_bf16_.assign(capacity * size_t(dim_), 0)
                               : rows_.assign(capacity * size_t(dim_), 0.0f));
}

void FeatureCache::install_initial(const std::vector<float>& rows, int64_t first_slot) {
  require(dtype_ == StorageDtype::F32, "FeatureCache: fp32 rows for a bf16 cache");
  install_initial_rows(rows, rows_, first_slot);
}

void FeatureCache::install_initial(const std::vector<uint16_t>& rows, int64_t first_slot) {
  require(dtype_ == StorageDtype::Bf16, "FeatureCache: bf16 rows for an fp32 cache");
  install_initial_rows(rows, rows_bf16_, first_slot);
}

template <class Value>
void FeatureCache::install_initial_rows(const std::vector<Value>& rows, std::vector<Value>& slots,
                                        int64_t first_slot) {
  const size_t at = size_t(first_slot) * size_t(dim_);
  require(
      first_slot >= 0 && (dim_ == 0 || rows.size() % size_t(dim_) == 0) && at + rows.size() <= slots.size(),
      "FeatureCache: initial fill of ", rows.size(), " values at slot ", first_slot, " for ", slots.size(),
      " values");
  std::copy(rows.begin(), rows.end(), slots.begin() + std::ptrdiff_t(at));
}

int64_t FeatureCache::halo_index(int64_t node) const {
  return halo_at_.find(node);
}

int64_t FeatureCache::slot_of(int64_t node) const {
  const int64_t h = halo_index(node);
  return h < 0 ? -1 : slot_at_[size_t(h)];
}

int64_t FeatureCache::misses(int64_t node) const {
  const int64_t h = halo_index(node);
  return h < 0 ? 0 : miss_[size_t(h)];
}

std::vector<int64_t> FeatureCache::lookup(const std::vector<int64_t>& nodes) {
  // Nodes come in the sample's order, each a likely miss in the index: ask for later ones' lines first.
  constexpr size_t kAhead = 8;
  std::vector<int64_t> slots(nodes.size(), -1);
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (k + kAhead < nodes.size()) halo_at_.prefetch(nodes[k + kAhead]);
    const int64_t h = halo_index(nodes[k]);
    if (h < 0) continue;
    if (const int64_t slot = slot_at_[size_t(h)]; slot >= 0) {
      slots[k] = slot;
      hit_[size_t(slot)] = 1;
    } else {
      ++miss_[size_t(h)];
    }
  }
  return slots;
}

double FeatureCache::score(int64_t slot) const {
  return std::pow(1.0 - options_.alpha, double(idle_[size_t(slot)]));
}

FeatureCache::Replacement FeatureCache::plan_eviction() const {
  Replacement plan;
  // A slot hit in this step is in use: its restore is only pending until end_step().
  // Score (1 - alpha)^idle < (1 - alpha)^Delta exactly when idle > Delta: decided on the integer, because a
  // repeated floating-point product lands on either side of pow() by rounding (alpha 0.05, Delta 16
  // evicted at 16 idle steps, alpha 0.1 kept).
  for (size_t s = 0; s < idle_.size(); ++s)
    if (idle_[s] > options_.interval && !hit_[s]) plan.slots.push_back(int64_t(s));
  if (plan.slots.empty()) return plan;
  // The most-missed halo nodes that are not cached, ties by lower id.
  std::vector<size_t> candidates;
  for (size_t h = 0; h < halo_.size(); ++h)
    if (miss_[h] > 0 && slot_at_[h] < 0) candidates.push_back(h);
  const size_t take = std::min(candidates.size(), plan.slots.size());
  std::partial_sort(candidates.begin(), candidates.begin() + std::ptrdiff_t(take), candidates.end(),
                    [&](size_t a, size_t b) { return miss_[a] != miss_[b] ? miss_[a] > miss_[b] : a < b; });
  plan.slots.resize(take);  // slots without a replacement keep their row
  for (size_t k = 0; k < take; ++k) plan.nodes.push_back(halo_[candidates[k]]);
  return plan;
}

std::vector<int64_t> FeatureCache::request(const std::vector<int64_t>& missed, const Replacement& plan) {
  std::vector<int64_t> out = missed;
  if (plan.nodes.empty()) return out;
  // The misses are many (tens of thousands a step) and the replacements few: mark which replacements
  // are missed too by searching the sorted replacements, not by sorting the misses.
  std::vector<int64_t> planned = plan.nodes;
  std::sort(planned.begin(), planned.end());
  std::vector<uint8_t> missed_too(planned.size(), 0);
  for (int64_t node : missed) {
    const auto it = std::lower_bound(planned.begin(), planned.end(), node);
    if (it != planned.end() && *it == node) missed_too[size_t(it - planned.begin())] = 1;
  }
  for (int64_t node : plan.nodes) {
    const auto at = size_t(std::lower_bound(planned.begin(), planned.end(), node) - planned.begin());
    if (!missed_too[at]) out.push_back(node);
  }
  return out;
}

void FeatureCache::install(const Replacement& plan, const std::vector<float>& rows) {
  require(dtype_ == StorageDtype::F32, "FeatureCache: fp32 rows for a bf16 cache");
  install_rows(plan, rows, rows_);
}

void FeatureCache::install(const Replacement& plan, const std::vector<uint16_t>& rows) {
  require(dtype_ == StorageDtype::Bf16, "FeatureCache: bf16 rows for an fp32 cache");
  install_rows(plan, rows, rows_bf16_);
}

template <class Value>
void FeatureCache::install_rows(const Replacement& plan, const std::vector<Value>& rows,
                                std::vector<Value>& slots) {
  require(plan.slots.size() == plan.nodes.size() && rows.size() == plan.nodes.size() * size_t(dim_),
          "FeatureCache: a replacement of ", plan.nodes.size(), " nodes with ", rows.size(), " values");
  for (size_t k = 0; k < plan.slots.size(); ++k) {
    const int64_t slot = plan.slots[k], node = plan.nodes[k], h = halo_index(node);
    require(h >= 0, "FeatureCache: node ", node, " is not a halo node");
    require(slot_at_[size_t(h)] < 0, "FeatureCache: node ", node, " is cached already");
    slot_at_[size_t(halo_index(slot_node_[size_t(slot)]))] = -1;
    slot_at_[size_t(h)] = slot;
    slot_node_[size_t(slot)] = node;
    idle_[size_t(slot)] = 0;
    miss_[size_t(h)] = 0;
    std::copy(rows.begin() + std::ptrdiff_t(k * size_t(dim_)),
              rows.begin() + std::ptrdiff_t((k + 1) * size_t(dim_)),
              slots.begin() + std::ptrdiff_t(size_t(slot) * size_t(dim_)));
  }
}

void FeatureCache::end_step() {
  for (size_t s = 0; s < idle_.size(); ++s) {
    idle_[s] = hit_[s] ? 0 : idle_[s] + 1;
    hit_[s] = 0;
  }
}

}  // namespace tessera
