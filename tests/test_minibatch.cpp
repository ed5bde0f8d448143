// SPDX-License-Identifier: BSD-3-Clause
// Mini-batch training on the 4D grid (docs/architecture.md §5). Runs under mpiexec with 1, 2, 4 and 8 ranks,
// on every factorization DxXxYxZ with D in {1, 2}: sampling sends nothing, the ranks' blocks together are
// exactly the scaled induced subgraph of a serial reference, the sampled aggregation is unbiased, and one
// training step's gradients equal a dense double-precision computation averaged over the replicas' samples.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <type_traits>

#include "reference/dense.hpp"
#include "support/allocation_count.hpp"
#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/models/modes/minibatch.hpp"
#include "tessera/models/train.hpp"
#include "tessera/sampling/pipeline.hpp"
#include "tessera/sampling/rank_bitmap.hpp"  // internal: both bit counts are tested

using namespace tessera;
using reference::Dense;

namespace {

const std::string& csbm_file() {
  return fixtures::small_csbm_file();
}

// The whole graph, read independently of the 3D loader: normalized adjacency (dense, double), features,
// labels, training mask.
struct SerialGraph {
  int64_t n = 0;
  Dense a_hat, x;
  std::vector<int64_t> labels;
  std::vector<uint8_t> train;
  Dense mean;  // D^-1 A: GraphSAGE's neighbour mean (the file has no self loops)
};

SerialGraph read_serial(const std::string& path) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const GraphFileReader reader(self, path);
  SerialGraph g;
  g.n = reader.meta().num_nodes;
  const GraphSlice s = reader.read_rows(0, g.n);
  // A_hat = D^-1/2 (A + I) D^-1/2 with D = in-degree + 1 (self loops added where missing).
  Dense a(g.n, g.n);
  for (int64_t v = 0; v < g.n; ++v) {
    for (int64_t k = s.adjacency.row_ptr(v); k < s.adjacency.row_ptr(v + 1); ++k)
      a(v, s.adjacency.col_idx(k)) = 1;
    a(v, v) = 1;
  }
  std::vector<double> degree(size_t(g.n), 0.0);
  for (int64_t v = 0; v < g.n; ++v)
    for (int64_t u = 0; u < g.n; ++u) degree[size_t(v)] += a(v, u);
  g.a_hat = Dense(g.n, g.n);
  for (int64_t v = 0; v < g.n; ++v)
    for (int64_t u = 0; u < g.n; ++u)
      if (a(v, u) != 0) g.a_hat(v, u) = 1.0 / std::sqrt(degree[size_t(v)] * degree[size_t(u)]);
  g.mean = Dense(g.n, g.n);
  for (int64_t v = 0; v < g.n; ++v)
    for (int64_t u = 0; u < g.n; ++u)
      if (u != v && a(v, u) != 0) g.mean(v, u) = 1.0 / (degree[size_t(v)] - 1.0);
  g.x = Dense(g.n, int64_t(s.features.extent(1)));
  for (int64_t v = 0; v < g.n; ++v)
    for (int64_t j = 0; j < g.x.cols; ++j) g.x(v, j) = s.features(v, j);
  g.labels.assign(s.labels.data(), s.labels.data() + g.n);
  g.train.assign(size_t(g.n), 0);
  for (const SplitInfo& split : reader.splits())
    if (split.name == "train")
      for (int64_t v : reader.read_split("train", 0, split.size)) g.train[size_t(v)] = 1;
  return g;
}

// op[S, S] with off-diagonal entries divided by p (op: Â, or the neighbour mean).
Dense sampled_reference(const Dense& op, const std::vector<int64_t>& s, double p) {
  Dense out(int64_t(s.size()), int64_t(s.size()));
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j) out(int64_t(i), int64_t(j)) = op(s[i], s[j]) / (i == j ? 1.0 : p);
  return out;
}

std::vector<GridShape> shapes_with_d_up_to_2(int p) {
  std::vector<GridShape> out;
  for (const GridShape& s : ProcessGrid::factorizations(p, true))
    if (s.d <= 2) out.push_back(s);
  return out;
}

Graph3D load(const ProcessGrid& grid, int layers) {
  const GraphFileReader reader(Communicator::world(), csbm_file());
  Graph3DOptions o;
  o.layers = layers;
  o.seed = 5;
  return load_graph_3d(reader, grid, o);
}

Graph3D load(const ProcessGrid& grid, int layers, Normalization normalization) {
  const GraphFileReader reader(Communicator::world(), csbm_file());
  Graph3DOptions o;
  o.layers = layers;
  o.seed = 5;
  o.normalization = normalization;
  o.transposes = false;  // as the mode loads it: the device cut makes its own
  return load_graph_3d(reader, grid, o);
}

template <class T>
std::vector<std::remove_const_t<T>> on_host(const Vector<T>& v) {
  const auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<std::remove_const_t<T>>(h.data(), h.data() + h.extent(0));
}

