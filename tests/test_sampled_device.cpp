// SPDX-License-Identifier: BSD-3-Clause
// Sampled steps built in kernels (SamplePlace::Device) against the host sampler they must reproduce: the
// blocks node for node, each block's weights and transpose bit for bit, and whole training runs bit for bit,
// on a contextual SBM and on an R-MAT graph whose hubs keep more neighbours than any fanout. Every rank
// checks the whole graph on its own (the device path serves a rank that owns every node); on more ranks
// the world refuses --sample-on device with one message. Host-built steps reach the device through
// StepUploads, whose buffers a step reuses.
#include <gtest/gtest.h>

#include <limits>
#include <type_traits>

#include "support/allocation_count.hpp"
#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/modes/step_uploads.hpp"
#include "tessera/models/train.hpp"
#include "tessera/sampling/induced.hpp"

using namespace tessera;

namespace {

const Communicator& world() {
  static const Communicator w = Communicator::world();
  return w;
}

const Communicator& self() {
  static const Communicator s(MPI_COMM_SELF, false, nullptr);
  return s;
}

// An R-MAT graph (8 undirected edges drawn per node; its lowest ids are hubs). Collective on first use.
const std::string& rmat_file() {
  static std::string path;
  if (path.empty()) {
    SynthOptions o;
    o.kind = SynthKind::Rmat;
    o.num_nodes = 600;
    o.num_edges = 8 * 600;
    o.num_features = 6;
    o.num_classes = 3;
    o.seed = 5;
    path = fixtures::synthetic_file("rmat-device.h5", o);
  }
  return path;
}

template <class T>
std::vector<T> host_copy(const Kokkos::View<T*, DeviceSpace>& v) {
  std::vector<T> out(v.extent(0));
  Kokkos::deep_copy(HostVector<T>(out.data(), out.size()), v);
  return out;
}

std::vector<std::vector<int64_t>> seed_sets(const PartitionedGraph& g) {
  std::vector<int64_t> every_seventh, all, one = {g.first + g.count / 2};
  for (int64_t i = 0; i < g.count; ++i) {
    all.push_back(g.first + i);
    if (i % 7 == 3) every_seventh.push_back(g.first + i);
  }
  return {{}, one, every_seventh, all};
}

Vector<const int64_t> on_device(const std::vector<int64_t>& v) {
  Vector<int64_t> out("seeds", v.size());
  Kokkos::deep_copy(out, HostVector<const int64_t>(v.data(), v.size()));
  return out;
}

void expect_same_csr(const HostCsr& expect, const CsrMatrix<float, DeviceSpace, SpmmColumn>& got,
                     const std::string& what) {
  EXPECT_EQ(got.num_rows, expect.num_rows) << what;
  EXPECT_EQ(got.num_cols, expect.num_cols) << what;
  EXPECT_EQ(host_copy(got.row_ptr), expect.row_ptr) << what;
  const std::vector<SpmmColumn> cols = host_copy(got.col_idx);
  EXPECT_EQ(std::vector<int64_t>(cols.begin(), cols.end()), expect.col_idx) << what;
  EXPECT_EQ(host_copy(got.values), expect.values) << what;  // bit for bit
}

}  // namespace

TEST(DeviceSampling, DrawsWhatTheHostSamplerDraws) {
  for (const std::string& path : {fixtures::small_csbm_file(), rmat_file()}) {
    const PartitionedGraph g = load_partitioned(self(), path, "block");
    for (const std::vector<int>& fanouts :
         std::vector<std::vector<int>>{{3, 5, 2}, {-1, 4}, {1}, {15, 10, 5}}) {
      const NeighborSampler host(self(), g, fanouts, 11);
      DeviceNeighborSampler device(g, fanouts, 11);
      for (const std::vector<int64_t>& seeds : seed_sets(g))
        for (int64_t step = 0; step < 2; ++step) {
          const std::vector<SampledBlock> expect = host.sample(seeds, 3, step);
          const std::vector<DeviceSampledBlock> got = device.sample(on_device(seeds), 3, step);
          ASSERT_EQ(got.size(), expect.size());
          for (size_t l = 0; l < got.size(); ++l) {
            const std::string what = path + " layer " + std::to_string(l) + " of " +
                                     std::to_string(fanouts.size()) + ", " + std::to_string(seeds.size()) +
                                     " seeds";
            EXPECT_EQ(got[l].num_dst, expect[l].num_dst) << what;
            EXPECT_EQ(host_copy(got[l].src), expect[l].src) << what;
            EXPECT_EQ(host_copy(got[l].row_ptr), expect[l].row_ptr) << what;
            EXPECT_EQ(host_copy(got[l].col), expect[l].col) << what;
            EXPECT_EQ(host_copy(got[l].src_degree), expect[l].src_degree) << what;
          }
        }
    }
  }
}

