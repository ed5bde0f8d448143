// SPDX-License-Identifier: BSD-3-Clause
// build_blocks (a template: the sampling callback is inlined). Included by neighbor.hpp only.
#pragma once

#include "tessera/core/flat_id_map.hpp"

namespace tessera {

template <class SampleFn, class PrepareFn>
std::vector<SampledBlock> build_blocks(const std::vector<int64_t>& seeds, int layers, SampleFn&& sample,
                                       PrepareFn&& prepare) {
  std::vector<SampledBlock> blocks(static_cast<size_t>(layers));
  std::vector<int64_t> frontier = seeds, nbrs;
  for (int l = layers - 1; l >= 0; --l) {
    prepare(l, frontier);
    SampledBlock& b = blocks[size_t(l)];
    b.num_dst = int64_t(frontier.size());
    b.src = frontier;
    FlatIdMap index(frontier.size() * 4);
    for (size_t i = 0; i < frontier.size(); ++i) index.try_emplace(frontier[i], int64_t(i));
    b.row_ptr.assign(1, 0);
    for (int64_t v : frontier) {
      nbrs.clear();
      sample(l, v, nbrs);
      for (int64_t u : nbrs) {
        const auto [at, inserted] = index.try_emplace(u, int64_t(b.src.size()));
        if (inserted) b.src.push_back(u);
        b.col.push_back(at);
      }
      b.row_ptr.push_back(int64_t(b.col.size()));
    }
    frontier = b.src;
  }
  return blocks;
}

}  // namespace tessera

namespace tessera {

/// build_blocks with nothing to prepare (every neighbour list is local).
template <class SampleFn>
std::vector<SampledBlock> build_blocks(const std::vector<int64_t>& seeds, int layers, SampleFn&& sample) {
  return build_blocks(seeds, layers, sample, [](int, const std::vector<int64_t>&) {});
}

}  // namespace tessera
