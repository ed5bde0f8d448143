// SPDX-License-Identifier: BSD-3-Clause
// bf16 feature storage in the sampled mode: a row held, fetched and cached in bf16 reads back as the fp32 row
// rounded once to bf16, so a run with bf16 features must equal, bit for bit, an fp32 run on a file whose
// features were rounded so beforehand (the reference: rounding applied to the file, not the library's
// storage). And half the bytes: fetches move half of fp32's, a cache of a given size holds twice the rows. A
// graph file may hold its features in bf16 (schema version 3): every mode reads it as the rounded fp32 file.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/models/train.hpp"
#include "tessera/prefetch/remote_features.hpp"

using namespace tessera;

namespace {

const Communicator& world() {
  static const Communicator w = Communicator::world();
  return w;
}

// The small CSBM fixture with a METIS partition of one part per rank (name returned).
std::string partition_of(const std::string& path) {
  const std::string name = "dtype-" + std::to_string(world().size());
  world().run_on(0, [&] { fixtures::write_metis_partition(path, name, world().size()); });
  return name;
}

struct Files {
  std::string original, rounded, partition;
};

const Files& files() {
  static Files f;
  if (f.original.empty()) {
    f.original = fixtures::small_csbm_file();
    f.partition = partition_of(f.original);
    f.rounded = fixtures::rounded_features_copy(f.original, "csbm-rounded.h5");
  }
  return f;
}

TrainOptions sampled_options() {
  TrainOptions o;
  o.mode = TrainMode::Sampled;
  o.sampled.partition = files().partition;
  o.sampled.fanouts = {4, 3};
  o.sampled.batch_size = 6;
  o.sampled.prefetch.fraction = 0.5;
  o.sampled.prefetch.interval = 2;
  o.sampled.prefetch.alpha = 0.3;
  o.normalize_features = false;  // rounding comes after row normalization, the file's rounding before
  o.model.layers = 2;
  o.model.hidden = 8;
  o.model.seed = 3;
  o.trainer.epochs = 6;
  o.outputs.quiet = true;
  return o;
}

// The rounding is not vacuous: the fixture's features are not bf16 values, and fp32 runs on the two files
// differ.
TEST(FeatureDtype, TheRoundedFileTrainsDifferently) {
  TrainOptions o = sampled_options();
  o.data = files().original;
  const TrainResult original = run_training(o, world());
  o.data = files().rounded;
  const TrainResult rounded = run_training(o, world());
  EXPECT_NE(original.history.back().loss, rounded.history.back().loss);
}

TEST(FeatureDtype, StoredRowsReadBackAsTheirRounding) {
  PartitionedGraph g = load_partitioned(world(), files().original, files().partition);
  std::vector<float> expected = g.features;
  round_through_bf16(expected.data(), expected.size());
  store_features_in_bf16(g);
  EXPECT_EQ(g.feature_dtype, StorageDtype::Bf16);
  EXPECT_TRUE(g.features.empty());
  EXPECT_EQ(g.features_bf16.size(), expected.size());
  EXPECT_EQ(owned_features_f32(g), expected);
}

TEST(FeatureDtype, ABf16CacheHoldsTwiceTheRowsOfTheSameBytes) {
  PrefetchOptions o;
  o.cache_bytes = 1000;
  EXPECT_EQ(FeatureCache::capacity_for(o, 500, 10, StorageDtype::F32), 25);
  EXPECT_EQ(FeatureCache::capacity_for(o, 500, 10, StorageDtype::Bf16), 50);
  EXPECT_EQ(FeatureCache::capacity_for(o, 30, 10, StorageDtype::Bf16), 30) << "at most the halo";
  o.cache_bytes = 0;
  o.fraction = 0.5;
  EXPECT_EQ(FeatureCache::capacity_for(o, 30, 10, StorageDtype::Bf16), 15) << "a fraction counts rows";
  o.cache_bytes = 40;
  FeatureCache cache({7, 9, 11}, {3, 2, 1}, 10, o, StorageDtype::Bf16);
  EXPECT_EQ(cache.capacity(), 2);
  EXPECT_EQ(cache.held_bytes(), 40);
  EXPECT_THROW(cache.install_initial(std::vector<float>(20)), Error) << "fp32 rows for a bf16 cache";
  std::vector<uint16_t> rows(20);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = to_bf16(float(i));
  cache.install_initial(rows);
  EXPECT_EQ(from_bf16(cache.row_bf16(1)[3]), 13.0f);
  o.cache_bytes = -1;
  EXPECT_THROW(o.validate(), Error);
}

// Gathers through a cache with evictions every other step: the bf16 graph's rows equal the rounded fp32
// graph's, from owned rows, cache hits and fetches alike, in half the fetched bytes.
TEST(FeatureDtype, GatheredRowsEqualTheRoundedFp32Rows) {
  PartitionedGraph rounded = load_partitioned(world(), files().rounded, files().partition);
  PartitionedGraph half = load_partitioned(world(), files().original, files().partition);
  store_features_in_bf16(half);
  PrefetchOptions o;
  o.fraction = 0.5;
  o.alpha = 0.5;
  o.interval = 1;
  FeatureCache cache32(rounded.halo, rounded.halo_degree, rounded.num_features, o);
  FeatureCache cache16(half.halo, half.halo_degree, half.num_features, o, StorageDtype::Bf16);
  const RemoteFeatures fetch32(world(), rounded), fetch16(world(), half);
  FetchStats stats32, stats16;
  fetch32.fill(cache32, stats32);
  fetch16.fill(cache16, stats16);
  EXPECT_THROW(fetch16.fill(cache32, stats16), Error) << "an fp32 cache for bf16 rows";
  for (int step = 0; step < 10; ++step) {
    // Every fifth node from `step`, owned or not, each rank its own list: slots idle long enough to evict.
    std::vector<int64_t> nodes;
    for (int64_t v = (step + world().rank()) % 5; v < rounded.num_nodes; v += 5) nodes.push_back(v);
    const std::vector<float> a = fetch32.gather(nodes, &cache32, step % 2 == 1, stats32);
    const std::vector<float> b = fetch16.gather(nodes, &cache16, step % 2 == 1, stats16);
    ASSERT_EQ(a, b) << "step " << step;
  }
  EXPECT_EQ(stats16.fetched_rows, stats32.fetched_rows);
  EXPECT_EQ(stats16.hits, stats32.hits);
  EXPECT_EQ(stats16.evictions, stats32.evictions);
  EXPECT_EQ(2 * stats16.fetched_bytes, stats32.fetched_bytes);
  if (world().size() > 1) {
    EXPECT_GT(stats16.hits, 0);
    EXPECT_GT(stats16.evictions, 0);
  }
}

// Whole runs (periodic evictions, no cache, the worker thread on and off; exact final evaluation and node
// outputs): losses, final weights and accuracies equal the rounded file's fp32 run.
TEST(FeatureDtype, ABf16RunIsTheFp32RunOnRoundedFeatures) {
  for (PrefetchPolicy policy : {PrefetchPolicy::Periodic, PrefetchPolicy::None}) {
    for (StepThread thread : {StepThread::On, StepThread::Off}) {
      TrainOptions o = sampled_options();
      o.sampled.prefetch.policy = policy;
      o.sampled.thread = thread;
      o.data = files().rounded;
      const fixtures::RunWithWeights reference = fixtures::run_training_with_weights(o, world());
      o.data = files().original;
      o.feature_dtype = StorageDtype::Bf16;
      const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world());
      ASSERT_EQ(r.history.size(), reference.history.size());
      for (size_t e = 0; e < r.history.size(); ++e) EXPECT_EQ(r.history[e].loss, reference.history[e].loss);
      EXPECT_EQ(r.final_weights, reference.final_weights) << prefetch_policy_name(policy);
      EXPECT_EQ(r.test_at_best, reference.test_at_best);
      EXPECT_EQ(r.best_valid, reference.best_valid);
      ASSERT_TRUE(r.prefetch && reference.prefetch);
      EXPECT_EQ(r.prefetch->fetched_rows, reference.prefetch->fetched_rows);
      EXPECT_EQ(2 * r.prefetch->fetched_bytes, reference.prefetch->fetched_bytes);
      EXPECT_EQ(r.prefetch->cache_rows, reference.prefetch->cache_rows) << "a fraction of the halo";
      EXPECT_EQ(2 * r.prefetch->cache_bytes, reference.prefetch->cache_bytes);
    }
  }
}