TEST(DeviceSampling, BlockWeightsAndTransposesAreTheHostOnesBitForBit) {
  const PartitionedGraph g = load_partitioned(self(), rmat_file(), "block");
  const std::vector<int> fanouts = {-1, 3, 7};
  const NeighborSampler host(self(), g, fanouts, 2);
  DeviceNeighborSampler device(g, fanouts, 2);
  for (const std::vector<int64_t>& seeds : seed_sets(g)) {
    const std::vector<SampledBlock> expect = host.sample(seeds, 1, 4);
    const std::vector<DeviceSampledBlock> got = device.sample(on_device(seeds), 1, 4);
    for (size_t l = 0; l < got.size(); ++l) {
      for (Normalization n : {Normalization::Symmetric, Normalization::Mean, Normalization::Sum}) {
        const std::string what = std::string(normalization_name(n)) + ", layer " + std::to_string(l) + ", " +
                                 std::to_string(seeds.size()) + " seeds";
        const HostCsr forward = block_operator(expect[l], n);
        const CsrMatrix<float, DeviceSpace, SpmmColumn> device_forward = device_block_operator(got[l], n);
        expect_same_csr(forward, device_forward, what);
        expect_same_csr(transpose(forward), device_transpose(device_forward), what + ", transposed");
      }
      const HostCsr identity = leading_identity(expect[l].num_dst, int64_t(expect[l].src.size()));
      const auto device_identity = device_leading_identity(got[l].num_dst, got[l].num_src());
      expect_same_csr(identity, device_identity, "identity");
      expect_same_csr(transpose(identity), device_transpose(device_identity), "identity transposed");
    }
  }
}

// The whole run, both convolutions, with dropout and BatchNorm: every epoch's loss and accuracies and the
// final weights equal the host sampler's run, whose blocks the step's kernels then multiply in the same
// order.
TEST(DeviceSampling, TrainingEqualsTheHostSamplersRunBitForBit) {
  for (const std::string& path : {fixtures::small_csbm_file(), rmat_file()})
    for (ModelKind kind : {ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat}) {
      TrainOptions o;
      o.data = path;
      o.mode = TrainMode::Sampled;
      o.sampled.fanouts = {4, 3};
      o.sampled.batch_size = 16;
      o.model.kind = kind;
      o.model.layers = 2;
      o.model.hidden = 8;
      o.model.heads = kind == ModelKind::Gat ? 2 : 8;
      o.model.norm = NormKind::Batch;
      o.model.seed = 3;
      o.trainer.epochs = 3;
      o.outputs.quiet = true;
      o.sampled.sample_on = SamplePlace::Host;
      const fixtures::RunWithWeights host = fixtures::run_training_with_weights(o, self());
      o.sampled.sample_on = SamplePlace::Device;
      const fixtures::RunWithWeights device = fixtures::run_training_with_weights(o, self());
      ASSERT_EQ(device.history.size(), host.history.size());
      for (size_t e = 0; e < host.history.size(); ++e) {
        EXPECT_EQ(device.history[e].loss, host.history[e].loss) << path << " epoch " << e;
        EXPECT_EQ(device.history[e].valid_acc, host.history[e].valid_acc) << path << " epoch " << e;
      }
      EXPECT_EQ(device.final_weights, host.final_weights) << path << " " << model_kind_name(kind);
    }
}

