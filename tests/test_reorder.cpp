// SPDX-License-Identifier: BSD-3-Clause
// Vertex orderings (reorder.hpp) and reordered graph files: the orders are permutations with the property
// each promises, checked on graphs whose answer is known (paths, grids, stars); a reordered file holds the
// input's graph under the new names; outputs move back to the input's order. Runs on 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "support/fixtures.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/permutation.hpp"
#include "tessera/graph/reorder.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/models/training/node_outputs.hpp"

using namespace tessera;

namespace {

// CSR by destination from (source, destination) pairs over n nodes.
void csr_of(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& edges, std::vector<int64_t>& indptr,
            std::vector<int64_t>& indices) {
  indptr.assign(size_t(n) + 1, 0);
  for (const auto& e : edges) ++indptr[size_t(e.second) + 1];
  for (int64_t v = 0; v < n; ++v) indptr[size_t(v) + 1] += indptr[size_t(v)];
  indices.assign(edges.size(), 0);
  std::vector<int64_t> at(indptr.begin(), indptr.end() - 1);
  for (const auto& e : edges) indices[size_t(at[size_t(e.second)]++)] = e.first;
}

// Both directions of each undirected edge, the nodes renamed by a seeded shuffle.
NodePattern shuffled_pattern(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& undirected,
                             uint64_t seed) {
  std::vector<int64_t> name(static_cast<size_t>(n));
  std::iota(name.begin(), name.end(), 0);
  std::shuffle(name.begin(), name.end(), std::mt19937_64(seed));
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (const auto& [u, v] : undirected) {
    edges.emplace_back(name[size_t(u)], name[size_t(v)]);
    edges.emplace_back(name[size_t(v)], name[size_t(u)]);
  }
  std::vector<int64_t> indptr, indices;
  csr_of(n, edges, indptr, indices);
  return symmetric_pattern(indptr, indices);
}

bool is_permutation_of_nodes(const std::vector<int64_t>& order, int64_t n) {
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  return sorted == all;
}

// The largest |new(u) - new(v)| over the pattern's edges.
int64_t bandwidth(const NodePattern& g, const std::vector<int64_t>& order) {
  std::vector<int64_t> new_of_old(order.size());
  for (size_t i = 0; i < order.size(); ++i) new_of_old[size_t(order[i])] = int64_t(i);
  int64_t widest = 0;
  for (int64_t v = 0; v + 1 < int64_t(g.indptr.size()); ++v)
    for (int64_t k = g.indptr[size_t(v)]; k < g.indptr[size_t(v) + 1]; ++k)
      widest = std::max(widest, std::abs(new_of_old[size_t(v)] - new_of_old[size_t(g.indices[size_t(k)])]));
  return widest;
}

}  // namespace

TEST(Reorder, SymmetricPatternDropsSelfLoopsAndRepeats) {
  std::vector<int64_t> indptr, indices;
  // 1 -> 0 twice, 1 -> 1, 0 -> 2, 2 -> 0: undirected {0-1, 0-2}; node 3 alone.
  csr_of(4, {{1, 0}, {1, 0}, {1, 1}, {0, 2}, {2, 0}}, indptr, indices);
  const NodePattern p = symmetric_pattern(indptr, indices);
  EXPECT_EQ(p.indptr, (std::vector<int64_t>{0, 2, 3, 4, 4}));
  EXPECT_EQ(p.indices, (std::vector<int64_t>{1, 2, 0, 0}));
}

TEST(Reorder, RcmNumbersShuffledPathsConsecutively) {
  // Two paths (40 and 25 nodes) and an isolated node, names shuffled: RCM gives every edge bandwidth 1.
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t v = 0; v + 1 < 40; ++v) edges.emplace_back(v, v + 1);
  for (int64_t v = 40; v + 1 < 65; ++v) edges.emplace_back(v, v + 1);
  const NodePattern g = shuffled_pattern(66, edges, 7);
  const std::vector<int64_t> order = rcm_order(g);
  ASSERT_TRUE(is_permutation_of_nodes(order, 66));
  EXPECT_EQ(bandwidth(g, order), 1);
  EXPECT_GT(bandwidth(g, std::vector<int64_t>(order.rbegin(), order.rend())), 0);
}