void expect_same_operator(const CsrSpmm<float>& got, const CsrSpmm<float>& want, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.matrix().num_rows, want.matrix().num_rows);
  EXPECT_EQ(got.matrix().num_cols, want.matrix().num_cols);
  EXPECT_EQ(on_host(got.matrix().row_ptr), on_host(want.matrix().row_ptr));
  EXPECT_EQ(on_host(got.matrix().col_idx), on_host(want.matrix().col_idx));
  EXPECT_EQ(on_host(got.matrix().values), on_host(want.matrix().values));  // the same floats, bit for bit
  EXPECT_EQ(got.scaled(), want.scaled());
}

void expect_same_batch(const DeviceBatch& got, const DeviceBatch& want) {
  ASSERT_EQ(got.graph.layers.size(), want.graph.layers.size());
  ASSERT_EQ(got.graph.blocks.size(), want.graph.blocks.size());
  for (size_t k = 0; k < want.graph.blocks.size(); ++k) {
    expect_same_operator(got.graph.blocks[k]->forward, want.graph.blocks[k]->forward,
                         "block " + std::to_string(k));
    EXPECT_EQ(got.graph.blocks[k]->has_transpose, want.graph.blocks[k]->has_transpose) << "block " << k;
    expect_same_operator(got.graph.blocks[k]->transpose, want.graph.blocks[k]->transpose,
                         "transpose " + std::to_string(k));
    EXPECT_EQ(got.graph.blocks[k]->nnz, want.graph.blocks[k]->nnz);
  }
  for (size_t l = 0; l < want.graph.layers.size(); ++l) {
    const LayerGraph &g = got.graph.layers[l], &w = want.graph.layers[l];
    EXPECT_EQ(on_host(g.output_ids), on_host(w.output_ids)) << "layer " << l;
    EXPECT_EQ(g.valid_rows, w.valid_rows);
    EXPECT_EQ(g.num_nodes, w.num_nodes);
    EXPECT_EQ(g.self != nullptr, w.self != nullptr);
  }
  EXPECT_EQ(got.graph.input.valid_rows, want.graph.input.valid_rows);
  EXPECT_EQ(on_host(got.input_ids), on_host(want.input_ids));
  const auto in_got = Kokkos::create_mirror_view_and_copy(HostSpace(), got.input);
  const auto in_want = Kokkos::create_mirror_view_and_copy(HostSpace(), want.input);
  ASSERT_EQ(in_got.extent(0), in_want.extent(0));
  ASSERT_EQ(in_got.extent(1), in_want.extent(1));
  EXPECT_TRUE(std::equal(in_got.data(), in_got.data() + in_got.span(), in_want.data()));
  EXPECT_EQ(on_host(got.labels), on_host(want.labels));
  EXPECT_EQ(on_host(got.train), on_host(want.train));
}

}  // namespace

// The device cut (kernels on the execution space: the host's threads here, a GPU on device builds) gives
// the host cut's batches bit for bit: every block and transpose (offsets, columns, weights), the self
// blocks, row ids, gathered inputs, labels and masks. Every factorization of the job, both weightings,
// a batch of 2 (most blocks empty), a middling one and the whole graph, steps of several keys; and for a
// model whose backward reads no transpose of layer 0, both leave that layer's out.
TEST(Minibatch, DeviceCutEqualsTheHostCut) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), true))
    for (Normalization norm : {Normalization::Symmetric, Normalization::Mean}) {
      const ProcessGrid grid(world, shape);
      const Graph3D g = load(grid, 3, norm);
      const int64_t n = g.layout.num_nodes();
      for (int64_t b : {int64_t(2), int64_t(57), n}) {
        SCOPED_TRACE(shape.str() + " " + normalization_name(norm) + " b " + std::to_string(b));
        const bool self = norm == Normalization::Mean;
        for (const std::vector<bool>& transposes :
             {std::vector<bool>{}, std::vector<bool>{false, true, true}}) {
          if (!transposes.empty() && b != 57) continue;
          const BatchNeeds needs{3, self, transposes};
          const MinibatchBuilder host(grid, g, b, needs);
          DeviceMinibatchBuilder device(grid, g, b, needs);
          EXPECT_GT(device.bytes(), 0);
          if (!transposes.empty()) {  // layer 0's static transpose is not kept
            const auto& a = g.adjacency[0].forward.matrix();
            const int64_t transpose_bytes = (a.num_cols + 1) * 8 +
                                            int64_t(a.col_idx.extent(0) * sizeof(SpmmColumn)) +
                                            int64_t(a.values.extent(0)) * 4;
            EXPECT_EQ(DeviceMinibatchBuilder(grid, g, b, BatchNeeds{3, self, {}}).bytes() - device.bytes(),
                      transpose_bytes);
          }
          for (int64_t step = 0; step < 3; ++step) {
            const SampleKey key{9, 1, step, grid.coords().get(Axis::D)};
            const DeviceBatch want = host.upload(host.build(key));
            expect_same_batch(device.build(key), want);
            for (size_t l = 0; l < want.graph.layers.size(); ++l) {
              const LayerGraph& layer = want.graph.layers[l];
              EXPECT_EQ(layer.adjacency->has_transpose, needs.transposed(int(l))) << "layer " << l;
              if (layer.self) {
                EXPECT_EQ(layer.self->has_transpose, needs.transposed(int(l))) << "layer " << l;
              }
            }
          }
        }
      }
    }
}

