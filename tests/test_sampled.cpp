// SPDX-License-Identifier: BSD-3-Clause
// Partition-parallel sampled training (docs/architecture.md §6) on 1, 2, 4 and 8 ranks: partitions, the
// renumbered distributed load, owner-side neighbour sampling against a whole-graph serial sampler, one step's
// gradients against a dense double-precision reference, the cache changing no bit of training, and the
// external controller surviving agents that answer, hang, crash or print garbage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "reference/attention.hpp"
#include "reference/dense.hpp"
#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/partition.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/nn/model.hpp"
#include "tessera/models/train.hpp"
#include "tessera/prefetch/remote_features.hpp"
#include "tessera/sampling/neighbor.hpp"

using namespace tessera;
using reference::Dense;

namespace {

const Communicator& world() {
  static const Communicator w = Communicator::world();
  return w;
}

// The fixture graph partitioned by METIS into one part per rank, stored as "test-<P>" (once per run).
const std::string& partitioned_file() {
  static std::string name;
  if (name.empty()) {
    const std::string& path = fixtures::small_csbm_file();
    name = "test-" + std::to_string(world().size());
    world().run_on(0, [&] { fixtures::write_metis_partition(path, name, world().size()); });
  }
  return name;
}

// The whole file graph on this rank (serial read).
struct WholeGraph {
  int64_t n = 0, f = 0, classes = 0;
  std::vector<std::vector<int64_t>> in;  // in-neighbours per node, file ids, no self loops
  std::vector<float> x;
  std::vector<int64_t> labels, train;
};

WholeGraph read_whole(const std::string& path) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const GraphFileReader reader(self, path);
  WholeGraph g;
  g.n = reader.meta().num_nodes;
  g.f = reader.meta().num_features;
  g.classes = reader.meta().num_classes;
  const std::vector<int64_t> ptr = reader.read_indptr(0, g.n + 1), idx = reader.read_indices(0, ptr.back());
  g.in.resize(size_t(g.n));
  for (int64_t v = 0; v < g.n; ++v)
    for (int64_t k = ptr[size_t(v)]; k < ptr[size_t(v + 1)]; ++k)
      if (idx[size_t(k)] != v) g.in[size_t(v)].push_back(idx[size_t(k)]);
  g.x = reader.read_features(0, g.n);
  g.labels = reader.read_labels(0, g.n);
  for (const SplitInfo& s : reader.splits())
    if (s.name == "train") g.train = reader.read_split("train", 0, s.size);
  return g;
}

// The renumbered id of every file id, gathered from every rank's owned file ids (-1: nobody owns it).
std::vector<int64_t> new_ids(const PartitionedGraph& g) {
  std::vector<int64_t> counts(size_t(world().size())), file_of_new(size_t(g.num_nodes));
  for (int r = 0; r < world().size(); ++r)
    counts[size_t(r)] = g.owner_begin[size_t(r + 1)] - g.owner_begin[size_t(r)];
  all_gather_v(world(), g.file_id.data(), counts, file_of_new.data(), "test");
  std::vector<int64_t> new_of_file(size_t(g.num_nodes), -1);
  for (int64_t v = 0; v < g.num_nodes; ++v) new_of_file[size_t(file_of_new[size_t(v)])] = v;
  return new_of_file;
}

// An R-MAT graph file (8 undirected edges drawn per node; its hubs are its lowest ids). Collective.
std::string rmat_file(const std::string& name, int64_t nodes, int64_t features, uint64_t seed) {
  SynthOptions o;
  o.kind = SynthKind::Rmat;
  o.num_nodes = nodes;
  o.num_edges = 8 * nodes;
  o.num_features = features;
  o.seed = seed;
  return fixtures::synthetic_file(name, o);
}

TrainOptions sampled_options(const std::string& partition) {
  TrainOptions o;
  o.data = fixtures::small_csbm_file();
  o.mode = TrainMode::Sampled;
  o.sampled.partition = partition;
  o.sampled.fanouts = {4, 3};
  o.sampled.batch_size = 6;
  o.sampled.prefetch.fraction = 0.5;
  o.sampled.prefetch.interval = 2;
  o.model.layers = 2;
  o.model.hidden = 8;
  o.model.seed = 3;
  o.trainer.epochs = 2;
  o.outputs.quiet = true;
  return o;
}

}  // namespace

TEST(Partition, MetisBalancesAndCutsLessThanRandom) {
  const std::string& path = fixtures::small_csbm_file();  // collective
  world().run_on(0, [&] {
    for (int64_t parts : {2, 3, 4}) {
      const std::vector<int32_t> metis = compute_partition(path, parts, PartitionMethod::Metis, 1);
      const std::vector<int32_t> random = compute_partition(path, parts, PartitionMethod::Random, 1);
      const PartitionReport m = evaluate_partition(path, metis, parts),
                            r = evaluate_partition(path, random, parts);
      EXPECT_LE(m.node_balance, 1.10) << parts;
      EXPECT_LE(m.train_balance, 1.25) << parts;  // 30 training nodes: one node is 3-4% of a part
      EXPECT_LE(m.edge_balance, 1.10) << parts;
      EXPECT_LE(r.node_balance, 1.0 + double(parts) / 301.0) << parts;
      EXPECT_LT(m.cut_edges, r.cut_edges) << parts;
      for (int32_t p : metis) ASSERT_TRUE(p >= 0 && p < parts);
    }
  });
}