TEST(Reorder, RcmKeepsAShuffledGridNarrow) {
  // A k x k grid: breadth-first levels are its anti-diagonals, so neighbours are at most 2k - 1 apart.
  const int64_t k = 12;
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < k; ++c) {
      if (c + 1 < k) edges.emplace_back(r * k + c, r * k + c + 1);
      if (r + 1 < k) edges.emplace_back(r * k + c, (r + 1) * k + c);
    }
  const NodePattern g = shuffled_pattern(k * k, edges, 11);
  std::vector<int64_t> identity(size_t(k * k));
  std::iota(identity.begin(), identity.end(), 0);
  const std::vector<int64_t> order = rcm_order(g);
  ASSERT_TRUE(is_permutation_of_nodes(order, k * k));
  EXPECT_LE(bandwidth(g, order), 2 * k - 1);
  EXPECT_GT(bandwidth(g, identity), 4 * k);  // the shuffle's
}

TEST(Reorder, DegreeAndPartOrders) {
  std::vector<int64_t> indptr, indices;
  // In-degrees: node 0: 1, node 1: 3, node 2: 0, node 3: 3, node 4: 1.
  csr_of(5, {{2, 0}, {0, 1}, {2, 1}, {3, 1}, {0, 3}, {1, 3}, {2, 3}, {1, 4}}, indptr, indices);
  EXPECT_EQ(degree_order(indptr), (std::vector<int64_t>{1, 3, 0, 4, 2}));
  EXPECT_EQ(order_by_part({2, 0, 1, 0, 2}), (std::vector<int64_t>{1, 3, 2, 0, 4}));
  // Edges with |u - v| <= 1: 2->1, 0->1, 2->3; of 8.
  EXPECT_DOUBLE_EQ(edges_within(indptr, indices, 1), 3.0 / 8.0);
}

TEST(Reorder, ChunkedPermutationMovesRunsInOrder) {
  for (const int64_t n : {int64_t(1), int64_t(63), int64_t(64), int64_t(1000), int64_t(4099)}) {
    const RandomPermutation p(n, 5, 1, 64);
    std::vector<int64_t> image(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      image[size_t(i)] = p(i);
      EXPECT_EQ(p.inverse(p(i)), i);
      if (i % 64 != 0 && i / 64 < n / 64) {
        EXPECT_EQ(p(i), p(i - 1) + 1) << "run broken at " << i;
      }
      if (i / 64 >= n / 64) {
        EXPECT_EQ(p(i), i) << "the tail moved";
      }
    }
    EXPECT_TRUE(is_permutation_of_nodes(image, n)) << n;
  }
  // Whole runs do move (4099 nodes: 64 runs).
  const RandomPermutation p(4099, 5, 1, 64);
  int64_t moved = 0;
  for (int64_t c = 0; c < 64; ++c) moved += p(c * 64) != c * 64 ? 1 : 0;
  EXPECT_GT(moved, 48);
}

class ReorderedFile : public ::testing::TestWithParam<NodeOrdering> {};

// The reordered file is the input's graph under new names: features, labels, edges and splits of node i
// are those of input node original[i], and original is a permutation.
TEST_P(ReorderedFile, HoldsTheInputGraphUnderNewNames) {
  const Communicator world = Communicator::world();
  SynthOptions s;
  s.kind = SynthKind::Rmat;
  s.num_nodes = 700;  // not a power of two: R-MAT's ids above 511 are sparse, some isolated
  s.num_edges = 2500;
  s.num_features = 3;
  s.num_classes = 4;
  const std::string name = node_ordering_name(GetParam());
  const std::string input = fixtures::synthetic_file("reorder-input-" + name + ".h5", s);
  const std::string output = fixtures::scratch_dir() + "/reordered-" + name + ".h5";
  ReorderOptions o;
  o.input = input;
  o.output = output;
  o.ordering = GetParam();
  o.part_nodes = 64;
  world.run_on(0, [&] { reorder_graph_file(o); });

  const GraphFileReader before(world, input), after(world, output);
  const int64_t n = before.meta().num_nodes, e = before.meta().num_edges;
  ASSERT_TRUE(after.has_original_ids());
  check_original_ids(after, world);
  const std::vector<int64_t> original = after.read_original_ids(0, n);
  ASSERT_TRUE(is_permutation_of_nodes(original, n));
  EXPECT_EQ(after.meta().num_edges, e);
  const std::vector<float> fa = before.read_features(0, n), fb = after.read_features(0, n);
  const std::vector<int64_t> la = before.read_labels(0, n), lb = after.read_labels(0, n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o_i = original[size_t(i)];
    EXPECT_EQ(lb[size_t(i)], la[size_t(o_i)]);
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(fb[size_t(i * 3 + j)], fa[size_t(o_i * 3 + j)]);
  }
  std::multiset<std::pair<int64_t, int64_t>> ea, eb;
  const std::vector<int64_t> pa = before.read_indptr(0, n + 1), ia = before.read_indices(0, e);
  const std::vector<int64_t> pb = after.read_indptr(0, n + 1), ib = after.read_indices(0, e);
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t k = pa[size_t(v)]; k < pa[size_t(v) + 1]; ++k) ea.emplace(ia[size_t(k)], v);
    for (int64_t k = pb[size_t(v)]; k < pb[size_t(v) + 1]; ++k)
      eb.emplace(original[size_t(ib[size_t(k)])], original[size_t(v)]);
    EXPECT_TRUE(std::is_sorted(ib.begin() + pb[size_t(v)], ib.begin() + pb[size_t(v) + 1]));
  }
  EXPECT_EQ(ea, eb);
  for (const SplitInfo& split : before.splits()) {
    std::vector<int64_t> mapped;
    for (int64_t v : after.read_split(split.name, 0, split.size)) mapped.push_back(original[size_t(v)]);
    std::vector<int64_t> ids = before.read_split(split.name, 0, split.size);
    std::sort(mapped.begin(), mapped.end());
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(mapped, ids) << split.name;
  }

  // Outputs: a row holding its node's id in the reordered file lands at the node's original id.
  const OutputOrder order = read_output_order(world, output);
  ASSERT_TRUE(order.reordered);
  const auto [begin, end] = block_range(n, world.rank(), world.size());
  BlockRows rows;
  rows.begin = begin;
  rows.width = 1;
  for (int64_t i = begin; i < end; ++i) rows.values.push_back(float(i)), rows.present.push_back(1);
  const BlockRows moved = to_output_order(world, rows, order);
  ASSERT_EQ(moved.present.size(), size_t(end - begin));
  for (int64_t v = begin; v < end; ++v) {
    ASSERT_TRUE(moved.present[size_t(v - begin)]);
    EXPECT_EQ(original[size_t(moved.values[size_t(v - begin)])], v);
  }
  EXPECT_FALSE(read_output_order(world, input).reordered);
  world.barrier();
  if (world.rank() == 0) std::remove(input.c_str()), std::remove(output.c_str());
}