namespace {

// Splits every block of a batch into its balanced row blocks, as a host or team product does first (host
// builds: a device build's vendor products split none, and its blocks keep no buffer for them).
void balance_rows(const DeviceBatch& batch) {
  if constexpr (std::is_same<DeviceSpace, HostSpace>::value) {
    for (const auto& block : batch.graph.blocks) {
      EXPECT_GT(block->forward.num_blocks(), 0);
      if (block->has_transpose) {
        EXPECT_GT(block->transpose.num_blocks(), 0);
      }
    }
  } else {
    (void)batch;
  }
}

}  // namespace

// Both cuts write a step's arrays into buffers kept between steps (the host cut's uploads into the
// trainer's StepUploads, the device cut into its builder's): a step no larger than one before allocates
// nothing (blocks, their row splits for the products, ids, input rows, labels and mask all land in the
// buffers of the step before) and gives the batch a fresh upload gives, bit for bit.
TEST(Minibatch, StepsIntoKeptBuffersAllocateNothing) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : shapes_with_d_up_to_2(world.size())) {
    SCOPED_TRACE(shape.str());
    const ProcessGrid grid(world, shape);
    const Graph3D g = load(grid, 3, Normalization::Mean);
    const BatchNeeds needs{3, true, {}};
    const MinibatchBuilder host(grid, g, 57, needs);
    DeviceMinibatchBuilder device(grid, g, 57, needs);
    const SampleKey key{4, 0, 1, grid.coords().get(Axis::D)};
    const HostBatch batch = host.build(key);
    StepUploads kept;
    kept.restart();
    balance_rows(host.upload(batch, kept));
    balance_rows(device.build(key));
    const int64_t held = kept.bytes(), device_held = device.bytes();
    const fixtures::AllocationCount allocations;
    kept.restart();
    const DeviceBatch again = host.upload(batch, kept);
    const DeviceBatch cut_again = device.build(key);
    balance_rows(again);
    balance_rows(cut_again);
    EXPECT_EQ(allocations.count(), 0);
    EXPECT_EQ(kept.bytes(), held);
    EXPECT_EQ(device.bytes(), device_held);
    const DeviceBatch fresh = host.upload(batch);
    expect_same_batch(again, fresh);
    expect_same_batch(cut_again, fresh);
  }
}

TEST(UniformSample, SortedDistinctKeyedAndDifferentPerReplica) {
  const std::vector<int64_t> a = uniform_vertex_sample(1000, 100, {7, 2, 3, 0});
  EXPECT_EQ(a, uniform_vertex_sample(1000, 100, {7, 2, 3, 0}));
  EXPECT_NE(a, uniform_vertex_sample(1000, 100, {7, 2, 3, 1}));  // replica d = 1
  EXPECT_NE(a, uniform_vertex_sample(1000, 100, {7, 2, 4, 0}));  // next step
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), a.size());
  EXPECT_EQ(uniform_vertex_sample(5, 5, {1, 0, 0, 0}), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_THROW(uniform_vertex_sample(5, 6, {}), Error);
  // Uniform: every vertex of 50 is drawn about 20000 * 10 / 50 = 4000 times (binomial sd ~ 57).
  std::vector<int> hits(50, 0);
  for (int64_t step = 0; step < 20000; ++step)
    for (int64_t v : uniform_vertex_sample(50, 10, {3, 0, step, 0})) ++hits[size_t(v)];
  for (int v = 0; v < 50; ++v) EXPECT_NEAR(hits[size_t(v)], 4000, 6 * 57) << "vertex " << v;
}

// A block's sampled rows are the sample vertices whose position lies in its range, in position order:
// against a plain filter of every (position, vertex) pair, for ranges that are empty, partial and whole.
TEST(UniformSample, BlockSlicesAreThePositionsInRange) {
  const std::vector<int64_t> sample = uniform_vertex_sample(500, 60, {4, 1, 2, 0});
  std::vector<int64_t> positions;
  for (int64_t v : sample) positions.push_back((v * 37 + 11) % 500);  // a permutation of 0..499
  const SampleOrder order = order_sample(sample, positions);
  EXPECT_TRUE(std::is_sorted(order.positions.begin(), order.positions.end()));
  for (auto [begin, end] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 500}, {0, 0}, {100, 250}, {499, 500}, {250, 250}, {3, 4}}) {
    std::map<int64_t, int64_t> expected;  // local position -> vertex, in order
    for (size_t k = 0; k < sample.size(); ++k)
      if (positions[k] >= begin && positions[k] < end) expected[positions[k] - begin] = sample[k];
    const SampledIndex got = sampled_positions(order, begin, end);
    ASSERT_EQ(got.local.size(), expected.size()) << begin << ".." << end;
    ASSERT_EQ(got.ids.size(), expected.size());
    size_t k = 0;
    for (const auto& [local, vertex] : expected) {
      EXPECT_EQ(got.local[k], local);
      EXPECT_EQ(got.ids[k], vertex);
      ++k;
    }
  }
}