// On an R-MAT graph the hubs' edges must be spread too: a part's rank holds its nodes' neighbour lists.
TEST(Partition, MetisBalancesEdgesOfASkewedGraph) {
  const std::string path = rmat_file("rmat-metis.h5", 4096, 2, 3);  // collective
  world().run_on(0, [&] {
    for (int64_t parts : {4, 8}) {
      const PartitionReport m =
          evaluate_partition(path, compute_partition(path, parts, PartitionMethod::Metis, 1), parts);
      EXPECT_LE(m.node_balance, 1.10) << parts;
      EXPECT_LE(m.train_balance, 1.10) << parts;
      EXPECT_LE(m.edge_balance, 1.10) << parts;
    }
  });
}

TEST(Partition, RenumberingMakesContiguousOrderedRanges) {
  const std::vector<int32_t> part = {2, 0, 1, 0, 2, 2, 1};
  const Renumbering r = renumber_by_part(part, 3);
  EXPECT_EQ(r.begin, (std::vector<int64_t>{0, 2, 4, 7}));
  EXPECT_EQ(r.new_of_old, (std::vector<int64_t>{4, 0, 2, 1, 5, 6, 3}));
}

// The distributed numbering against the serial one on the whole partition: every rank's blocks, and lookups
// of lists of every length (rank 0 asks nothing, others ask every node, in reverse, with repeats).
TEST(Partition, BlockRenumberingMatchesTheSerialRenumbering) {
  const std::string& path = fixtures::small_csbm_file();
  const int64_t n = GraphFileReader(world(), path).meta().num_nodes;
  const int p = world().size();
  const std::vector<int32_t> part = read_partition(world(), path, partitioned_file(), p);
  const Renumbering expect = renumber_by_part(part, p);
  const BlockRenumbering got(world(), path, partitioned_file(), n);
  EXPECT_EQ(got.begin(), expect.begin);
  const auto [b, e] = block_range(n, world().rank(), p);
  for (int64_t v = b; v < e; ++v) EXPECT_EQ(got.of_block_node(v), expect.new_of_old[size_t(v)]) << v;
  std::vector<int64_t> ask;
  if (world().rank() > 0)
    for (int64_t v = n - 1; v >= 0; --v) ask.insert(ask.end(), {v, (v * 7) % n});
  const std::vector<int64_t> answer = got.lookup(ask);
  ASSERT_EQ(answer.size(), ask.size());
  for (size_t k = 0; k < ask.size(); ++k) EXPECT_EQ(answer[k], expect.new_of_old[size_t(ask[k])]) << ask[k];
  EXPECT_THROW(got.of_block_node(e), Error);
}