// A multi-label file with edge features: node i's label row is input node original[i]'s, and each stored edge
// carries its own features (here the edge's original endpoints) to its new place.
TEST(Reorder, CarriesTheLabelMatrixAndEdgeFeatures) {
  const Communicator world = Communicator::world();
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  SynthOptions s;
  s.kind = SynthKind::Rmat;
  s.num_nodes = 300, s.num_edges = 1200, s.num_features = 2, s.num_classes = 3, s.tasks = 3;
  s.unobserved_fraction = 0.2;
  const std::string synthetic = fixtures::synthetic_file("reorder-tasks.h5", s);
  const std::string input = fixtures::scratch_dir() + "/reorder-tasks-edges.h5";
  const std::string output = fixtures::scratch_dir() + "/reorder-tasks-out.h5";
  world.run_on(0, [&] {
    const GraphFileReader r(self, synthetic);
    GraphMeta m = r.meta();
    m.num_edge_features = 2;
    const int64_t n = m.num_nodes, e = m.num_edges;
    std::map<std::string, int64_t> sizes;
    for (const SplitInfo& split : r.splits()) sizes[split.name] = split.size;
    GraphFileWriter w(self, input, m, sizes);
    const std::vector<int64_t> indptr = r.read_indptr(0, n + 1), indices = r.read_indices(0, e);
    std::vector<float> ends;
    for (int64_t v = 0; v < n; ++v)
      for (int64_t k = indptr[size_t(v)]; k < indptr[size_t(v) + 1]; ++k)
        ends.push_back(float(indices[size_t(k)])), ends.push_back(float(v));
    w.write_indptr(0, n + 1, indptr.data()), w.write_indices(0, e, indices.data());
    w.write_features(0, n, r.read_features(0, n).data());
    w.write_label_matrix(0, n, r.read_label_matrix(0, n).data());
    w.write_edge_features(0, e, ends.data());
    for (const SplitInfo& split : r.splits())
      w.write_split(split.name, 0, split.size, r.read_split(split.name, 0, split.size).data());
    w.commit();
    ReorderOptions o;
    o.input = input, o.output = output, o.ordering = NodeOrdering::Rcm;
    reorder_graph_file(o);
  });
  const GraphFileReader before(world, input), after(world, output);
  ASSERT_TRUE(after.meta().multi_label);
  ASSERT_EQ(after.meta().num_edge_features, 2);
  EXPECT_NO_THROW(validate_graph(after, world));
  const int64_t n = s.num_nodes, e = after.meta().num_edges;
  const std::vector<int64_t> original = after.read_original_ids(0, n);
  const std::vector<int8_t> ya = before.read_label_matrix(0, n), yb = after.read_label_matrix(0, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < 3; ++t)
      EXPECT_EQ(yb[size_t(i * 3 + t)], ya[size_t(original[size_t(i)] * 3 + t)]) << "node " << i;
  const std::vector<int64_t> indptr = after.read_indptr(0, n + 1), indices = after.read_indices(0, e);
  const std::vector<float> ends = after.read_edge_features(0, e);
  for (int64_t v = 0; v < n; ++v)
    for (int64_t k = indptr[size_t(v)]; k < indptr[size_t(v) + 1]; ++k) {
      EXPECT_EQ(ends[size_t(2 * k)], float(original[size_t(indices[size_t(k)])])) << "edge " << k;
      EXPECT_EQ(ends[size_t(2 * k + 1)], float(original[size_t(v)])) << "edge " << k;
    }
}