// Orderings and induced blocks take one of two paths by how dense the keys are (a rank bitmap where it pays,
// a sort where the keys are few and far apart): both against the same hand-worked answers.
TEST(UniformSample, OrderingIsBySortedPositionOnBothPaths) {
  const SampleOrder dense = order_sample({3, 9, 1}, {70, 5, 77});
  EXPECT_EQ(dense.positions, (std::vector<int64_t>{5, 70, 77}));
  EXPECT_EQ(dense.ids, (std::vector<int64_t>{9, 3, 1}));
  const int64_t far = int64_t(1) << 40;
  const SampleOrder sparse = order_sample({3, 9, 1}, {far, 5, 77});
  EXPECT_EQ(sparse.positions, (std::vector<int64_t>{5, 77, far}));
  EXPECT_EQ(sparse.ids, (std::vector<int64_t>{9, 1, 3}));
  // A few vertices of many: sorted, not through a bitmap of every vertex.
  const std::vector<int64_t> few = uniform_vertex_sample(int64_t(1) << 20, 3, {2, 0, 0, 0});
  EXPECT_TRUE(std::is_sorted(few.begin(), few.end()));
  EXPECT_EQ(std::set<int64_t>(few.begin(), few.end()).size(), 3u);
  EXPECT_LT(few.back(), int64_t(1) << 20);
}

TEST(InducedBlock, OffDiagonalEntriesScaledOnBothPaths) {
  // Block rows 0..2, columns 0..3: row 0 = {0: 1, 1: 2, 3: 3}, row 1 = {2: 4}, row 2 = {1: 5, 2: 6, 3: 7}.
  const std::vector<int64_t> row_ptr{0, 3, 4, 7};
  const std::vector<int32_t> col_idx{0, 1, 3, 2, 1, 2, 3};
  const std::vector<float> values{1, 2, 3, 4, 5, 6, 7};
  const std::vector<double> row_scale{0.5, 1, 2}, col_scale{1, 3, 5, 7};
  const float s = 0.25f;
  // Vertex ids close together (bitmap) and far apart (sort); row 2 and column 1 are the same vertex.
  for (const std::vector<int64_t>& id : {std::vector<int64_t>{1, 2, 3}, {5, int64_t(1) << 40, 7}}) {
    const SampledIndex rows{{0, 2}, {id[0], id[1]}}, cols{{1, 3}, {id[1], id[2]}};
    const HostCsr valued =
        induced_block(row_ptr.data(), col_idx.data(), {values.data(), nullptr, nullptr}, 4, rows, cols, s);
    EXPECT_EQ(valued.row_ptr, (std::vector<int64_t>{0, 2, 4}));
    EXPECT_EQ(valued.col_idx, (std::vector<int64_t>{0, 1, 0, 1}));
    EXPECT_EQ(valued.values, (std::vector<float>{2 * s, 3 * s, 5, 7 * s}));
    const HostCsr scaled = induced_block(row_ptr.data(), col_idx.data(),
                                         {nullptr, row_scale.data(), col_scale.data()}, 4, rows, cols, s);
    EXPECT_EQ(scaled.col_idx, valued.col_idx);
    EXPECT_EQ(scaled.values, (std::vector<float>{float(0.5 * 3) * s, float(0.5 * 7) * s, float(2.0 * 3),
                                                 float(2.0 * 7) * s}));
  }
}

// The cut counts bits with POPCNT where the CPU has it and in software elsewhere (the induced-block tests
// run whichever this CPU takes): both counts against one bit at a time, on sets that cross word boundaries.
TEST(RankBitmap, HardwareAndSoftwareCountsAgree) {
  std::mt19937_64 random(7);
  for (uint64_t word :
       {uint64_t(0), ~uint64_t(0), uint64_t(1) << 63, uint64_t(random()), uint64_t(random())}) {
    int64_t one_by_one = 0;
    for (int bit = 0; bit < 64; ++bit) one_by_one += int64_t((word >> bit) & 1u);
    EXPECT_EQ(sampling_impl::bit_count<false>(word), one_by_one);
    EXPECT_EQ(sampling_impl::bit_count<true>(word), one_by_one);
  }
  const int64_t n = 1000;
  std::vector<int64_t> members;
  for (int64_t x = n - 1; x >= 0; --x)
    if (random() % 3 == 0 || x == 63 || x == 64) members.push_back(x);
  const sampling_impl::RankBitmap set(n, members);
  int64_t below = 0;
  for (int64_t x = 0; x < n; ++x) {
    ASSERT_EQ(set.rank<false>(x), below) << x;
    ASSERT_EQ(set.rank<true>(x), below) << x;
    below += set.contains(x);
  }
  EXPECT_EQ(below, int64_t(members.size()));
}