// A cache sized in bytes holds twice the rows in bf16 (where the halo has them), and the run still equals
// the rounded file's run with the fp32 cache of the same row count.
TEST(FeatureDtype, CacheSizeInBytesHoldsTwiceTheBf16Rows) {
  TrainOptions o = sampled_options();
  o.trainer.epochs = 2;
  o.data = files().original;
  o.sampled.prefetch.cache_bytes = 4 * 11 * 5;  // 5 fp32 rows of the fixture's 11 features per rank
  const TrainResult f32 = run_training(o, world());
  o.feature_dtype = StorageDtype::Bf16;
  const TrainResult bf16 = run_training(o, world());
  ASSERT_TRUE(f32.prefetch && bf16.prefetch);
  EXPECT_EQ(bf16.prefetch->cache_bytes, f32.prefetch->cache_bytes);
  if (world().size() > 1) {
    EXPECT_EQ(f32.prefetch->cache_rows, 5 * world().size()) << "every rank's halo has 10 rows or more";
    EXPECT_EQ(bf16.prefetch->cache_rows, 2 * f32.prefetch->cache_rows);
  }
}

TEST(FeatureDtype, ResumeContinuesBitForBitAndKeepsTheDtype) {
  TrainOptions o = sampled_options();
  o.data = files().original;
  o.feature_dtype = StorageDtype::Bf16;
  const fixtures::RunWithWeights straight = fixtures::run_training_with_weights(o, world());
  o.checkpoint.dir = fixtures::scratch_dir();
  o.trainer.epochs = 3;
  run_training(o, world());
  o.checkpoint.resume = true;
  o.trainer.epochs = 6;
  const fixtures::RunWithWeights resumed = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(resumed.history.size(), 3u);
  for (size_t e = 0; e < 3; ++e) EXPECT_EQ(resumed.history[e].loss, straight.history[e + 3].loss);
  EXPECT_EQ(resumed.final_weights, straight.final_weights);
  o.feature_dtype = StorageDtype::F32;
  EXPECT_THROW(run_training(o, world()), std::exception) << "resumed with fp32 features";
}