INSTANTIATE_TEST_SUITE_P(EveryOrdering, ReorderedFile,
                         ::testing::Values(NodeOrdering::Rcm, NodeOrdering::Degree, NodeOrdering::Metis),
                         [](const auto& info) { return std::string(node_ordering_name(info.param)); });

TEST(Reorder, OriginalIdsThatAreNotAPermutationAreRefused) {
  const Communicator world = Communicator::world();
  const std::string path = fixtures::scratch_dir() + "/bad-original-ids.h5";
  GraphMeta meta;
  meta.name = "bad";
  meta.num_nodes = 5;
  meta.num_features = 1;
  {
    GraphFileWriter w(world, path, meta, {});
    const std::vector<int64_t> indptr(6, 0), labels(5, -1), original{0, 1, 2, 2, 4};
    const std::vector<float> x(5, 1.0f);
    const bool root = world.rank() == 0;
    w.write_indptr(0, root ? 6 : 0, indptr.data());
    w.write_labels(0, root ? 5 : 0, labels.data());
    w.write_features(0, root ? 5 : 0, x.data());
    w.write_original_ids(0, root ? 5 : 0, original.data());
    w.commit();
  }
  try {
    const GraphFileReader reader(world, path);
    check_original_ids(reader, world);
    ADD_FAILURE() << "a repeated original id was accepted";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("/node/original_id: id 2 is listed twice"), std::string::npos)
        << e.what();
  }
  try {
    read_output_order(world, path);
    ADD_FAILURE() << "read_output_order accepted a repeated original id";
  } catch (const CollectiveError&) {
  }
  world.barrier();
  if (world.rank() == 0) std::remove(path.c_str());
}

// Fewer nodes than ranks: some ranks hold an empty block of ids, and still enter every exchange of the
// permutation check and of the move to the original order (a rank that skipped one would hang the others).
TEST(Reorder, OutputOrderWithEmptyBlocks) {
  const Communicator world = Communicator::world();
  const std::string path = fixtures::scratch_dir() + "/three-nodes.h5";
  GraphMeta meta;
  meta.name = "three";
  meta.num_nodes = 3;
  meta.num_features = 1;
  {
    GraphFileWriter w(world, path, meta, {});
    const std::vector<int64_t> indptr(4, 0), labels(3, -1), original{2, 0, 1};
    const std::vector<float> x(3, 1.0f);
    const bool root = world.rank() == 0;
    w.write_indptr(0, root ? 4 : 0, indptr.data());
    w.write_labels(0, root ? 3 : 0, labels.data());
    w.write_features(0, root ? 3 : 0, x.data());
    w.write_original_ids(0, root ? 3 : 0, original.data());
    w.commit();
  }
  const OutputOrder order = read_output_order(world, path);
  ASSERT_TRUE(order.reordered);
  const auto [begin, end] = block_range(3, world.rank(), world.size());
  BlockRows rows;
  rows.begin = begin;
  rows.width = 2;
  for (int64_t i = begin; i < end; ++i) {
    rows.values.insert(rows.values.end(), {float(i), float(10 * i)});
    rows.present.push_back(1);
  }
  const BlockRows moved = to_output_order(world, rows, order);
  const int64_t stored_of[3] = {1, 2, 0};  // original id v is stored node stored_of[v]
  ASSERT_EQ(moved.present.size(), size_t(end - begin));
  for (int64_t v = begin; v < end; ++v) {
    EXPECT_TRUE(moved.present[size_t(v - begin)]);
    EXPECT_EQ(moved.values[size_t(2 * (v - begin))], float(stored_of[v]));
    EXPECT_EQ(moved.values[size_t(2 * (v - begin) + 1)], float(10 * stored_of[v]));
  }
  world.barrier();
  if (world.rank() == 0) std::remove(path.c_str());
}