// Neither cut communicates: the byte and call counters stay where they were.
TEST(Minibatch, SamplingSendsNoBytes) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : shapes_with_d_up_to_2(world.size())) {
    SCOPED_TRACE(shape.str());
    const ProcessGrid grid(world, shape);
    const Graph3D g = load(grid, 3);
    const MinibatchBuilder builder(grid, g, 64, BatchNeeds{3, false, {}});
    DeviceMinibatchBuilder device(grid, g, 64, BatchNeeds{3, false, {}});
    const CommStats before = world.stats();
    const HostBatch host = builder.build({1, 0, 0, grid.coords().get(Axis::D)});
    const DeviceBatch batch = builder.upload(host);
    const DeviceBatch cut_on_device = device.build({1, 0, 0, grid.coords().get(Axis::D)});
    for (int k = 0; k < int(Collective::Count); ++k) {
      EXPECT_EQ(world.stats().total(Collective(k)).bytes, before.total(Collective(k)).bytes);
      EXPECT_EQ(world.stats().total(Collective(k)).calls, before.total(Collective(k)).calls);
    }
    EXPECT_EQ(batch.graph.layers.size(), 3u);
    EXPECT_EQ(cut_on_device.graph.layers.size(), 3u);
  }
}

// Every rank sends (row vertex, column vertex, value) of each layer's block to rank 0, tagged with its
// replica; blocks replicated over b must agree, and their union must be the reference Â[S, S] / p.
TEST(Minibatch, UnionOfBlocksIsTheScaledInducedSubgraph) {
  const Communicator world = Communicator::world();
  const SerialGraph serial = read_serial(csbm_file());
  for (const GridShape& shape : shapes_with_d_up_to_2(world.size())) {
    SCOPED_TRACE(shape.str());
    const ProcessGrid grid(world, shape);
    const int layers = 3;
    const Graph3D g = load(grid, layers);
    const int64_t b = 97;
    const MinibatchBuilder builder(grid, g, b, BatchNeeds{layers, false, {}});
    const int d = grid.coords().get(Axis::D);
    const HostBatch host = builder.build({11, 1, 2, d});
    std::vector<double> mine;  // d, layer, row vertex, column vertex, value
    for (int l = 0; l < layers; ++l) {
      const HostCsr& a = host.forward[size_t(l)];
      const HostCsr& t = host.transpose[size_t(l)];
      ASSERT_EQ(t.col_idx.size(), a.col_idx.size());
      for (int64_t r = 0; r < a.num_rows; ++r)
        for (int64_t k = a.row_ptr[size_t(r)]; k < a.row_ptr[size_t(r + 1)]; ++k)
          mine.insert(mine.end(), {double(d), double(l), double(host.rows[size_t(l)].ids[size_t(r)]),
                                   double(host.cols[size_t(l)].ids[size_t(a.col_idx[size_t(k)])]),
                                   double(a.values[size_t(k)])});
    }
    std::vector<std::vector<double>> to_root(size_t(world.size()));
    to_root[0] = mine;
    const std::vector<double> all = exchange_buckets(world, to_root, "test");
    if (world.rank() != 0) continue;
    const double p = pair_inclusion_probability(serial.n, b);
    for (int rep = 0; rep < shape.d; ++rep)
      for (int l = 0; l < layers; ++l) {
        const std::vector<int64_t> s = uniform_vertex_sample(serial.n, b, {11, 1, 2, rep});
        const Dense expected = sampled_reference(serial.a_hat, s, p);
        std::map<std::pair<int64_t, int64_t>, double> got;
        for (size_t k = 0; k < all.size(); k += 5) {
          if (int(all[k]) != rep || int(all[k + 1]) != l) continue;
          const auto key = std::make_pair(int64_t(all[k + 2]), int64_t(all[k + 3]));
          if (got.count(key)) {
            EXPECT_EQ(got[key], all[k + 4]) << "replicated blocks disagree";
          }
          got[key] = all[k + 4];
        }
        int64_t nonzeros = 0;
        for (size_t i = 0; i < s.size(); ++i)
          for (size_t j = 0; j < s.size(); ++j) {
            const double want = expected(int64_t(i), int64_t(j));
            if (want == 0) continue;
            ++nonzeros;
            const auto it = got.find({s[i], s[j]});
            ASSERT_NE(it, got.end()) << "missing entry " << s[i] << "," << s[j] << " layer " << l;
            EXPECT_NEAR(it->second, want, 1e-6 * want);
          }
        EXPECT_EQ(int64_t(got.size()), nonzeros) << "replica " << rep << " layer " << l;
      }
  }
}

