// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/sampling/induced.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

#include "rank_bitmap.hpp"
#include "tessera/core/csr.hpp"

namespace tessera {

SampleOrder order_sample(const std::vector<int64_t>& sample, const std::vector<int64_t>& positions) {
  SampleOrder out;
  out.positions.resize(sample.size());
  out.ids.resize(sample.size());
  const int64_t count = int64_t(sample.size());
  const int64_t bound = count == 0 ? 0 : *std::max_element(positions.begin(), positions.end()) + 1;
  if (sampling_impl::rank_bitmap_pays(bound, count)) {  // distinct positions: each one's rank is its slot
    const sampling_impl::RankBitmap ranks(bound, positions);
    for (size_t k = 0; k < sample.size(); ++k) {
      const size_t slot = size_t(ranks.rank(positions[k]));
      out.positions[slot] = positions[k], out.ids[slot] = sample[k];
    }
    return out;
  }
  std::vector<std::pair<int64_t, int64_t>> by_position(sample.size());  // (position, vertex)
  for (size_t k = 0; k < sample.size(); ++k) by_position[k] = {positions[k], sample[k]};
  std::sort(by_position.begin(), by_position.end());
  for (size_t k = 0; k < by_position.size(); ++k)
    out.positions[k] = by_position[k].first, out.ids[k] = by_position[k].second;
  return out;
}

SampledIndex sampled_positions(const SampleOrder& order, int64_t begin, int64_t end) {
  const auto first = std::lower_bound(order.positions.begin(), order.positions.end(), begin);
  const auto last = std::lower_bound(first, order.positions.end(), end);
  const size_t lo = size_t(first - order.positions.begin()), hi = size_t(last - order.positions.begin());
  SampledIndex out;
  out.local.resize(hi - lo);
  for (size_t k = lo; k < hi; ++k) out.local[k - lo] = order.positions[k] - begin;
  out.ids.assign(order.ids.begin() + std::ptrdiff_t(lo), order.ids.begin() + std::ptrdiff_t(hi));
  return out;
}

namespace {

// The slot in `cols` of each row's own vertex, or -1 where this block keeps no column of it: the columns
// ordered by vertex id (order_sample, ids distinct within a slice of the sample), then each row's vertex
// found through a rank bitmap where it pays, else by binary search.
std::vector<int64_t> own_column_slots(const SampledIndex& rows, const SampledIndex& cols) {
  std::vector<int64_t> own(rows.ids.size(), -1);
  if (cols.ids.empty()) return own;
  std::vector<int64_t> slots(cols.ids.size());
  std::iota(slots.begin(), slots.end(), int64_t(0));
  const SampleOrder by_vertex = order_sample(slots, cols.ids);  // positions: vertex ids; ids: their slots
  const int64_t bound = by_vertex.positions.back() + 1;
  if (sampling_impl::rank_bitmap_pays(bound, int64_t(cols.ids.size()))) {
    const sampling_impl::RankBitmap present(bound, cols.ids);
    for (size_t r = 0; r < rows.ids.size(); ++r) {
      const int64_t v = rows.ids[r];
      if (v < bound && present.contains(v)) own[r] = by_vertex.ids[size_t(present.rank(v))];
    }
    return own;
  }
  for (size_t r = 0; r < rows.ids.size(); ++r) {
    const auto it = std::lower_bound(by_vertex.positions.begin(), by_vertex.positions.end(), rows.ids[r]);
    if (it != by_vertex.positions.end() && *it == rows.ids[r])
      own[r] = by_vertex.ids[size_t(it - by_vertex.positions.begin())];
  }
  return own;
}

}  // namespace

template <class Column>
HostCsr induced_block(const int64_t* row_ptr, const Column* col_idx, const BlockWeights& weights,
                      int64_t block_cols, const SampledIndex& rows, const SampledIndex& cols,
                      float off_diagonal_scale) {
  const float* values = weights.values;
  const double *row_scale = weights.row_scale, *col_scale = weights.col_scale;
  const sampling_impl::RankBitmap kept(block_cols, cols.local);
  HostCsr out;
  out.num_rows = int64_t(rows.local.size());
  out.num_cols = int64_t(cols.local.size());
  if (cols.local.empty()) {  // nothing kept (an empty block): empty rows
    out.row_ptr.assign(rows.local.size() + 1, 0);
    return out;
  }
  // Sized for every entry of the sampled rows, written without a branch, then cut to what was kept.
  int64_t bound = 0;
  for (int64_t row : rows.local) bound += row_ptr[row + 1] - row_ptr[row];
  out.col_idx.resize(size_t(bound));
  out.values.resize(size_t(bound));
  out.row_ptr.resize(rows.local.size() + 1);
  const int64_t last_col = int64_t(cols.ids.size()) - 1;
  // An entry reads only its kept column's scale (an array the size of the sample, not the block's width)
  // and compares its slot with the row's own: no random read of the column's vertex id.
  std::vector<double> kept_scale(col_scale && !values ? cols.local.size() : 0);
  for (size_t s = 0; s < kept_scale.size(); ++s) kept_scale[s] = col_scale[cols.local[s]];
  const std::vector<int64_t> own_slot = own_column_slots(rows, cols);
  // The sampled rows are a sparse subset of the block's, so the hardware prefetcher cannot guess where the
  // next one starts and every row began with a wait on memory: ask for rows ahead.
  constexpr size_t kAhead = 16;
  int64_t n = 0;
  for (size_t r = 0; r < rows.local.size(); ++r) {
    if (r + kAhead < rows.local.size()) {
      const int64_t ahead = row_ptr[rows.local[r + kAhead]];
      __builtin_prefetch(col_idx + ahead);
      __builtin_prefetch(col_idx + ahead + 8);  // the next cache line: rows average 10-20 entries
      if (values) __builtin_prefetch(values + ahead);
    }
    const int64_t row = rows.local[r], own = own_slot[r];
    const double scale = values || !row_scale ? 1.0 : row_scale[row];  // read only where it weighs
    for (int64_t k = row_ptr[row]; k < row_ptr[row + 1]; ++k) {
      const int64_t c = col_idx[k], keep = kept.contains(c);
      const int64_t slot = std::min(kept.rank(c), last_col);  // a dropped column's slot is never kept
      const float weight =
          values ? values[k]
                 : scaled_weight<float>(scale, kept_scale.empty() ? 1.0 : kept_scale[size_t(slot)]);
      out.col_idx[size_t(n)] = slot;
      out.values[size_t(n)] = slot == own ? weight : weight * off_diagonal_scale;
      n += keep;
    }
    out.row_ptr[r + 1] = n;
  }
  out.col_idx.resize(size_t(n));
  out.values.resize(size_t(n));
  return out;
}

template HostCsr induced_block(const int64_t*, const int32_t*, const BlockWeights&, int64_t,
                               const SampledIndex&, const SampledIndex&, float);
template HostCsr induced_block(const int64_t*, const int64_t*, const BlockWeights&, int64_t,
                               const SampledIndex&, const SampledIndex&, float);

HostCsr transpose(const HostCsr& a) {
  HostCsr t;
  t.num_rows = a.num_cols;
  t.num_cols = a.num_rows;
  t.row_ptr.assign(size_t(a.num_cols + 1), 0);
  for (int64_t c : a.col_idx) ++t.row_ptr[size_t(c + 1)];
  for (int64_t r = 0; r < t.num_rows; ++r) t.row_ptr[size_t(r + 1)] += t.row_ptr[size_t(r)];
  t.col_idx.resize(a.col_idx.size());
  t.values.resize(a.values.size());
  std::vector<int64_t> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
  for (int64_t r = 0; r < a.num_rows; ++r)
    for (int64_t k = a.row_ptr[size_t(r)]; k < a.row_ptr[size_t(r + 1)]; ++k) {
      const int64_t dst = next[size_t(a.col_idx[size_t(k)])]++;
      t.col_idx[size_t(dst)] = r;
      if (!a.values.empty()) t.values[size_t(dst)] = a.values[size_t(k)];  // a pattern stays a pattern
    }
  return t;
}

}  // namespace tessera