TEST(Partition, BadInputsNameTheFileOnEveryRank) {
  const std::string& path = fixtures::small_csbm_file();
  partitioned_file();
  auto message = [&](auto&& fn) {
    try {
      fn();
    } catch (const CollectiveError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      message([&] { read_partition(world(), path, "absent", world().size()); }).find("no partition 'absent'"),
      std::string::npos);
  EXPECT_NE(message([&] {
              read_partition(world(), path, partitioned_file(), world().size() + 1);
            }).find("parts but the job runs on"),
            std::string::npos);
  EXPECT_NE(message([&] { load_partitioned(world(), path, "absent"); }).find(path), std::string::npos);
  world().run_on(0, [&] {
    EXPECT_THROW(compute_partition(path, 0, PartitionMethod::Metis, 1), Error);
    EXPECT_THROW(compute_partition(path, 302, PartitionMethod::Random, 1), Error);
    EXPECT_THROW(write_partition(path, "a/b", {0}, 1, PartitionMethod::Random, PartitionReport{}), Error);
  });
}

// Every owned row is the file's row renumbered (neighbours, label, features); the halo and the degrees are
// the whole graph's; the training split arrived whole, at its owners.
void expect_rows_of_file(const PartitionedGraph& g, const std::string& path) {
  const WholeGraph w = read_whole(path);
  const std::vector<int64_t> new_of_file = new_ids(g);
  for (int64_t v : new_of_file) ASSERT_GE(v, 0);  // a permutation
  for (int64_t i = 0; i < g.count; ++i) {
    const int64_t file = g.file_id[size_t(i)];
    std::vector<int64_t> expect;
    for (int64_t u : w.in[size_t(file)]) expect.push_back(new_of_file[size_t(u)]);
    std::sort(expect.begin(), expect.end());
    const std::vector<int64_t> got(g.col.begin() + g.row_ptr[size_t(i)],
                                   g.col.begin() + g.row_ptr[size_t(i + 1)]);
    EXPECT_EQ(got, expect) << "node " << file;
    EXPECT_EQ(g.labels[size_t(i)], w.labels[size_t(file)]);
    for (int64_t j = 0; j < w.f; ++j) EXPECT_EQ(g.features[size_t(i * w.f + j)], w.x[size_t(file * w.f + j)]);
  }
  // Degrees of owned and halo nodes only (asked of the owners), equal to the whole graph's; the halo is every
  // non-owned in-neighbour, once, sorted.
  std::vector<int64_t> file_of_new(size_t(w.n));
  for (int64_t v = 0; v < w.n; ++v) file_of_new[size_t(new_of_file[size_t(v)])] = v;
  std::set<int64_t> halo;
  for (int64_t u : g.col)
    if (!g.owns(u)) halo.insert(u);
  EXPECT_EQ(g.halo, std::vector<int64_t>(halo.begin(), halo.end()));
  ASSERT_EQ(g.halo_degree.size(), g.halo.size());
  for (int64_t i = 0; i < g.count; ++i)
    EXPECT_EQ(g.degree_of(g.first + i), int64_t(w.in[size_t(file_of_new[size_t(g.first + i)])].size()));
  for (int64_t u : g.halo) EXPECT_EQ(g.degree_of(u), int64_t(w.in[size_t(file_of_new[size_t(u)])].size()));
  EXPECT_EQ(all_reduce_value(world(), int64_t(g.train.size()), ReduceOp::Sum, "test"),
            int64_t(w.train.size()));
  for (int64_t v : g.train) EXPECT_TRUE(g.owns(v));
}

TEST(Loader, OwnedRowsAreTheFilesRowsRenumbered) {
  const std::string& path = fixtures::small_csbm_file();
  expect_rows_of_file(load_partitioned(world(), path, partitioned_file()), path);
}

// A star whose hub (node 0) holds every edge weighs more than two ranks' shares of 8, so a rank reads no
// rows at all: a stored partition still loads every row, and "block" still gives every rank a node.
TEST(Loader, ARankThatReadsNoRowsStillLoads) {
  const Communicator& comm = world();
  const int64_t n = 64;
  GraphMeta meta;
  meta.num_nodes = n, meta.num_edges = n - 1, meta.num_features = 1, meta.num_classes = 2;
  const std::string path = fixtures::scratch_dir() + "/star.h5";
  {
    GraphFileWriter writer(comm, path, meta, {{"train", n}});
    std::vector<int64_t> indptr(size_t(n + 1), n - 1), indices, labels, train;
    indptr[0] = 0;
    std::vector<float> x;
    for (int64_t v = 0; v < n; ++v) {
      if (v > 0) indices.push_back(v);
      x.push_back(float(v)), labels.push_back(v % 2), train.push_back(v);
    }
    const bool mine = comm.rank() == 0;  // rank 0 writes it all
    writer.write_indptr(0, mine ? n + 1 : 0, indptr.data());
    writer.write_indices(0, mine ? n - 1 : 0, indices.data());
    writer.write_features(0, mine ? n : 0, x.data());
    writer.write_labels(0, mine ? n : 0, labels.data());
    writer.write_split("train", 0, mine ? n : 0, train.data());
    writer.commit();
  }
  const std::string name = "random-" + std::to_string(comm.size());
  comm.run_on(0, [&] {
    const std::vector<int32_t> part = compute_partition(path, comm.size(), PartitionMethod::Random, 2);
    write_partition(path, name, part, comm.size(), PartitionMethod::Random,
                    evaluate_partition(path, part, comm.size()));
  });
  const std::vector<int64_t> reads = balanced_row_begins(GraphFileReader(comm, path), comm);
  bool empty_read = false;
  for (int r = 0; r < comm.size(); ++r) empty_read = empty_read || reads[size_t(r)] == reads[size_t(r + 1)];
  EXPECT_EQ(empty_read, comm.size() == 8);  // the case this test is for, on 8 ranks
  expect_rows_of_file(load_partitioned(comm, path, name), path);
  const PartitionedGraph block = load_partitioned(comm, path, "block");
  expect_rows_of_file(block, path);
  EXPECT_GE(block.count, 1);
}

// "block" on an R-MAT graph, whose hubs are its lowest ids: every rank owns a non-empty range of file rows
// as they are in the file (no renumbering), and holds about the same bytes of features and neighbour
// lists — within one row's worth of an even share, where equal row counts gave rank 0 of 8 many times the
// mean rank's edges.
TEST(Loader, BlockOwnsContiguousFileRowsOfAboutEqualBytes) {
  const std::string path = rmat_file("rmat-block.h5", 512, 6, 5);
  const PartitionedGraph g = load_partitioned(world(), path, "block");
  const WholeGraph w = read_whole(path);
  const int p = world().size();
  ASSERT_EQ(g.owner_begin.size(), size_t(p + 1));
  EXPECT_EQ(g.owner_begin.front(), 0);
  EXPECT_EQ(g.owner_begin.back(), w.n);
  for (int r = 0; r < p; ++r) EXPECT_LT(g.owner_begin[size_t(r)], g.owner_begin[size_t(r + 1)]) << r;
  double total = 0, widest = 0, mine = 0;  // the loader's default costs: 8 B per edge, 4F + 17 B per row
  const auto row_cost = [&](int64_t v) {
    return 8.0 * double(w.in[size_t(v)].size()) + 4.0 * double(w.f) + 17;
  };
  for (int64_t v = 0; v < w.n; ++v) total += row_cost(v), widest = std::max(widest, row_cost(v));
  for (int64_t i = 0; i < g.count; ++i) {
    const int64_t file = g.first + i;
    ASSERT_EQ(g.file_id[size_t(i)], file);
    const std::vector<int64_t> got(g.col.begin() + g.row_ptr[size_t(i)],
                                   g.col.begin() + g.row_ptr[size_t(i + 1)]);
    std::vector<int64_t> expect = w.in[size_t(file)];
    std::sort(expect.begin(), expect.end());
    EXPECT_EQ(got, expect) << "node " << file;
    EXPECT_EQ(g.labels[size_t(i)], w.labels[size_t(file)]);
    for (int64_t j = 0; j < w.f; ++j) EXPECT_EQ(g.features[size_t(i * w.f + j)], w.x[size_t(file * w.f + j)]);
    mine += row_cost(file);
  }
  // Self loops count in the file's offsets, not here: one more edge per row at most.
  EXPECT_LE(mine, total / p + widest + 8.0 * double(g.count)) << "rank " << world().rank();
  if (p > 1) {  // the hubs' share under equal row counts, for scale
    double first_block = 0;
    for (int64_t v = 0; v < block_range(w.n, 0, p).second; ++v) first_block += row_cost(v);
    if (world().rank() == 0) {
      EXPECT_LT(mine, first_block);
    }
  }
}

// The cache's initial fill in rounds: with one row per rank per round every rank with a halo takes many
// rounds and ranks with fewer slots enter the last ones asking nothing, down to a rank with no cache at all
// (rank 0 in the second case); every slot must hold its node's row from the file, as with the default (one
// round).
TEST(Prefetch, FillInRoundsInstallsEachSlotsRow) {
  const std::string& path = fixtures::small_csbm_file();
  const PartitionedGraph g = load_partitioned(world(), path, partitioned_file());
  const WholeGraph w = read_whole(path);
  const std::vector<int64_t> new_of_file = new_ids(g);
  std::vector<int64_t> file_of_new(size_t(w.n));
  for (int64_t v = 0; v < w.n; ++v) file_of_new[size_t(new_of_file[size_t(v)])] = v;
  const RemoteFeatures fetch(world(), g);
  for (const bool empty_rank0 : {false, true})
    for (const int64_t round_bytes : {int64_t(1), RemoteFeatures::kFillRoundBytes}) {
      SCOPED_TRACE(std::to_string(round_bytes) + (empty_rank0 ? ", rank 0 without a cache" : ""));
      PrefetchOptions o;
      o.fraction = empty_rank0 && world().rank() == 0 ? 0.0 : 0.5;
      FeatureCache cache(g.halo, g.halo_degree, g.num_features, o);
      FetchStats stats;
      fetch.fill(cache, stats, round_bytes);
      EXPECT_EQ(stats.fetched_rows, cache.capacity());
      EXPECT_EQ(cache.capacity(), int64_t(double(g.halo.size()) * o.fraction));
      for (int64_t s = 0; s < cache.capacity(); ++s) {
        const int64_t file = file_of_new[size_t(cache.slot_nodes()[size_t(s)])];
        for (int64_t j = 0; j < w.f; ++j)
          ASSERT_EQ(cache.row(s)[j], w.x[size_t(file * w.f + j)]) << "slot " << s;
      }
    }
}

TEST(Sampling, AnEpochsStepsCoverItsLabeledTrainingNodesOnce) {
  const int64_t first = 100;
  std::vector<int64_t> train, labels(50, 1);
  for (int64_t v = first; v < first + 50; v += 2) train.push_back(v);
  labels[4] = -1;  // node 104: in the split, unlabeled
  EpochSeeds cached(train, labels, first, 9);
  std::vector<int64_t> previous_order;
  for (const int64_t epoch : {0, 1, 0, 3}) {  // revisited, as a resumed run does
    for (const int64_t steps : {int64_t(1), int64_t(4), int64_t(24), int64_t(30)}) {
      std::vector<int64_t> order;
      for (int64_t step = 0; step < steps; ++step) {
        const std::vector<int64_t> seeds = step_seeds(train, labels, first, 9, epoch, step, steps);
        EXPECT_EQ(cached.seeds(epoch, step, steps), seeds);
        EXPECT_LE(std::abs(int64_t(seeds.size()) - 24 / steps), 1);
        order.insert(order.end(), seeds.begin(), seeds.end());
      }
      std::vector<int64_t> sorted = order, expect = train;
      std::sort(sorted.begin(), sorted.end());
      expect.erase(std::find(expect.begin(), expect.end(), 104));
      EXPECT_EQ(sorted, expect);
      if (steps == 1 && epoch == 1) {
        EXPECT_NE(order, previous_order);  // a new shuffle each epoch
      }
      if (steps == 1) previous_order = order;
    }
  }
}

TEST(SampledTraining, TheWorkerThreadRunsUnlessItWouldShareARanksOneCore) {
  std::string why;
  // 2 ranks of one thread on 2 CPUs: the worker would take its time from the step.
  EXPECT_FALSE(uses_step_thread(StepThread::Auto, 2, 2, 2, &why));
  EXPECT_EQ(why, "auto: 2 ranks' 2 threads fill the node's 2 CPUs, one a rank");
  EXPECT_TRUE(uses_step_thread(StepThread::Auto, 2, 4, 2, &why));  // one free CPU per rank
  EXPECT_EQ(why, "auto: 2 ranks' 2 threads leave a CPU per rank free of the node's 4 CPUs");
  EXPECT_TRUE(uses_step_thread(StepThread::Auto, 2, 4, 4, &why));  // 2 threads a rank: the worker shares them
  EXPECT_EQ(why, "auto: 2 ranks' 4 threads on the node's 4 CPUs, more than one a rank");
  EXPECT_TRUE(uses_step_thread(StepThread::Auto, 4, 64, 64));  // Slurm's -c 16
  EXPECT_FALSE(uses_step_thread(StepThread::Auto, 8, 8, 8));
  EXPECT_FALSE(uses_step_thread(StepThread::Auto, 8, 4, 8));  // oversubscribed
  EXPECT_TRUE(uses_step_thread(StepThread::Auto, 1, 8, 7));
  EXPECT_TRUE(uses_step_thread(StepThread::On, 2, 2, 2, &why));  // as asked, whatever the cores
  EXPECT_EQ(why, "as asked");
  EXPECT_FALSE(uses_step_thread(StepThread::Off, 1, 64, 1));
}

TEST(Sampling, DrawsFromBatchedWordsAreFloydsDraws) {
  const CounterRng rng = neighbor_rng(NeighborKey{3, 1, 4}, 2);
  std::vector<int64_t> expect(32), got(32), scratch(32);
  for (int64_t node : {int64_t(0), int64_t(12345), int64_t(1) << 40})
    // Lists of up to 64 neighbours (their positions drawn as the bits of a word) and longer ones.
    for (int64_t degree :
         {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 16, 17, 20, 31, 42, 53, 63, 64, 65, 97, 300})
      for (int64_t fanout = 1; fanout < std::min<int64_t>(degree, 32); ++fanout) {
        draw_positions(rng, node, degree, fanout, expect.data());
        std::vector<uint64_t> a(static_cast<size_t>(fanout), uint64_t(node)), b;
        std::vector<uint64_t> words(static_cast<size_t>(fanout));
        for (int64_t j = degree - fanout; j < degree; ++j) b.push_back(uint64_t(j));
        rng.below_words(a.data(), b.data(), a.size(), words.data());
        draw_positions_from(words.data(), degree, fanout, scratch.data(), got.data());
        for (int64_t q = 0; q < fanout; ++q)
          ASSERT_EQ(got[size_t(q)], expect[size_t(q)])
              << "node " << node << ", " << fanout << " of " << degree;
        // Floyd's output: distinct positions of [0, degree), increasing.
        for (int64_t q = 0; q < fanout; ++q) {
          ASSERT_GE(got[size_t(q)], q == 0 ? 0 : got[size_t(q - 1)] + 1);
          ASSERT_LT(got[size_t(q)], degree);
        }
      }
}

// Seeds of this rank and of others: each block and degree as a sampler of the whole graph draws them.
TEST(Sampling, OwnersDrawWhatAWholeGraphSamplerDraws) {
  const std::string& path = fixtures::small_csbm_file();
  const PartitionedGraph g = load_partitioned(world(), path, partitioned_file());
  const WholeGraph w = read_whole(path);
  const std::vector<int64_t> new_of_file = new_ids(g);
  // The whole graph in new ids, neighbour lists sorted as the loader sorts them.
  std::vector<std::vector<int64_t>> in(size_t(w.n));
  for (int64_t v = 0; v < w.n; ++v) {
    for (int64_t u : w.in[size_t(v)]) in[size_t(new_of_file[size_t(v)])].push_back(new_of_file[size_t(u)]);
    std::sort(in[size_t(new_of_file[size_t(v)])].begin(), in[size_t(new_of_file[size_t(v)])].end());
  }
  const std::vector<int> fanouts = {3, 5, 2};
  const NeighborSampler sampler(world(), g, fanouts, 11);
  for (int64_t step = 0; step < 3; ++step) {
    // Many of a rank's nodes or few (step 2); a node named twice (step 1).
    std::vector<int64_t> seeds;
    for (int64_t i = step; i < g.count; i += step == 2 ? 37 : 7) seeds.push_back(g.first + i);
    if (step == 1 && !seeds.empty()) seeds.push_back(seeds.front());
    // and nodes of other ranks, as a link's endpoints are (their degrees come with their owners' lists)
    for (int64_t v = 3 * step; v < w.n; v += 11)
      if (!g.owns(v)) seeds.push_back(v);
    const std::vector<SampledBlock> got = sampler.sample(seeds, 2, step);
    const NeighborKey key{11, 2, step};
    const std::vector<SampledBlock> expect =
        build_blocks(seeds, 3, [&](int layer, int64_t v, std::vector<int64_t>& out) {
          sample_neighbors(in[size_t(v)].data(), int64_t(in[size_t(v)].size()), fanouts[size_t(layer)], key,
                           layer, v, out);
        });
    ASSERT_EQ(got.size(), 3u);
    for (size_t l = 0; l < 3; ++l) {
      EXPECT_EQ(got[l].num_dst, expect[l].num_dst);
      EXPECT_EQ(got[l].src, expect[l].src);
      EXPECT_EQ(got[l].row_ptr, expect[l].row_ptr);
      EXPECT_EQ(got[l].col, expect[l].col);
      // Each source's in-degree, also of nodes two hops from every node of this rank (sent with the sample).
      ASSERT_EQ(got[l].src_degree.size(), got[l].src.size());
      for (size_t k = 0; k < got[l].src.size(); ++k)
        EXPECT_EQ(got[l].src_degree[k], int64_t(in[size_t(got[l].src[k])].size()))
            << "node " << got[l].src[k];
      // Every sampled neighbour is a real in-neighbour, each once, and the fanout holds.
      for (int64_t i = 0; i < got[l].num_dst; ++i) {
        const int64_t v = got[l].src[size_t(i)];
        const std::vector<int64_t>& nbrs = in[size_t(v)];
        std::set<int64_t> seen;
        for (int64_t e = got[l].row_ptr[size_t(i)]; e < got[l].row_ptr[size_t(i + 1)]; ++e) {
          const int64_t u = got[l].src[size_t(got[l].col[size_t(e)])];
          EXPECT_TRUE(std::binary_search(nbrs.begin(), nbrs.end(), u)) << u << " is no in-neighbour of " << v;
          EXPECT_TRUE(seen.insert(u).second);
        }
        EXPECT_EQ(int64_t(seen.size()), std::min<int64_t>(fanouts[l], int64_t(nbrs.size())));
      }
    }
    for (size_t l = 0; l + 1 < 3; ++l) {  // layer l's outputs are layer l + 1's inputs
      EXPECT_EQ(got[l].num_dst, int64_t(got[l + 1].src.size()));
      EXPECT_TRUE(std::equal(got[l + 1].src.begin(), got[l + 1].src.end(), got[l].src.begin()));
    }
    EXPECT_EQ(std::vector<int64_t>(got[2].src.begin(), got[2].src.begin() + int64_t(seeds.size())), seeds);
  }
}

TEST(Sampling, ARepeatedSeedKeepsItsPlaceOnEveryRankThatRepeatsOne) {
  const PartitionedGraph g = load_partitioned(world(), fixtures::small_csbm_file(), partitioned_file());
  const NeighborSampler sampler(world(), g, {3, 5}, 11);
  // Rank 0 alone names its first node twice: the others must not wait on it in a collective.
  std::vector<int64_t> seeds = {g.first};
  if (world().rank() == 0) seeds.push_back(g.first);
  const std::vector<SampledBlock> got = sampler.sample(seeds, 0, 0);
  const SampledBlock& top = got.back();
  ASSERT_EQ(top.num_dst, int64_t(seeds.size()));
  EXPECT_EQ(std::vector<int64_t>(top.src.begin(), top.src.begin() + top.num_dst), seeds);
  if (seeds.size() == 2) {  // the same draws, the same columns (the first place of each neighbour)
    const std::vector<int64_t> first(top.col.begin() + top.row_ptr[0], top.col.begin() + top.row_ptr[1]);
    const std::vector<int64_t> second(top.col.begin() + top.row_ptr[1], top.col.begin() + top.row_ptr[2]);
    EXPECT_EQ(first, second);
  }
}

namespace {

// One step of a 2-layer model on the whole graph in double precision: the mean cross-entropy over `seeds`
// (file ids) and every parameter's gradient, in the model's parameter order.
std::vector<double> dense_gradients(const WholeGraph& w, ModelKind kind, const std::vector<Dense>& params,
                                    const std::vector<int64_t>& seeds) {
  using namespace reference;
  const int64_t n = w.n;
  Dense a(n, n), x(n, w.f);
  for (int64_t v = 0; v < n; ++v) {
    const double dv = double(w.in[size_t(v)].size());
    if (kind == ModelKind::Gcn) a(v, v) = 1.0 / (dv + 1.0);
    for (int64_t u : w.in[size_t(v)])
      a(v, u) = kind == ModelKind::Gcn ? 1.0 / std::sqrt((dv + 1.0) * (double(w.in[size_t(u)].size()) + 1.0))
                                       : 1.0 / dv;
    for (int64_t j = 0; j < w.f; ++j) x(v, j) = w.x[size_t(v * w.f + j)];
  }
  const bool sage = kind == ModelKind::Sage;
  // parameters: GCN [W0, b0, W1, b1]; SAGE [W0, R0, b0, W1, R1, b1]
  const Dense& w0 = params[0];
  const Dense& r0 = sage ? params[1] : params[0];
  const Dense& b0 = params[sage ? 2 : 1];
  const Dense& w1 = params[sage ? 3 : 2];
  const Dense& r1 = sage ? params[4] : params[0];
  const Dense& b1 = params[sage ? 5 : 3];
  auto add_bias = [](Dense m, const Dense& b) {
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) m(i, j) += b(0, j);
    return m;
  };
  auto column_sums = [](const Dense& m) {
    Dense out(1, m.cols);
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) out(0, j) += m(i, j);
    return out;
  };
  const Dense ax = matmul(a, x);
  Dense pre = add_bias(matmul(ax, w0), b0);
  if (sage) pre = add(pre, matmul(x, r0));
  Dense h = pre;
  for (double& v : h.a) v = std::max(v, 0.0);
  const Dense ah = matmul(a, h);
  Dense z = add_bias(matmul(ah, w1), b1);
  if (sage) z = add(z, matmul(h, r1));
  std::vector<uint8_t> mask(size_t(n), 0);
  for (int64_t v : seeds) mask[size_t(v)] = 1;
  Dense g;
  softmax_cross_entropy(z, w.labels, mask, &g);
  const Dense gw1 = matmul(transpose(ah), g), gb1 = column_sums(g);
  Dense gh = matmul(transpose(a), matmul(g, transpose(w1)));
  if (sage) gh = add(gh, matmul(g, transpose(r1)));
  for (size_t k = 0; k < gh.a.size(); ++k) gh.a[k] *= pre.a[k] > 0 ? 1.0 : 0.0;
  const Dense gw0 = matmul(transpose(ax), gh), gb0 = column_sums(gh);
  std::vector<Dense> grads =
      sage ? std::vector<Dense>{gw0, matmul(transpose(x), gh), gb0, gw1, matmul(transpose(h), g), gb1}
           : std::vector<Dense>{gw0, gb0, gw1, gb1};
  std::vector<double> out;
  for (const Dense& d : grads) out.insert(out.end(), d.a.begin(), d.a.end());
  return out;
}