// E[ (Â_S / p X_S)[v] | v in S ] = (Â X)[v]: averaged over many samples containing v, the aggregation
// through the library's sampled block converges to the full one (computed densely). Tolerance: 5 standard
// errors of the mean, per entry.
TEST(Minibatch, SampledAggregationIsUnbiased) {
  const Communicator world = Communicator::world();
  if (world.size() != 1) GTEST_SKIP() << "serial statistics: runs in the 1-rank job";
  const SerialGraph g = read_serial(csbm_file());
  const ProcessGrid grid(world, GridShape{1, 1, 1, 1});
  const Graph3D g3 = load(grid, 2);
  const int64_t b = 60;
  const MinibatchBuilder builder(grid, g3, b, BatchNeeds{2, false, {}});
  const Dense full = reference::matmul(g.a_hat, g.x);
  const std::vector<int64_t> watched = {0, 17, 150, 299};
  std::vector<Dense> sum(watched.size(), Dense(1, g.x.cols)), sum_sq = sum;
  std::vector<int64_t> seen(watched.size(), 0);
  for (int64_t step = 0; step < 6000; ++step) {
    const HostBatch batch = builder.build({2, 0, step, 0});
    const HostCsr& a = batch.forward[0];
    const SampledIndex &rows = batch.rows[0], &cols = batch.cols[0];
    for (size_t r = 0; r < rows.ids.size(); ++r) {
      const auto w = size_t(std::find(watched.begin(), watched.end(), rows.ids[r]) - watched.begin());
      if (w == watched.size()) continue;
      ++seen[w];
      for (int64_t j = 0; j < g.x.cols; ++j) {
        double agg = 0;
        for (int64_t k = a.row_ptr[r]; k < a.row_ptr[r + 1]; ++k)
          agg += double(a.values[size_t(k)]) * g.x(cols.ids[size_t(a.col_idx[size_t(k)])], j);
        sum[w](0, j) += agg;
        sum_sq[w](0, j) += agg * agg;
      }
    }
  }
  for (size_t w = 0; w < watched.size(); ++w) {
    ASSERT_GT(seen[w], 800);  // about 6000 * 60 / 301 = 1196
    for (int64_t j = 0; j < g.x.cols; ++j) {
      const double k = double(seen[w]), mean = sum[w](0, j) / k;
      const double sd = std::sqrt(std::max(0.0, sum_sq[w](0, j) / k - mean * mean));
      EXPECT_NEAR(mean, full(watched[w], j), 5 * sd / std::sqrt(k) + 1e-6)
          << "vertex " << watched[w] << " feature " << j;
    }
  }
}

namespace {

// Gradients of one step of a 2-layer GCN or GraphSAGE (no dropout, no norm) on the sample s, in double:
// Z1 = A_S X_S W0 (+ X_S R0) + b0, H1 = relu(Z1), Z2 = A_S H1 W1 (+ H1 R1) + b1, loss = mean CE over the
// training vertices of s; A_S = op[S, S] / p off the diagonal. In the trainer's parameter order (GCN: W0,
// b0, W1, b1; SAGE: W0, R0, b0, W1, R1, b1), row-major.
std::vector<double> dense_step_gradients(const SerialGraph& g, bool sage, const std::vector<int64_t>& s,
                                         double p, const std::vector<Dense>& w) {
  using namespace reference;
  const int64_t m = int64_t(s.size());
  const Dense a = sampled_reference(sage ? g.mean : g.a_hat, s, p);
  Dense x(m, g.x.cols);
  std::vector<int64_t> labels(static_cast<size_t>(m));
  std::vector<uint8_t> mask(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < g.x.cols; ++j) x(i, j) = g.x(s[size_t(i)], j);
    labels[size_t(i)] = g.labels[size_t(s[size_t(i)])];
    mask[size_t(i)] = g.train[size_t(s[size_t(i)])];
  }
  const Dense &w0 = w[0], &b0 = w[sage ? 2 : 1], &w1 = w[sage ? 3 : 2], &b1 = w[sage ? 5 : 3];
  auto add_bias = [](Dense z, const Dense& b) {
    for (int64_t i = 0; i < z.rows; ++i)
      for (int64_t j = 0; j < z.cols; ++j) z(i, j) += b(0, j);
    return z;
  };
  auto column_sums = [](const Dense& z) {
    Dense out(1, z.cols);
    for (int64_t i = 0; i < z.rows; ++i)
      for (int64_t j = 0; j < z.cols; ++j) out(0, j) += z(i, j);
    return out;
  };
  const Dense ax = matmul(a, x);
  Dense z1 = add_bias(matmul(ax, w0), b0);
  if (sage) z1 = add(z1, matmul(x, w[1]));
  Dense h1 = z1;
  for (double& v : h1.a) v = std::max(v, 0.0);
  const Dense ah1 = matmul(a, h1);
  Dense z2 = add_bias(matmul(ah1, w1), b1);
  if (sage) z2 = add(z2, matmul(h1, w[4]));
  Dense g2;
  softmax_cross_entropy(z2, labels, mask, &g2);
  Dense gz1 = matmul(transpose(a), matmul(g2, transpose(w1)));
  if (sage) gz1 = add(gz1, matmul(g2, transpose(w[4])));
  for (size_t k = 0; k < gz1.a.size(); ++k) gz1.a[k] = z1.a[k] > 0 ? gz1.a[k] : 0.0;
  std::vector<Dense> grads = {matmul(transpose(ax), gz1), column_sums(gz1), matmul(transpose(ah1), g2),
                              column_sums(g2)};
  if (sage)
    grads = {grads[0], matmul(transpose(x), gz1), grads[1], grads[2], matmul(transpose(h1), g2), grads[3]};
  std::vector<double> out;
  for (const Dense& d : grads) out.insert(out.end(), d.a.begin(), d.a.end());
  return out;
}

TrainOptions minibatch_options(const GridShape& shape, int64_t batch) {
  TrainOptions o;
  o.data = csbm_file();
  o.mode = TrainMode::Minibatch;
  o.grid.shape = shape;
  o.minibatch.batch_size = batch;
  o.outputs.quiet = true;
  return o;
}

}  // namespace

