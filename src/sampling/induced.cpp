// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/sampling/induced.hpp"

#include <algorithm>
#include <utility>

#include "tessera/core/csr.hpp"

namespace tessera {

SampleOrder order_sample(const std::vector<int64_t>& sample, const std::vector<int64_t>& positions) {
  std::vector<std::pair<int64_t, int64_t>> by_position(sample.size());  // (position, vertex)
  for (size_t k = 0; k < sample.size(); ++k) by_position[k] = {positions[k], sample[k]};
  std::sort(by_position.begin(), by_position.end());
  SampleOrder out;
  out.positions.resize(sample.size());
  out.ids.resize(sample.size());
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

// Bits set in x, without relying on a POPCNT instruction the build may not target.
inline int64_t bit_count(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return int64_t((x * 0x0101010101010101ull) >> 56);
}

// Which columns of a block the sample keeps, and each kept column's index among them: one bit per column
// and a running count per 64-bit word. Why not an index per column: every nonzero of every sampled row
// probes it at a random column; at 1 bit per column it stays in L1/L2, and the probe has no branch (a kept
// column is a coin flip the branch predictor cannot learn).
class KeptColumns {
 public:
  KeptColumns(int64_t cols, const std::vector<int64_t>& kept)
      : bits_(size_t((cols + 63) / 64), 0), before_(bits_.size() + 1, 0) {
    for (int64_t c : kept) bits_[size_t(c >> 6)] |= uint64_t(1) << (c & 63);
    for (size_t w = 0; w < bits_.size(); ++w) before_[w + 1] = before_[w] + bit_count(bits_[w]);
  }

  /// Whether column c is kept (0 or 1), and its index among the kept columns (increasing) when it is.
  int64_t kept(int64_t c) const { return int64_t((bits_[size_t(c >> 6)] >> (c & 63)) & 1u); }
  int64_t index(int64_t c) const {
    const uint64_t below = (uint64_t(1) << (c & 63)) - 1;
    return before_[size_t(c >> 6)] + bit_count(bits_[size_t(c >> 6)] & below);
  }

 private:
  std::vector<uint64_t> bits_;
  std::vector<int64_t> before_;
};

}  // namespace

template <class Column>
HostCsr induced_block(const int64_t* row_ptr, const Column* col_idx, const BlockWeights& weights,
                      int64_t block_cols, const SampledIndex& rows, const SampledIndex& cols,
                      float off_diagonal_scale) {
  const float* values = weights.values;
  const double *row_scale = weights.row_scale, *col_scale = weights.col_scale;
  const KeptColumns kept(block_cols, cols.local);
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
    const int64_t row = rows.local[r], vertex = rows.ids[r];
    const double scale = row_scale ? row_scale[row] : 1.0;
    for (int64_t k = row_ptr[row]; k < row_ptr[row + 1]; ++k) {
      const int64_t c = col_idx[k], keep = kept.kept(c);
      const int64_t slot = std::min(kept.index(c), last_col);  // a dropped column's slot is never kept
      const float weight = values ? values[k] : scaled_weight<float>(scale, col_scale ? col_scale[c] : 1.0);
      out.col_idx[size_t(n)] = slot;
      out.values[size_t(n)] = cols.ids[size_t(slot)] == vertex ? weight : weight * off_diagonal_scale;
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