// The same step of a 2-layer GAT (2 concatenated heads, ELU, then 2 averaged heads): parameters [W, a_src,
// a_dst, b] per layer.
std::vector<double> dense_gat_gradients(const WholeGraph& w, const std::vector<Dense>& params,
                                        const std::vector<int64_t>& seeds) {
  using namespace reference;
  const int64_t n = w.n;
  GatSpec first, second;
  first.mask = Dense(n, n);
  for (int64_t v = 0; v < n; ++v) {
    first.mask(v, v) = 1;
    for (int64_t u : w.in[size_t(v)]) first.mask(v, u) = 1;
  }
  second.mask = first.mask;
  first.heads = 2, first.act = Act::Elu;
  second.heads = 2, second.concat = false;
  Dense x(n, w.f);
  for (size_t k = 0; k < x.a.size(); ++k) x.a[k] = w.x[k];
  const GatWeights p0{params[0], params[1], params[2], params[3]},
      p1{params[4], params[5], params[6], params[7]};
  GatTape t0, t1;
  const Dense z = gat_forward(second, p1, gat_forward(first, p0, x, t0), t1);
  std::vector<uint8_t> mask(size_t(n), 0);
  for (int64_t v : seeds) mask[size_t(v)] = 1;
  Dense g;
  softmax_cross_entropy(z, w.labels, mask, &g);
  const GatGrads g1 = gat_backward(second, p1, t1, g);
  const GatGrads g0 = gat_backward(first, p0, t0, g1.x);
  std::vector<double> out;
  for (const Dense* d :
       {&g0.w, &g0.att_src, &g0.att_dst, &g0.bias, &g1.w, &g1.att_src, &g1.att_dst, &g1.bias})
    out.insert(out.end(), d->a.begin(), d->a.end());
  return out;
}

}  // namespace