// Blocks of one row (four nodes on up to four ranks, some ranks without training seeds): every rank enters
// the same bf16 exchanges, and the run is still the rounded file's.
TEST(FeatureDtype, RanksOfOneNodeExchangeBf16Rows) {
  if (world().size() > 4) GTEST_SKIP() << "4 nodes over " << world().size() << " ranks";
  TrainOptions o = sampled_options();
  o.sampled.partition = "";
  const std::string four = fixtures::four_node_file("four-dtype.h5");
  o.data = fixtures::rounded_features_copy(four, "four-dtype-rounded.h5");
  const fixtures::RunWithWeights reference = fixtures::run_training_with_weights(o, world());
  o.data = four;
  o.feature_dtype = StorageDtype::Bf16;
  const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(r.history.size(), reference.history.size());
  EXPECT_EQ(r.history.back().loss, reference.history.back().loss);
  EXPECT_EQ(r.final_weights, reference.final_weights);
}

// (The full-graph and mini-batch modes: test_feature_dtype_grid.)
TEST(FeatureDtype, DeviceStepsRefuseIt) {
  TrainOptions o = sampled_options();
  o.data = files().original;
  o.feature_dtype = StorageDtype::Bf16;
  o.sampled.sample_on = SamplePlace::Device;
  EXPECT_THROW(run_training(o, world()), std::exception);
}