TEST(DeviceSampling, MoreThanOneRankIsRefusedOnEveryRank) {
  if (world().size() == 1) GTEST_SKIP() << "one rank samples on the device";
  TrainOptions o;
  o.data = fixtures::small_csbm_file();
  o.mode = TrainMode::Sampled;
  o.sampled.partition = "block";
  o.sampled.sample_on = SamplePlace::Device;
  o.model.layers = 2;
  o.outputs.quiet = true;
  try {
    run_training(o, world());
    ADD_FAILURE() << "--sample-on device ran on " << world().size() << " ranks";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("`sample-on` device: sampled mode builds its steps on the device on one "
                                   "rank only"),
        std::string::npos)
        << e.what();
  }
}

TEST(DeviceSampling, AutoBuildsStepsOnTheDeviceWhereOneRankFitsThere) {
  constexpr SamplePlace kHost = SamplePlace::Host, kDevice = SamplePlace::Device, kAuto = SamplePlace::Auto;
  const int64_t gib = int64_t(1) << 30;
  EXPECT_EQ(sampled_step_place(kAuto, true, 1, gib, 8 * gib), kDevice);
  EXPECT_EQ(sampled_step_place(kAuto, true, 1, gib, -1), kDevice);  // the runtime could not say
  EXPECT_EQ(sampled_step_place(kAuto, true, 1, 5 * gib, 8 * gib),
            kHost);  // half the free memory is the bound
  EXPECT_EQ(sampled_step_place(kAuto, true, 2, gib, 8 * gib), kHost);
  EXPECT_EQ(sampled_step_place(kAuto, false, 1, gib, -1), kHost);
  EXPECT_EQ(sampled_step_place(kHost, true, 1, gib, 8 * gib), kHost);
  EXPECT_EQ(sampled_step_place(kDevice, false, 1, gib, -1), kDevice);  // a host build's kernels
  EXPECT_EQ(sampled_step_place(kDevice, true, 1, 4 * gib, 8 * gib), kDevice);
  auto refusal = [&](int ranks, int64_t bytes) {
    try {
      sampled_step_place(kDevice, true, ranks, bytes, 8 * gib);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no refusal");
  };
  EXPECT_NE(refusal(2, gib).find("on one rank only"), std::string::npos) << refusal(2, gib);
  EXPECT_NE(refusal(1, 5 * gib).find("take 5 GiB of device memory, more than half of the 8 GiB free"),
            std::string::npos)
      << refusal(1, 5 * gib);
  // What a graph keeps there: 4 bytes per feature, 8 per offset, neighbour, label and node.
  const PartitionedGraph g = load_partitioned(self(), fixtures::small_csbm_file(), "block");
  EXPECT_EQ(DeviceSampledSteps::resident_bytes(g),
            int64_t(4 * g.count * g.num_features +
                    8 * ((g.count + 1) + int64_t(g.col.size()) + g.count + g.count)));
}

namespace {

// The device copy holds the host block's entries (columns as int64 for the comparison).
void expect_same_block(const CsrMatrix<float, DeviceSpace, SpmmColumn>& m, const HostCsr& a) {
  EXPECT_EQ(m.num_rows, a.num_rows);
  EXPECT_EQ(m.num_cols, a.num_cols);
  const auto row_ptr = Kokkos::create_mirror_view_and_copy(HostSpace(), m.row_ptr);
  const auto col_idx = Kokkos::create_mirror_view_and_copy(HostSpace(), m.col_idx);
  const auto values = Kokkos::create_mirror_view_and_copy(HostSpace(), m.values);
  EXPECT_EQ(std::vector<int64_t>(row_ptr.data(), row_ptr.data() + row_ptr.extent(0)), a.row_ptr);
  EXPECT_EQ(std::vector<int64_t>(col_idx.data(), col_idx.data() + col_idx.extent(0)), a.col_idx);
  EXPECT_EQ(std::vector<float>(values.data(), values.data() + values.extent(0)), a.values);
  EXPECT_EQ(m.is_pattern(), a.values.empty());
}

}  // namespace

// Every array arrives as the host held it; a second step no larger than the first writes into the first
// one's buffers (row blocks, labels, masks and task rows too) and allocates nothing, a larger one grows them;
// identities are leading_identity's and its transpose's; a block with more columns than 32-bit ids hold is
// refused on a host build.
TEST(StepUploads, EachStepWritesIntoTheBuffersOfTheStepBefore) {
  const HostCsr big{3, 5, {0, 2, 2, 5}, {1, 4, 0, 2, 3}, {0.5f, -1.0f, 2.0f, 0.25f, 3.0f}};
  const HostCsr pattern{2, 3, {0, 1, 3}, {2, 0, 1}, {}};
  const HostCsr small{2, 4, {0, 1, 3}, {3, 0, 2}, {7.0f, 8.0f, 9.0f}};
  const std::vector<int64_t> ids{11, 4, 7, 2};
  StepUploads uploads;
  uploads.restart();
  const auto first = uploads.csr(big);
  expect_same_block(first, big);
  expect_same_block(uploads.csr(pattern), pattern);
  expect_same_block(uploads.leading_identity(2, 5), leading_identity(2, 5));
  expect_same_block(uploads.leading_identity(5, 2), transpose(leading_identity(2, 5)));
  const Vector<int64_t> first_ids = uploads.ids(ids.data(), ids.size());
  const Matrix<float> first_rows = uploads.rows(5, 3);
  EXPECT_EQ(first_rows.extent(0), 5u);
  EXPECT_EQ(first_rows.extent(1), 3u);
  const Vector<int64_t> first_labels = uploads.labels(4);
  const Vector<uint8_t> first_mask = uploads.mask(4);
  const Matrix<int8_t> first_tasks = uploads.task_rows(4, 2);
  EXPECT_EQ(first_labels.extent(0), 4u);
  EXPECT_EQ(first_mask.extent(0), 4u);
  EXPECT_EQ(first_tasks.extent(0), 4u);
  EXPECT_EQ(first_tasks.extent(1), 2u);
  const auto host_ids = Kokkos::create_mirror_view_and_copy(HostSpace(), first_ids);
  EXPECT_EQ(std::vector<int64_t>(host_ids.data(), host_ids.data() + host_ids.extent(0)), ids);
  const int64_t held = uploads.bytes();
  EXPECT_GE(held, int64_t((4 + 3 + 3 + 6) * sizeof(int64_t) + (5 + 3 + 2 + 2) * sizeof(SpmmColumn) +
                          (5 + 15) * sizeof(float) + (ids.size() + 4) * sizeof(int64_t) + 4 + 8));
  {
    const fixtures::AllocationCount allocations;
    uploads.restart();
    const auto second = uploads.csr(small);
    expect_same_block(second, small);
    EXPECT_EQ(second.col_idx.data(), first.col_idx.data());
    EXPECT_EQ(second.values.data(), first.values.data());
    const Vector<int64_t> fewer = uploads.ids(ids.data() + 1, 2);
    EXPECT_EQ(fewer.data(), first_ids.data());
    const Matrix<float> fewer_rows = uploads.rows(4, 3);
    EXPECT_EQ(fewer_rows.extent(0), 4u);
    EXPECT_EQ(fewer_rows.data(), first_rows.data());
    EXPECT_EQ(uploads.labels(3).data(), first_labels.data());
    EXPECT_EQ(uploads.mask(3).data(), first_mask.data());
    EXPECT_EQ(uploads.task_rows(3, 2).data(), first_tasks.data());
    EXPECT_EQ(allocations.count(), 0);
    EXPECT_EQ(uploads.bytes(), held);
  }
  {
    const fixtures::AllocationCount allocations;
    uploads.restart();
    const HostCsr wider{1, 12, {0, 12}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, std::vector<float>(12, 1.5f)};
    expect_same_block(uploads.csr(wider), wider);
    const Matrix<float> other_width = uploads.rows(2, 4);  // the same rows, another width: a new block
    EXPECT_EQ(other_width.extent(1), 4u);
    EXPECT_NE(other_width.data(), first_rows.data());
    EXPECT_GT(allocations.count(), 0);
    EXPECT_GT(uploads.bytes(), held);
  }
  if (std::is_same<SpmmColumn, int32_t>::value) {  // host builds' 32-bit column ids
    const HostCsr too_wide{1, int64_t(std::numeric_limits<int32_t>::max()) + 1, {0, 0}, {}, {}};
    EXPECT_THROW(
        {
          try {
            uploads.csr(too_wide);
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("needs 64-bit column ids"), std::string::npos) << e.what();
            throw;
          }
        },
        Error);
  }
}