// Keeping every neighbour makes the blocks exact, so one step on P ranks must give the gradient of the mean
// loss over all ranks' seeds on the whole graph (each rank's first step takes all its training nodes here).
// With 11 features, 8 hidden columns transform first at layer 0 and 16 aggregate first, which builds no
// transpose of the input layer's block.
TEST(SampledTraining, OneStepMatchesADenseReferenceOnTheWholeGraph) {
  const WholeGraph w = read_whole(fixtures::small_csbm_file());
  for (const auto& [kind, hidden] :
       {std::pair{ModelKind::Gcn, 8}, std::pair{ModelKind::Sage, 8}, std::pair{ModelKind::Gcn, 16},
        std::pair{ModelKind::Sage, 16}, std::pair{ModelKind::Gat, 4}}) {
    TrainOptions o = sampled_options(partitioned_file());
    o.model.kind = kind;
    o.model.hidden = hidden;
    if (kind == ModelKind::Gat) o.model.heads = 2, o.model.output_heads = 2;
    o.model.dropout = o.model.input_dropout = 0;
    o.sampled.fanouts = {-1, -1};
    o.sampled.batch_size = 1000;
    o.trainer.epochs = 1;
    o.trainer.keep_last_step = true;
    const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world());

    ModelConfig c = o.model;
    c.in = w.f;
    c.out = w.classes;
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    const ProcessGrid alone(self, GridShape{});
    const std::unique_ptr<Sequential> initial = build_model(c, alone, RunOptions{}, false);
    std::vector<Dense> params;
    for (const ParameterRef& ref : initial->parameters()) {
      const Parameter* p = ref.param;
      const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), p->value);
      const int64_t cols = p->cols, rows = int64_t(host.extent(0)) / cols;
      Dense d(rows, cols);
      for (size_t k = 0; k < host.extent(0); ++k) d.a[k] = host(k);
      params.push_back(d);
    }
    std::vector<int64_t> seeds;
    for (int64_t v : w.train)
      if (w.labels[size_t(v)] >= 0) seeds.push_back(v);
    const std::vector<double> expect = kind == ModelKind::Gat ? dense_gat_gradients(w, params, seeds)
                                                              : dense_gradients(w, kind, params, seeds);
    ASSERT_EQ(r.last_gradients.size(), expect.size());
    double worst = 0, scale = 1e-12;
    for (size_t k = 0; k < expect.size(); ++k) {
      worst = std::max(worst, std::abs(double(r.last_gradients[k]) - expect[k]));
      scale = std::max(scale, std::abs(expect[k]));
    }
    EXPECT_LT(worst / scale, 1e-4) << model_kind_name(kind) << " " << hidden << " hidden on "
                                   << world().size() << " ranks";
  }
}