// One training step with lr = 0 (weights stay the initial ones): the trainer's gradients, averaged over
// the D replicas, equal the dense double-precision gradients of each replica's sample, averaged. GraphSAGE's
// root term uses the self blocks cut from each sample.
TEST(Minibatch, GradientsAreTheReplicaAverageOfTheDenseReference) {
  const Communicator world = Communicator::world();
  const SerialGraph g = read_serial(csbm_file());
  const int64_t hidden = 6, classes = 5;
  // b = 4: blocks of a sample so small that some ranks' blocks are empty (every rank must still enter every
  // collective of the step).
  for (int64_t b : {int64_t(120), int64_t(4)})
    for (const GridShape& shape : shapes_with_d_up_to_2(world.size()))
      for (bool sage : {false, true}) {
        SCOPED_TRACE(shape.str() + (sage ? " sage" : " gcn") + " b " + std::to_string(b));
        TrainOptions o = minibatch_options(shape, b);
        o.minibatch.steps_per_epoch = 1;
        o.trainer.epochs = 1;
        o.model.kind = sage ? ModelKind::Sage : ModelKind::Gcn;
        o.model.layers = 2;
        o.model.hidden = hidden;
        o.model.dropout = o.model.input_dropout = 0;
        o.model.seed = 4;
        o.trainer.optimizer.lr = 0;
        o.trainer.optimizer.weight_decay = 0;
        o.trainer.keep_last_step = true;
        const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world);
        // final_weights: the initial weights, in parameter order.
        const std::vector<float>& w = r.final_weights;
        std::vector<std::pair<int64_t, int64_t>> shapes = {
            {g.x.cols, hidden}, {1, hidden}, {hidden, classes}, {1, classes}};
        if (sage)
          shapes = {{g.x.cols, hidden}, {g.x.cols, hidden}, {1, hidden},
                    {hidden, classes},  {hidden, classes},  {1, classes}};
        std::vector<Dense> weights;
        size_t at = 0;
        for (const auto& [rows, cols] : shapes) {
          Dense d(rows, cols);
          for (size_t k = 0; k < d.a.size(); ++k) d.a[k] = w[at++];
          weights.push_back(d);
        }
        ASSERT_EQ(at, w.size());
        const double p = pair_inclusion_probability(g.n, b);
        std::vector<double> expected(w.size(), 0.0);
        std::vector<std::vector<double>> per_replica;
        for (int d = 0; d < shape.d; ++d) {
          per_replica.push_back(
              dense_step_gradients(g, sage, uniform_vertex_sample(g.n, b, {4, 0, 0, d}), p, weights));
          for (size_t k = 0; k < w.size(); ++k) expected[k] += per_replica.back()[k] / double(shape.d);
        }
        ASSERT_EQ(r.last_gradients.size(), expected.size());
        double diff = 0, top = 0;
        for (size_t k = 0; k < expected.size(); ++k) {
          diff = std::max(diff, std::abs(double(r.last_gradients[k]) - expected[k]));
          top = std::max(top, std::abs(expected[k]));
        }
        if (top == 0) {  // a tiny sample without training nodes: nothing to learn, all gradients zero
          EXPECT_EQ(diff, 0.0);
          continue;
        }
        EXPECT_LT(diff / top, 1e-5);
        if (shape.d == 2 && b > 4) {  // the replicas' samples, and so their gradients, really differ
          double apart = 0;
          for (size_t k = 0; k < expected.size(); ++k)
            apart = std::max(apart, std::abs(per_replica[0][k] - per_replica[1][k]));
          EXPECT_GT(apart / top, 1e-2);
        }
      }
}

// Issue 14's hang: a 3-layer model on batches of 4 vertices, where most ranks' blocks are empty, on every
// factorization of the job (every D too). It must finish, with the same finite losses on every rank.
TEST(Minibatch, TinyBatchesFinishOnEveryFactorization) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), true)) {
    SCOPED_TRACE(shape.str());
    TrainOptions o = minibatch_options(shape, 4);
    o.minibatch.steps_per_epoch = 2;
    o.trainer.epochs = 2;
    o.model.layers = 3;
    o.model.hidden = 4;
    const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world);
    ASSERT_EQ(r.history.size(), 2u);
    for (const EpochRecord& e : r.history) {
      EXPECT_TRUE(std::isfinite(e.loss));
      EXPECT_EQ(all_reduce_value(world, e.loss, ReduceOp::Max, "test"),
                all_reduce_value(world, e.loss, ReduceOp::Min, "test"));
    }
  }
}

