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

// What the cut reads: the block, its sampled rows, the kept columns and their scales.
template <class Column>
struct CutInput {
  const int64_t* row_ptr;
  const Column* col_idx;
  const float* values;                    // null: weights from the scales
  const double* row_scale;                // null: none
  const std::vector<double>& kept_scale;  // per kept slot; empty: none
  const sampling_impl::RankBitmap& kept;
  const std::vector<int64_t>& rows;      // the sampled rows' local indices
  const std::vector<int64_t>& own_slot;  // each row's own column slot, or -1
  int64_t last_col;
  float off_diagonal_scale;
};

// Writes each sampled row's kept entries and returns how many. Every entry is written without a branch
// and counted only if kept (whether a column is kept is a coin flip no predictor learns; branching on it
// measured slower). kPopcount: compiled for POPCNT (see rank_bitmap.hpp).
template <bool kPopcount, class Column>
__attribute__((always_inline)) inline int64_t cut_rows(const CutInput<Column>& in, int64_t* out_col,
                                                       float* out_value, int64_t* out_row_ptr) {
  // The sampled rows are a sparse subset of the block's, so the hardware prefetcher cannot guess where the
  // next one starts and every row began with a wait on memory: ask for rows ahead.
  constexpr size_t kAhead = 16;
  const size_t rows = in.rows.size();
  int64_t n = 0;
  for (size_t r = 0; r < rows; ++r) {
    if (r + kAhead < rows) {
      const int64_t ahead = in.row_ptr[in.rows[r + kAhead]];
      __builtin_prefetch(in.col_idx + ahead);
      __builtin_prefetch(in.col_idx + ahead + 8);  // the next cache line: rows average 10-20 entries
      if (in.values) __builtin_prefetch(in.values + ahead);
    }
    const int64_t row = in.rows[r], own = in.own_slot[r];
    // A row's scale is read only where it weighs (a block with values has them multiplied in).
    const double scale = in.values || !in.row_scale ? 1.0 : in.row_scale[row];
    for (int64_t k = in.row_ptr[row]; k < in.row_ptr[row + 1]; ++k) {
      const int64_t c = in.col_idx[k], keep = in.kept.contains(c);
      // A dropped column's slot is never kept; min keeps its (unused) scale read in bounds.
      const int64_t slot = std::min(in.kept.template rank<kPopcount>(c), in.last_col);
      const float weight =
          in.values ? in.values[k]
                    : scaled_weight<float>(scale, in.kept_scale.empty() ? 1.0 : in.kept_scale[size_t(slot)]);
      out_col[n] = slot;
      out_value[n] = slot == own ? weight : weight * in.off_diagonal_scale;
      n += keep;
    }
    out_row_ptr[r + 1] = n;
  }
  return n;
}

#if defined(TESSERA_SAMPLING_POPCNT_DISPATCH)
template <class Column>
TESSERA_SAMPLING_TARGET_POPCNT int64_t cut_rows_popcnt(const CutInput<Column>& in, int64_t* out_col,
                                                       float* out_value, int64_t* out_row_ptr) {
  return cut_rows<true>(in, out_col, out_value, out_row_ptr);
}
#endif

template <class Column>
int64_t cut_rows_here(const CutInput<Column>& in, int64_t* out_col, float* out_value, int64_t* out_row_ptr) {
#if defined(TESSERA_SAMPLING_POPCNT_DISPATCH)
  if (sampling_impl::cpu_has_popcnt()) return cut_rows_popcnt(in, out_col, out_value, out_row_ptr);
#endif
  return cut_rows<false>(in, out_col, out_value, out_row_ptr);
}

}  // namespace

template <class Column>
HostCsr induced_block(const int64_t* row_ptr, const Column* col_idx, const BlockWeights& weights,
                      int64_t block_cols, const SampledIndex& rows, const SampledIndex& cols,
                      float off_diagonal_scale) {
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
  // An entry reads only its kept column's scale (an array the size of the sample, not the block's width)
  // and compares its slot with the row's own: no random read of the column's vertex id.
  std::vector<double> kept_scale(weights.col_scale && !weights.values ? cols.local.size() : 0);
  for (size_t s = 0; s < kept_scale.size(); ++s) kept_scale[s] = weights.col_scale[cols.local[s]];
  const std::vector<int64_t> own_slot = own_column_slots(rows, cols);
  const CutInput<Column> in{row_ptr,           col_idx,    weights.values,
                            weights.row_scale, kept_scale, kept,
                            rows.local,        own_slot,   int64_t(cols.ids.size()) - 1,
                            off_diagonal_scale};
  const int64_t n = cut_rows_here(in, out.col_idx.data(), out.values.data(), out.row_ptr.data());
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