// A training step builds a block's transposes only where the model's backward reads them: with 11 features,
// 8 hidden columns transform first at layer 0 (whose weight gradient reads A^T), 16 aggregate first (no
// transpose at layer 0); layer 1 computes an input gradient. Steps built on the host and, on one rank, in
// kernels.
TEST(SampledTraining, StepsBuildOnlyTheTransposesTheModelReads) {
  const PartitionedGraph parts = load_partitioned(world(), fixtures::small_csbm_file(), partitioned_file());
  const ProcessGrid grid(world(), GridShape{world().size(), 1, 1, 1});
  std::vector<SamplePlace> places{SamplePlace::Host};
  if (world().size() == 1) places.push_back(SamplePlace::Device);
  for (SamplePlace place : places)
    for (int64_t hidden : {8, 16}) {
      SCOPED_TRACE(std::to_string(hidden) + " hidden, steps on the " +
                   (place == SamplePlace::Host ? "host" : "device"));
      ModelConfig c;
      c.kind = ModelKind::Sage;
      c.layers = 2;
      c.in = parts.num_features;
      c.hidden = hidden;
      c.out = parts.num_classes;
      const std::unique_ptr<Sequential> model = build_model(c, grid, RunOptions{}, false);
      SampledOptions o;
      o.fanouts = {4, 3};
      o.batch_size = 6;
      o.thread = StepThread::Off;
      o.sample_on = place;
      SampledSource source(parts, grid, world(), o, *model);
      const GraphBatch& views = *source.batch(0, 0).graph;
      ASSERT_EQ(views.layers.size(), 2u);
      for (size_t l = 0; l < 2; ++l) {
        const bool expected = l == 1 || hidden == 8;
        EXPECT_EQ(views.layers[l].adjacency->has_transpose, expected) << "layer " << l;
        ASSERT_NE(views.layers[l].self, nullptr);
        EXPECT_EQ(views.layers[l].self->has_transpose, expected) << "layer " << l;
        if (expected) {
          EXPECT_EQ(views.layers[l].adjacency->transpose.matrix().num_rows,
                    views.layers[l].adjacency->forward.matrix().num_cols);
        }
      }
    }
}

