// SPDX-License-Identifier: BSD-3-Clause
// A random undirected graph for tests that build their blocks by hand: in-edge lists, no self loops, the
// last `isolated` nodes without edges.
#pragma once

#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace tessera::fixtures {

/// `edges` draws of an undirected edge between nodes [0, n - isolated) (draws of a self loop skipped,
/// repeats merged), as each node's set of in-neighbours.
inline std::vector<std::set<int64_t>> random_in_edges(int64_t n, int64_t edges, uint64_t seed,
                                                      int64_t isolated = 1) {
  std::mt19937_64 gen(seed);
  std::vector<std::set<int64_t>> in(static_cast<size_t>(n));
  const uint64_t linked = uint64_t(n - isolated);
  for (int64_t e = 0; e < edges; ++e) {
    const int64_t u = int64_t(gen() % linked), v = int64_t(gen() % linked);
    if (u == v) continue;
    in[size_t(v)].insert(u);
    in[size_t(u)].insert(v);
  }
  return in;
}

}  // namespace tessera::fixtures