// A file whose /node/features hold bf16 bits (made with HDF5 directly, not the library's writer) reads back
// as the fp32 file of the same roundings: whole, by rows as the loaders read, and as bits.
TEST(FeatureDtype, ABf16FileReadsAsTheRoundedFile) {
  const std::string half = fixtures::bf16_features_copy(files().original, "csbm-bf16.h5");
  const GraphFileReader bf16(world(), half), rounded(world(), files().rounded);
  EXPECT_EQ(bf16.meta().feature_dtype, StorageDtype::Bf16);
  EXPECT_EQ(rounded.meta().feature_dtype, StorageDtype::F32);
  const int64_t n = bf16.meta().num_nodes, f = bf16.meta().num_features;
  EXPECT_EQ(bf16.read_features(0, n), rounded.read_features(0, n));
  EXPECT_EQ(bf16.read_features_bf16(0, n), rounded.read_features_bf16(0, n));
  const auto [begin, end] = block_range(n, world().rank(), world().size());
  const GraphSlice a = bf16.read_rows(begin, end - begin), b = rounded.read_rows(begin, end - begin);
  for (int64_t k = 0; k < (end - begin) * f; ++k) ASSERT_EQ(a.features.data()[k], b.features.data()[k]) << k;
}

// The sampled mode's bf16 storage reads rows as bf16 bits (read_rows with StorageDtype::Bf16), never as fp32
// rows: a bf16 file's bits as stored, an fp32 file's rows read in chunks of 1 MiB and rounded. Rank 0 reads
// 3 chunks and the others one (collective reads, as many on every rank); the bits equal the rounding of the
// fp32 rows, the other arrays the fp32 read's, and a non-finite value in a later chunk is refused by row and
// column on every rank.
TEST(FeatureDtype, RowsReadAsBf16BitsAreTheRoundedRows) {
  SynthOptions o;
  o.num_nodes = 600;
  o.num_edges = 1800;
  o.num_features = 1000;  // 262 rows of 1000 fp32 values to a chunk
  const std::string dir = fixtures::scratch_dir();
  generate_synthetic(o, dir + "/wide-f32.h5", world());
  o.feature_dtype = StorageDtype::Bf16;
  generate_synthetic(o, dir + "/wide-bf16.h5", world());
  const int p = world().size(), r = world().rank();
  const int64_t begin = r == 0 ? 0 : 600 - 10 * (p - r), end = r == 0 ? 600 - 10 * (p - 1) : begin + 10;
  const GraphFileReader fp32(world(), dir + "/wide-f32.h5"), bf16(world(), dir + "/wide-bf16.h5");
  const std::vector<float> x = fp32.read_features(begin, end - begin);
  std::vector<uint16_t> rounded(x.size());
  round_to_bf16(x.data(), rounded.data(), x.size());
  const GraphSlice whole = fp32.read_rows(begin, end - begin);
  for (const GraphFileReader* reader : {&fp32, &bf16}) {
    const GraphSlice s = reader->read_rows(begin, end - begin, StorageDtype::Bf16);
    EXPECT_EQ(s.features.size(), 0u);
    ASSERT_EQ(s.features_bf16.size(), rounded.size());
    EXPECT_TRUE(std::equal(rounded.begin(), rounded.end(), s.features_bf16.data()));
    ASSERT_EQ(s.labels.size(), whole.labels.size());
    EXPECT_TRUE(std::equal(whole.labels.data(), whole.labels.data() + whole.labels.size(), s.labels.data()));
    EXPECT_EQ(s.adjacency.col_idx.size(), whole.adjacency.col_idx.size());
  }
  // An empty block on every rank but the first: those ranks make the first rank's three reads too.
  const int64_t all = r == 0 ? 600 : 0;
  const GraphSlice first_only = fp32.read_rows(r == 0 ? 0 : 600, all, StorageDtype::Bf16);
  ASSERT_EQ(first_only.features_bf16.size(), size_t(all * 1000));
  if (r == 0) {
    const std::vector<uint16_t> whole_file = fp32.read_features_bf16(0, 600);
    EXPECT_TRUE(std::equal(whole_file.begin(), whole_file.end(), first_only.features_bf16.data()));
  } else {
    fp32.read_features_bf16(600, 0);
  }
  const std::string bad = fixtures::features_rewritten_copy(
      dir + "/wide-f32.h5", "wide-inf.h5",
      [](hid_t file, const std::vector<int64_t>& shape, std::vector<float>& v) {
        v[size_t(550 * shape[1] + 7)] = std::numeric_limits<float>::infinity();
        const H5Handle features = h5_open_dataset(file, "wide-inf.h5", "/node/features");
        h5_write_rows(features.get(), h5_native_type<float>(), 0, shape[0], v.data());
      });
  for (const std::string& path : {bad, fixtures::bf16_features_copy(bad, "wide-inf-bf16.h5")}) {
    try {
      const GraphFileReader reader(world(), path);
      reader.read_rows(begin, end - begin, StorageDtype::Bf16);
      ADD_FAILURE() << path << ": an infinite feature was read";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("/node/features: row 550, column 7 is inf"), std::string::npos)
          << e.what();
    }
  }
}