// The cache decides where a row comes from, never what it holds: every policy (and the worker thread on or
// off) must train bit for bit the same.
TEST(SampledTraining, TheCacheChangesNoBit) {
  TrainOptions o = sampled_options(partitioned_file());
  o.sampled.prefetch.policy = PrefetchPolicy::None;
  o.sampled.prefetch.alpha = 0.3;
  o.trainer.epochs =
      6;  // at least 6 steps on 8 ranks: rows must age past the threshold before an eviction step
  const fixtures::RunWithWeights none = fixtures::run_training_with_weights(o, world());
  ASSERT_TRUE(none.prefetch.has_value());
  EXPECT_EQ(none.prefetch->cache_hits, 0);
  EXPECT_EQ(none.prefetch->fetched_rows, none.prefetch->remote_rows);
  for (PrefetchPolicy policy : {PrefetchPolicy::Static, PrefetchPolicy::Periodic, PrefetchPolicy::Adaptive}) {
    for (StepThread thread : {StepThread::On, StepThread::Off}) {
      o.sampled.prefetch.policy = policy;
      o.sampled.thread = thread;
      const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world());
      ASSERT_TRUE(r.prefetch.has_value());
      ASSERT_EQ(r.history.size(), none.history.size());
      for (size_t e = 0; e < r.history.size(); ++e) EXPECT_EQ(r.history[e].loss, none.history[e].loss);
      EXPECT_EQ(r.final_weights, none.final_weights) << prefetch_policy_name(policy);
      EXPECT_EQ(r.prefetch->remote_rows, none.prefetch->remote_rows);
      // Misses are fetched; refills ride along, once if they were missed too.
      EXPECT_GE(r.prefetch->fetched_rows, r.prefetch->remote_rows - r.prefetch->cache_hits);
      EXPECT_LE(r.prefetch->fetched_rows,
                r.prefetch->remote_rows - r.prefetch->cache_hits + r.prefetch->evictions);
      if (world().size() > 1) {
        EXPECT_GT(r.prefetch->cache_hits, 0) << prefetch_policy_name(policy);
      }
      if (world().size() > 1 && policy == PrefetchPolicy::Periodic) {
        EXPECT_GT(r.prefetch->evictions, 0);
      }
      if (policy == PrefetchPolicy::Static) {
        EXPECT_EQ(r.prefetch->evictions, 0);
      }
    }
  }
}

