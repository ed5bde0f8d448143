// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/reorder.hpp"

#include "symmetric_csr.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <numeric>

#include "tessera/graph/partition.hpp"

namespace tessera {


NodePattern symmetric_pattern(const std::vector<int64_t>& indptr, const std::vector<int64_t>& indices) {
  NodePattern p;
  impl::symmetric_csr(indptr, indices, INT64_MAX, p.indptr, p.indices);
  return p;
}

namespace {

int64_t degree_of(const NodePattern& g, int64_t v) {
  return g.indptr[size_t(v) + 1] - g.indptr[size_t(v)];
}

// Breadth-first levels from `root` over the nodes not yet numbered: the depth of the last level and its node
// of least degree. `level` is -1 for every node on entry and on return; `queue` is scratch.
std::pair<int64_t, int64_t> last_level(const NodePattern& g, int64_t root,
                                       const std::vector<uint8_t>& numbered, std::vector<int64_t>& level,
                                       std::vector<int64_t>& queue) {
  queue.assign(1, root);
  level[size_t(root)] = 0;
  for (size_t head = 0; head < queue.size(); ++head) {
    const int64_t v = queue[head];
    for (int64_t k = g.indptr[size_t(v)]; k < g.indptr[size_t(v) + 1]; ++k) {
      const int64_t u = g.indices[size_t(k)];
      if (numbered[size_t(u)] || level[size_t(u)] >= 0) continue;
      level[size_t(u)] = level[size_t(v)] + 1;
      queue.push_back(u);
    }
  }
  const int64_t depth = level[size_t(queue.back())];
  int64_t best = queue.back();
  for (auto it = queue.rbegin(); it != queue.rend() && level[size_t(*it)] == depth; ++it)
    if (degree_of(g, *it) < degree_of(g, best)) best = *it;
  for (const int64_t v : queue) level[size_t(v)] = -1;
  return {depth, best};
}

// George and Liu's pseudo-peripheral node: from `start`, move to the last level's node of least degree
// while that deepens the level structure (a few searches; capped, as each is a pass over the component).
int64_t pseudo_peripheral(const NodePattern& g, int64_t start, const std::vector<uint8_t>& numbered,
                          std::vector<int64_t>& level, std::vector<int64_t>& queue) {
  auto [depth, next] = last_level(g, start, numbered, level, queue);
  for (int tries = 0; tries < 8 && next != start; ++tries) {
    const auto [deeper, candidate] = last_level(g, next, numbered, level, queue);
    if (deeper <= depth) break;
    start = next;
    depth = deeper;
    next = candidate;
  }
  return start;
}

}  // namespace

std::vector<int64_t> rcm_order(const NodePattern& g) {
  const int64_t n = int64_t(g.indptr.size()) - 1;
  std::vector<int64_t> by_degree(static_cast<size_t>(n)), level(static_cast<size_t>(n), -1), order, queue;
  std::iota(by_degree.begin(), by_degree.end(), 0);
  std::stable_sort(by_degree.begin(), by_degree.end(),
                   [&](int64_t a, int64_t b) { return degree_of(g, a) < degree_of(g, b); });
  std::vector<uint8_t> numbered(size_t(n), 0);
  order.reserve(size_t(n));
  std::vector<int64_t> fresh;
  for (const int64_t seed : by_degree) {  // one component per unnumbered seed
    if (numbered[size_t(seed)]) continue;
    const int64_t root = pseudo_peripheral(g, seed, numbered, level, queue);
    size_t head = order.size();
    order.push_back(root);
    numbered[size_t(root)] = 1;
    for (; head < order.size(); ++head) {
      const int64_t v = order[head];
      fresh.clear();
      for (int64_t k = g.indptr[size_t(v)]; k < g.indptr[size_t(v) + 1]; ++k) {
        const int64_t u = g.indices[size_t(k)];
        if (!numbered[size_t(u)]) numbered[size_t(u)] = 1, fresh.push_back(u);
      }
      std::sort(fresh.begin(), fresh.end(), [&](int64_t a, int64_t b) {
        return degree_of(g, a) != degree_of(g, b) ? degree_of(g, a) < degree_of(g, b) : a < b;
      });
      order.insert(order.end(), fresh.begin(), fresh.end());
    }
  }
  std::reverse(order.begin(), order.end());
  return order;
}

std::vector<int64_t> degree_order(const std::vector<int64_t>& indptr) {
  std::vector<int64_t> order(indptr.size() - 1);
  std::iota(order.begin(), order.end(), 0);
  const auto degree = [&](int64_t v) { return indptr[size_t(v) + 1] - indptr[size_t(v)]; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return degree(a) > degree(b); });
  return order;
}

std::vector<int64_t> order_by_part(const std::vector<int32_t>& part) {
  const int64_t parts = part.empty() ? 0 : int64_t(*std::max_element(part.begin(), part.end())) + 1;
  const Renumbering numbering = renumber_by_part(part, parts);
  std::vector<int64_t> order(part.size());
  for (size_t v = 0; v < part.size(); ++v) order[size_t(numbering.new_of_old[v])] = int64_t(v);
  return order;
}

double edges_within(const std::vector<int64_t>& indptr, const std::vector<int64_t>& indices, int64_t window) {
  const int64_t n = int64_t(indptr.size()) - 1;
  int64_t near = 0;
  for (int64_t v = 0; v < n; ++v)
    for (int64_t k = indptr[size_t(v)]; k < indptr[size_t(v) + 1]; ++k)
      near += std::llabs(indices[size_t(k)] - v) <= window ? 1 : 0;
  return indices.empty() ? 1.0 : double(near) / double(indices.size());
}

}  // namespace tessera