// --recompute-aggregation on sampled blocks whose sizes change every step (the shared scratch grows and is
// reused): the same losses and weights, bit for bit, on every factorization, tiny batches included.
TEST(Minibatch, RecomputedAggregationChangesNoBit) {
  const Communicator world = Communicator::world();
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), true))
    for (int64_t batch : {4, 120}) {
      SCOPED_TRACE(shape.str() + " batch " + std::to_string(batch));
      TrainOptions o = minibatch_options(shape, batch);
      o.minibatch.steps_per_epoch = 3;
      o.trainer.epochs = 2;
      o.model.layers = 3;
      const fixtures::RunWithWeights kept = fixtures::run_training_with_weights(o, world);
      o.compute.recompute_aggregation = true;
      const fixtures::RunWithWeights recomputed = fixtures::run_training_with_weights(o, world);
      ASSERT_EQ(recomputed.history.size(), kept.history.size());
      for (size_t e = 0; e < kept.history.size(); ++e)
        EXPECT_EQ(recomputed.history[e].loss, kept.history[e].loss);
      EXPECT_EQ(recomputed.final_weights, kept.final_weights);
    }
}

TEST(BatchPipeline, BackgroundBuildsTheSameBatchesAndPassesErrorsOn) {
  for (bool background : {false, true}) {
    BatchPipeline<std::vector<int64_t>> pipeline(background);
    for (int64_t step = 0; step < 5; ++step) {
      pipeline.request([step] { return uniform_vertex_sample(100, 10, {1, 0, step, 0}); });
      EXPECT_EQ(pipeline.take(), uniform_vertex_sample(100, 10, {1, 0, step, 0}));
    }
    EXPECT_GE(pipeline.build_seconds(), 0.0);
    pipeline.request([]() -> std::vector<int64_t> { fail("sampler failed"); });
    EXPECT_THROW(pipeline.take(), Error);
  }
}

// The sampler thread changes when a batch is built, not what it holds: same losses and weights.
TEST(Minibatch, SamplerThreadComputesTheSameRun) {
  const Communicator world = Communicator::world();
  const int p = world.size();
  TrainOptions o = minibatch_options(p % 2 == 0 ? GridShape{2, 1, 1, p / 2} : GridShape{}, 0);
  o.minibatch.batch_fraction = 0.4;
  o.trainer.epochs = 3;
  o.model.layers = 2;
  o.model.hidden = 8;
  o.model.norm = NormKind::Batch;
  const fixtures::RunWithWeights threaded = fixtures::run_training_with_weights(o, world);
  o.minibatch.sampler_thread = false;
  const fixtures::RunWithWeights inline_run = fixtures::run_training_with_weights(o, world);
  ASSERT_EQ(threaded.history.size(), 3u);
  for (size_t e = 0; e < 3; ++e) EXPECT_EQ(threaded.history[e].loss, inline_run.history[e].loss);
  EXPECT_EQ(threaded.final_weights, inline_run.final_weights);
}

// A run stopped after 3 epochs and resumed from its checkpoint continues bit for bit: the samples are keyed
// by (seed, epoch, step, replica), the checkpoint holds weights, Adam's moments and BatchNorm's statistics.
TEST(Minibatch, ResumeContinuesBitForBit) {
  const Communicator world = Communicator::world();
  const int p = world.size(), d = p % 2 == 0 ? 2 : 1;
  TrainOptions o = minibatch_options(GridShape{d, 1, 1, p / d}, 0);
  o.minibatch.batch_fraction = 0.4;
  o.model.layers = 2;
  o.model.hidden = 8;
  o.model.norm = NormKind::Batch;
  o.model.kind = ModelKind::Sage;
  o.trainer.epochs = 6;
  const fixtures::RunWithWeights straight = fixtures::run_training_with_weights(o, world);
  o.checkpoint.dir = fixtures::scratch_dir();
  o.trainer.epochs = 3;
  run_training(o, world);
  o.trainer.epochs = 6;
  o.checkpoint.resume = true;
  const fixtures::RunWithWeights resumed = fixtures::run_training_with_weights(o, world);
  ASSERT_EQ(resumed.history.size(), 3u);
  EXPECT_EQ(resumed.history.front().epoch, 4);
  for (size_t e = 0; e < 3; ++e) EXPECT_EQ(resumed.history[e].loss, straight.history[e + 3].loss);
  EXPECT_EQ(resumed.final_weights, straight.final_weights);
}

// Where batches are cut changes nothing a run computes: losses and weights bit for bit, GraphSAGE with
// batch norm, two replicas where the job has an even number of ranks.
TEST(Minibatch, DeviceCutTrainsTheSameRun) {
  const Communicator world = Communicator::world();
  const int p = world.size();
  TrainOptions o = minibatch_options(p % 2 == 0 ? GridShape{2, 1, 1, p / 2} : GridShape{}, 0);
  o.minibatch.batch_fraction = 0.3;
  o.trainer.epochs = 2;
  o.model.kind = ModelKind::Sage;
  o.model.layers = 2;
  o.model.hidden = 8;
  o.model.norm = NormKind::Batch;
  o.minibatch.sample_on = SamplePlace::Host;
  const fixtures::RunWithWeights host = fixtures::run_training_with_weights(o, world);
  o.minibatch.sample_on = SamplePlace::Device;
  const fixtures::RunWithWeights device = fixtures::run_training_with_weights(o, world);
  ASSERT_EQ(device.history.size(), 2u);
  for (size_t e = 0; e < 2; ++e) EXPECT_EQ(device.history[e].loss, host.history[e].loss);
  EXPECT_EQ(device.final_weights, host.final_weights);
}
