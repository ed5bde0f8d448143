// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the undirected pattern of a CSR graph (an entry u-v for every stored edge u -> v or v -> u,
// no self loops, no repeats, each row ascending), in the index type its user needs: METIS's 32-bit CSR for
// partitions (partition.cpp), 64-bit ids for the locality orderings (reorder.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessera::impl {

/// Counts the symmetrized entries (repeats included) of the graph `indptr`/`indices`; when they are at most
/// `max_entries`, fills `offsets` (n + 1) and `neighbours`. Returns the count either way, so a caller can
/// refuse a graph too large for its index type before anything of that size is allocated.
template <class Index>
int64_t symmetric_csr(const std::vector<int64_t>& indptr, const std::vector<int64_t>& indices,
                      int64_t max_entries, std::vector<Index>& offsets, std::vector<Index>& neighbours) {
  const int64_t n = int64_t(indptr.size()) - 1;
  std::vector<int64_t> start(size_t(n) + 1, 0);
  for (int64_t v = 0; v < n; ++v)
    for (int64_t k = indptr[size_t(v)]; k < indptr[size_t(v) + 1]; ++k)
      if (indices[size_t(k)] != v) ++start[size_t(v) + 1], ++start[size_t(indices[size_t(k)]) + 1];
  for (int64_t v = 0; v < n; ++v) start[size_t(v) + 1] += start[size_t(v)];
  const int64_t total = start.back();
  if (total > max_entries) return total;
  std::vector<Index> both(static_cast<size_t>(total));
  std::vector<int64_t> at(start.begin(), start.end() - 1);
  for (int64_t v = 0; v < n; ++v)
    for (int64_t k = indptr[size_t(v)]; k < indptr[size_t(v) + 1]; ++k) {
      const int64_t u = indices[size_t(k)];
      if (u == v) continue;
      both[size_t(at[size_t(v)]++)] = Index(u);
      both[size_t(at[size_t(u)]++)] = Index(v);
    }
  offsets.assign(size_t(n) + 1, 0);
  neighbours.clear();
  neighbours.reserve(both.size());
  for (int64_t v = 0; v < n; ++v) {
    const auto first = both.begin() + start[size_t(v)], last = both.begin() + start[size_t(v) + 1];
    std::sort(first, last);
    neighbours.insert(neighbours.end(), first, std::unique(first, last));
    offsets[size_t(v) + 1] = Index(neighbours.size());
  }
  return total;
}

}  // namespace tessera::impl
