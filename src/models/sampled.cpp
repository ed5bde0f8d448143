// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/sampled.hpp"

#include <algorithm>
#include <cmath>

#include "tessera/core/random.hpp"

namespace tessera {

BlockOperator block_operator(const SampledBlock& b, ModelKind kind, const std::vector<int64_t>& degree) {
  BlockOperator a;
  a.rows = b.num_dst;
  a.cols = int64_t(b.src.size());
  a.row_ptr.assign(1, 0);
  const bool gcn = kind == ModelKind::Gcn;
  a.col.reserve(b.col.size() + (gcn ? size_t(a.rows) : 0));
  a.value.reserve(a.col.capacity());
  for (int64_t i = 0; i < a.rows; ++i) {
    const int64_t begin = b.row_ptr[size_t(i)], end = b.row_ptr[size_t(i + 1)], k = end - begin;
    const double d = double(degree[size_t(b.src[size_t(i)])]);
    if (gcn) {
      a.col.push_back(i);  // the node itself: destination i is source i
      a.value.push_back(float(1.0 / (d + 1.0)));
    }
    for (int64_t e = begin; e < end; ++e) {
      const int64_t j = b.col[size_t(e)];
      a.col.push_back(j);
      a.value.push_back(
          gcn ? float(d / double(k) / std::sqrt((d + 1.0) * (double(degree[size_t(b.src[size_t(j)])]) + 1.0)))
              : float(1.0 / double(k)));
    }
    a.row_ptr.push_back(int64_t(a.col.size()));
  }
  return a;
}

BlockOperator transpose(const BlockOperator& a) {
  BlockOperator t;
  t.rows = a.cols;
  t.cols = a.rows;
  t.row_ptr.assign(size_t(t.rows + 1), 0);
  for (int64_t j : a.col) ++t.row_ptr[size_t(j + 1)];
  for (int64_t r = 0; r < t.rows; ++r) t.row_ptr[size_t(r + 1)] += t.row_ptr[size_t(r)];
  std::vector<int64_t> at(t.row_ptr.begin(), t.row_ptr.end() - 1);
  t.col.resize(a.col.size());
  t.value.resize(a.value.size());
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t e = a.row_ptr[size_t(i)]; e < a.row_ptr[size_t(i + 1)]; ++e) {
      const int64_t p = at[size_t(a.col[size_t(e)])]++;
      t.col[size_t(p)] = i;
      t.value[size_t(p)] = a.value[size_t(e)];
    }
  return t;
}

namespace {

CsrMatrix<float, DeviceSpace> to_device(const BlockOperator& a) {
  CsrMatrix<float, HostSpace> h;
  h.num_rows = a.rows;
  h.num_cols = a.cols;
  h.row_ptr = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("block.row_ptr"), a.row_ptr.size());
  h.col_idx = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("block.col"), a.col.size());
  h.values = HostVector<float>(Kokkos::ViewAllocateWithoutInitializing("block.value"), a.value.size());
  std::copy(a.row_ptr.begin(), a.row_ptr.end(), h.row_ptr.data());
  std::copy(a.col.begin(), a.col.end(), h.col_idx.data());
  std::copy(a.value.begin(), a.value.end(), h.values.data());
  return csr_to_space<float, DeviceSpace>(h);
}

}  // namespace

GraphOps<float> upload_ops(const BlockOperator& forward, const BlockOperator& transposed) {
  GraphOps<float> ops;
  ops.aggregate = CsrSpmm<float>(to_device(forward));
  ops.aggregate_transpose = CsrSpmm<float>(to_device(transposed));
  ops.num_nodes = forward.rows;
  return ops;
}

std::vector<int64_t> step_seeds(const std::vector<int64_t>& train, const std::vector<int64_t>& labels,
                                int64_t first, uint64_t seed, int64_t epoch, int64_t step, int64_t steps) {
  std::vector<std::pair<uint64_t, int64_t>> keyed;
  const uint64_t epoch_key = splitmix64(seed ^ splitmix64(uint64_t(epoch) + 0x5EEDull));
  for (int64_t v : train)
    if (labels[size_t(v - first)] >= 0) keyed.push_back({splitmix64(epoch_key ^ uint64_t(v)), v});
  std::sort(keyed.begin(), keyed.end());
  const int64_t n = int64_t(keyed.size());
  std::vector<int64_t> out;
  for (int64_t k = n * step / steps; k < n * (step + 1) / steps; ++k) out.push_back(keyed[size_t(k)].second);
  return out;
}

}  // namespace tessera