// Ranks with one training node or none (the four-node graph, half of it training nodes: on 4 ranks each rank
// owns one node, two of them no training node) enter every step's collectives with the others, the step
// counters' all-reduce among them (a block per graph layer on every rank, empty or not), and the epoch
// records' blocks chain layer to layer. More ranks than nodes are refused at the load.
TEST(SampledTraining, RanksWithoutSeedsStepWithTheOthers) {
  if (world().size() > 4) GTEST_SKIP() << "4 nodes over " << world().size() << " ranks";
  TrainOptions o = sampled_options("");
  o.data = fixtures::four_node_file("four_sampled.h5");
  o.sampled.partition = "block";
  o.sampled.batch_size = 1;
  const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(r.history.size(), 2u);
  for (const EpochRecord& e : r.history) {
    EXPECT_TRUE(std::isfinite(e.loss));
    const nlohmann::json& blocks = e.metrics.at("blocks");
    ASSERT_EQ(blocks.size(), 2u);
    EXPECT_EQ(blocks[0].at("dst").get<double>(), blocks[1].at("src").get<double>());
    EXPECT_LE(blocks[1].at("dst").get<double>(), 1.0);
  }
}

// Agents that answer, hang, crash or print garbage: the run always finishes with the same training, and a
// broken agent's fallback to periodic eviction is reported.
TEST(SampledTraining, ExternalAgentsNeverStopTheRun) {
  TrainOptions o = sampled_options(partitioned_file());
  o.sampled.prefetch.policy = PrefetchPolicy::None;
  o.trainer.epochs = 30;
  const fixtures::RunWithWeights reference = fixtures::run_training_with_weights(o, world());
  struct Agent {
    const char* name;
    std::string command;
    double timeout;
    bool falls_back;
  };
  const std::vector<Agent> agents = {
      {"answers", "while read line; do echo '{\"evict\": true}'; done", 30, false},
      {"hangs", "sleep 600", 0.01, true},
      {"crashes", "exit 3", 30, true},
      {"garbage", "while read line; do echo 'evict, please'; done", 30, true},
  };
  for (const Agent& a : agents) {
    o.sampled.prefetch.policy = PrefetchPolicy::External;
    o.sampled.prefetch.agent = a.command;
    o.sampled.prefetch.agent_timeout_s = a.timeout;
    testing::internal::CaptureStderr();
    const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world());
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(r.final_weights, reference.final_weights) << a.name;
    const bool fell_back = log.find("falling back to periodic") != std::string::npos;
    // Every rank runs its own agent (on one rank too, with an empty cache) and reports its own fallback.
    EXPECT_EQ(fell_back, a.falls_back) << a.name << log;
    if (!a.falls_back && world().size() > 1) {
      EXPECT_GT(r.prefetch->evictions, 0) << a.name;
    }
  }
}

// The sampled mode resumes bit for bit too: seeds and neighbourhoods are keyed by (seed, epoch, step), and
// the cache decides where rows come from, never what a step computes.
TEST(SampledTraining, ResumeContinuesBitForBit) {
  TrainOptions o = sampled_options(partitioned_file());
  o.model.norm = NormKind::Batch;
  o.trainer.epochs = 6;
  const fixtures::RunWithWeights straight = fixtures::run_training_with_weights(o, world());
  o.checkpoint.dir = fixtures::scratch_dir();
  o.trainer.epochs = 3;
  run_training(o, world());
  o.trainer.epochs = 6;
  o.checkpoint.resume = true;
  const fixtures::RunWithWeights resumed = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(resumed.history.size(), 3u);
  EXPECT_EQ(resumed.history.front().epoch, 4);
  for (size_t e = 0; e < 3; ++e) EXPECT_EQ(resumed.history[e].loss, straight.history[e + 3].loss);
  EXPECT_EQ(resumed.final_weights, straight.final_weights);
}