// prep synth's writer stores bf16 as the fixture does: version 3, 16-bit values marked bf16, the fp32 file's
// roundings; a bf16 mark on a version 2 file is refused.
TEST(FeatureDtype, TheWriterStoresTheRoundingsAsVersion3) {
  SynthOptions o;
  o.num_nodes = 40;
  o.num_edges = 120;
  o.num_features = 5;
  const std::string dir = fixtures::scratch_dir();
  generate_synthetic(o, dir + "/synth-f32.h5", world());
  o.feature_dtype = StorageDtype::Bf16;
  generate_synthetic(o, dir + "/synth-bf16.h5", world());
  const std::string rounded = fixtures::rounded_features_copy(dir + "/synth-f32.h5", "synth-rounded.h5");
  {
    const GraphFileReader bf16(world(), dir + "/synth-bf16.h5"), fp32(world(), rounded);
    EXPECT_EQ(bf16.read_features(0, 40), fp32.read_features(0, 40));
  }
  world().run_on(0, [&] {
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    const H5Handle file = h5_open_file(self, dir + "/synth-bf16.h5", true);
    int64_t version = 0;
    ASSERT_TRUE(h5_read_attr(file.get(), "version", version));
    EXPECT_EQ(version, 3);
    const H5Handle features = h5_open_dataset(file.get(), "synth-bf16.h5", "/node/features");
    EXPECT_EQ(h5_type_class(features.get()), H5T_INTEGER);
    h5_write_attr(file.get(), "version", int64_t(2));
  });
  world().barrier();
  try {
    GraphFileReader r(world(), dir + "/synth-bf16.h5");
    ADD_FAILURE() << "a version 2 file with bf16 features was read";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 features are version 3"), std::string::npos) << e.what();
  }
}

// Every mode trains on the bf16 file as on the rounded fp32 file, bit for bit (the sampled mode holding its
// rows in fp32 and in bf16).
TEST(FeatureDtype, EveryModeTrainsABf16FileAsTheRoundedFile) {
  const std::string half = fixtures::bf16_features_copy(files().original, "csbm-bf16.h5");
  const int p = world().size();
  for (int variant = 0; variant < 4; ++variant) {
    TrainOptions o = sampled_options();
    o.trainer.epochs = 3;
    if (variant == 0) o.mode = TrainMode::Full, o.grid.shape = GridShape{1, 1, 1, p};
    if (variant == 1) {
      o.mode = TrainMode::Minibatch, o.grid.shape = GridShape{p, 1, 1, 1};
      o.minibatch.batch_size = 16;
    }
    if (variant == 3) o.feature_dtype = StorageDtype::Bf16;
    o.data = files().rounded;
    const fixtures::RunWithWeights reference = fixtures::run_training_with_weights(o, world());
    o.data = half;
    const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world());
    ASSERT_EQ(r.history.size(), reference.history.size()) << variant;
    for (size_t e = 0; e < r.history.size(); ++e)
      EXPECT_EQ(r.history[e].loss, reference.history[e].loss) << variant;
    EXPECT_EQ(r.final_weights, reference.final_weights) << variant;
  }
}

}  // namespace
