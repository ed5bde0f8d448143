// SPDX-License-Identifier: BSD-3-Clause
// The plain double-precision side of the link tests: random embeddings and tasks, the loss and MRR by their
// definitions, and a rank's block of embeddings on a grid (rows shuffled over one axis with padding rows,
// columns over another) with the error of a gradient block against reference rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <tessera/tessera.hpp>
#include <vector>

namespace tessera {

using Embeddings = std::vector<std::vector<double>>;  // node x column

inline NodePairs random_pairs(int64_t count, int64_t n, std::mt19937_64& gen) {
  NodePairs p;
  for (int64_t i = 0; i < count; ++i)
    p.source.push_back(int64_t(gen() % uint64_t(n))), p.target.push_back(int64_t(gen() % uint64_t(n)));
  return p;
}

// A task on `n` nodes: training pairs, and splits with shared and per-pair negatives.
inline std::shared_ptr<LinkTask> random_task(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto task = std::make_shared<LinkTask>();
  task->num_nodes = n;
  task->train = random_pairs(23, n, gen);
  for (LinkEvaluationSplit* s : {&task->valid, &task->test}) {
    s->positives = random_pairs(s == &task->valid ? 9 : 12, n, gen);
    s->shared_negatives = random_pairs(s == &task->valid ? 25 : 31, n, gen);
    s->negatives_per_edge = 4;
    s->negative_targets = random_pairs(4 * s->positives.size(), n, gen).target;
  }
  return task;
}

inline double bce(double s, double y) {
  return std::log(1 + std::exp(s)) - y * s;
}

inline double mrr(const std::vector<double>& pos, const std::vector<double>& own, size_t per) {
  double sum = 0;
  for (size_t e = 0; e < pos.size(); ++e) {
    double rank = 1;
    for (size_t j = 0; j < per; ++j)
      rank += own[e * per + j] > pos[e] ? 1.0 : own[e * per + j] == pos[e] ? 0.5 : 0;
    sum += 1 / rank;
  }
  return sum / double(pos.size());
}

// This rank's block of `h` on `grid`: rows over X in a shuffled order (two padding rows), columns over Y
// (padded to a multiple of its extent).
struct Block {
  std::vector<int64_t> nodes;
  Matrix<float> logits;
  int64_t col_begin = 0;
};
inline Block block_of(const Embeddings& h, const ProcessGrid& grid) {
  const int64_t n = int64_t(h.size()), width = int64_t(h[0].size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) order[size_t(v)] = v;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(5));
  const int xs = grid.axis(Axis::X).size(), x = grid.axis(Axis::X).rank();
  const int ys = grid.axis(Axis::Y).size(), y = grid.axis(Axis::Y).rank();
  const int64_t cols = (width + ys - 1) / ys;
  Block b;
  for (int64_t i = x; i < n; i += xs) b.nodes.push_back(order[size_t(i)]);
  b.nodes.push_back(-1), b.nodes.push_back(-1);
  b.col_begin = int64_t(y) * cols;
  HostMatrix<float> host("block", b.nodes.size(), size_t(cols));
  for (size_t i = 0; i < b.nodes.size(); ++i)
    for (int64_t j = 0; j < cols; ++j)
      host(i, size_t(j)) = b.nodes[i] >= 0 && b.col_begin + j < width
                               ? float(h[size_t(b.nodes[i])][size_t(b.col_begin + j)])
                               : 0.0f;
  b.logits = Kokkos::create_mirror_view_and_copy(DeviceSpace(), host);
  return b;
}

// The largest difference between a block's gradient `g` and the reference's rows (zero where padding).
inline double gradient_error(const Block& b, const Matrix<float>& g, const Embeddings& grad) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), g);
  const int64_t width = int64_t(grad[0].size());
  double worst = 0;
  for (size_t i = 0; i < b.nodes.size(); ++i)
    for (int64_t j = 0; j < int64_t(host.extent(1)); ++j) {
      const int64_t col = b.col_begin + j;
      const double want = b.nodes[i] >= 0 && col < width ? grad[size_t(b.nodes[i])][size_t(col)] : 0.0;
      worst = std::max(worst, std::abs(double(host(i, size_t(j))) - want));
    }
  return worst;
}

// `named` node pairs as rows of a block that holds every node (a rows axis of one rank), labelled 1 or 0.
inline RowPairs pairs_as_rows(const Block& b, const NodePairs& named, const std::vector<double>& labels) {
  std::vector<int64_t> row_of(b.nodes.size());
  for (size_t i = 0; i < b.nodes.size(); ++i)
    if (b.nodes[i] >= 0) row_of[size_t(b.nodes[i])] = int64_t(i);
  RowPairs pairs;
  for (int64_t e = 0; e < named.size(); ++e)
    pairs.source.push_back(row_of[size_t(named.source[size_t(e)])]),
        pairs.target.push_back(row_of[size_t(named.target[size_t(e)])]),
        pairs.label.push_back(uint8_t(labels[size_t(e)]));
  return pairs;
}

inline Embeddings random_embeddings(int64_t n, int64_t width, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 0.6);
  Embeddings h(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(width)));
  for (auto& row : h)
    for (double& x : row) x = double(float(normal(gen)));  // float-exact: the block holds the same values
  return h;
}

}  // namespace tessera
