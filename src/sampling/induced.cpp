// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/sampling/induced.hpp"

#include <algorithm>
#include <utility>

namespace tessera {

SampledIndex sampled_positions(const std::vector<int64_t>& sample, const std::vector<int64_t>& positions,
                               int64_t begin, int64_t end) {
  std::vector<std::pair<int64_t, int64_t>> hits;  // (local index, vertex)
  for (size_t k = 0; k < sample.size(); ++k)
    if (positions[k] >= begin && positions[k] < end) hits.push_back({positions[k] - begin, sample[k]});
  std::sort(hits.begin(), hits.end());
  SampledIndex out;
  out.local.reserve(hits.size());
  out.ids.reserve(hits.size());
  for (const auto& [local, v] : hits) out.local.push_back(local), out.ids.push_back(v);
  return out;
}

HostCsr induced_block(const int64_t* row_ptr, const int64_t* col_idx, const float* values,
                      const SampledIndex& rows, const SampledIndex& cols, const std::vector<int64_t>& col_ids,
                      float off_diagonal_scale, std::vector<int64_t>& col_slot) {
  for (size_t k = 0; k < cols.local.size(); ++k) col_slot[size_t(cols.local[k])] = int64_t(k);
  HostCsr out;
  out.num_rows = int64_t(rows.local.size());
  out.num_cols = int64_t(cols.local.size());
  out.row_ptr.reserve(rows.local.size() + 1);
  for (size_t r = 0; r < rows.local.size(); ++r) {
    const int64_t row = rows.local[r], vertex = rows.ids[r];
    for (int64_t k = row_ptr[row]; k < row_ptr[row + 1]; ++k) {
      const int64_t slot = col_slot[size_t(col_idx[k])];
      if (slot < 0) continue;
      out.col_idx.push_back(slot);
      out.values.push_back(col_ids[size_t(col_idx[k])] == vertex ? values[k]
                                                                 : values[k] * off_diagonal_scale);
    }
    out.row_ptr.push_back(int64_t(out.col_idx.size()));
  }
  for (int64_t c : cols.local) col_slot[size_t(c)] = -1;  // ready for the next call
  return out;
}

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
