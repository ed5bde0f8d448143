// SPDX-License-Identifier: BSD-3-Clause
// Device collectives (device_collectives.hpp) against references computed here on the host: whichever
// carrier runs them in this build (MPI on host memory here; MPI staged through host memory, or NCCL, on a
// CUDA build), the results and byte counters must be what a plain host MPI collective gives. Label `gpu`:
// on a GPU these run on device memory, and NCCL is compared with MPI. Runs with 1, 2, 4 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tessera/comm/device_collectives.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/comm/reduced_precision.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/views.hpp"

using namespace tessera;

namespace {

template <class T>
Vector<T> on_device(const std::vector<T>& host) {
  Vector<T> v("v", host.size());
  Kokkos::deep_copy(v, HostVector<T>(const_cast<T*>(host.data()), host.size()));
  return v;
}

template <class T>
std::vector<T> on_host(const Vector<T>& v) {
  std::vector<T> out(v.extent(0));
  Kokkos::deep_copy(HostVector<T>(out.data(), out.size()), v);
  return out;
}

// Rank r's element i: small integers (exact in float, so any summation order gives the same sum) or, with
// `fractional`, values whose sums round.
float value(int rank, int64_t i, bool fractional) {
  const float base = float((rank + 1) * 3 + i % 7) - 5.0f;
  return fractional ? base * 0.3183099f + float(i) * 1e-3f : base;
}

std::vector<float> values(int rank, int64_t count, bool fractional) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = value(rank, i, fractional);
  return v;
}

// What a device collective on `comm` must produce, from the plain definitions.
float reference_sum(int ranks, int64_t i) {
  double s = 0;
  for (int r = 0; r < ranks; ++r) s += value(r, i, false);
  return float(s);
}

// The bf16 all-reduce's contract: every rank's value rounded to bf16, widened, added in fp32 in rank order,
// the sum rounded once.
float reference_bf16_sum(int ranks, int64_t i) {
  float s = 0;
  for (int r = 0; r < ranks; ++r) s += from_bf16(to_bf16(value(r, i, true)));
  return from_bf16(to_bf16(s));
}

}  // namespace

// Every test runs twice: MPI on the buffers themselves, and MPI on host copies (the staging path of device
// builds whose MPI is not device-aware, forced here with --comm mpi-host's switch).
class DeviceCollectives : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override { set_mpi_host_staging(GetParam()); }
  void TearDown() override { set_mpi_host_staging(false); }
};
INSTANTIATE_TEST_SUITE_P(Carriers, DeviceCollectives, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& p) {
                           return p.param ? "HostCopies" : "Direct";
                         });

TEST_P(DeviceCollectives, SumMaxAndGatherEqualThePlainDefinitions) {
  const Communicator world = Communicator::world();
  EXPECT_EQ(mpi_host_staging(), GetParam() || !mpi_is_device_aware());
  const int p = world.size(), me = world.rank();
  for (int64_t count : {int64_t(0), int64_t(1), int64_t(1000)}) {
    Vector<float> sum = on_device(values(me, count, false));
    device_all_reduce(world, sum.data(), count, ReduceOp::Sum, "test");
    Vector<double> top("top", size_t(count));
    Kokkos::deep_copy(top, double(me));
    device_all_reduce(world, top.data(), count, ReduceOp::Max, "test");
    const Vector<float> mine = on_device(values(me, count, false));
    Vector<float> gathered("gathered", size_t(count * p));
    device_all_gather(world, mine.data(), count, gathered.data(), "test");
    const auto s = on_host(sum);
    const auto t = on_host(top);
    const auto g = on_host(gathered);
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(s[size_t(i)], reference_sum(p, i)) << "element " << i;
      ASSERT_EQ(t[size_t(i)], double(p - 1));
      for (int r = 0; r < p; ++r) ASSERT_EQ(g[size_t(r * count + i)], value(r, i, false));
    }
  }
}

TEST_P(DeviceCollectives, NonBlockingSumCompletesOnWait) {
  const Communicator world = Communicator::world();
  Vector<float> v = on_device(values(world.rank(), 257, false));
  Request r = idevice_all_reduce(world, v.data(), 257, "test");
  r.wait();
  const auto s = on_host(v);
  for (int64_t i = 0; i < 257; ++i) ASSERT_EQ(s[size_t(i)], reference_sum(world.size(), i));
}

TEST_P(DeviceCollectives, Bf16AllReduceIsRankOrderFp32SumsRoundedOnce) {
  const Communicator world = Communicator::world();
  for (int64_t count : {int64_t(1), int64_t(7), int64_t(1001)}) {
    Vector<float> v = on_device(values(world.rank(), count, true));
    all_reduce_bf16(world, v.data(), count, "test");
    const auto got = on_host(v);
    for (int64_t i = 0; i < count; ++i) {
      const float want = world.size() == 1 ? value(0, i, true) : reference_bf16_sum(world.size(), i);
      ASSERT_EQ(got[size_t(i)], want) << "element " << i << " of " << count;
    }
  }
}

TEST_P(DeviceCollectives, ByteCountersAreThoseOfTheMpiCollectives) {
  const Communicator world = Communicator::world();
  const Communicator comm = world.dup(false);
  Vector<float> v("v", 100);
  Vector<float> all("all", size_t(100 * comm.size()));
  device_all_reduce(comm, v.data(), 100, ReduceOp::Sum, "reduce");
  device_all_gather(comm, v.data(), 100, all.data(), "gather");
  all_reduce_bf16(comm, v.data(), 100, "bf16");
  EXPECT_EQ(comm.stats().get("reduce", Collective::AllReduce).bytes, 400);
  EXPECT_EQ(comm.stats().get("gather", Collective::AllGather).bytes, 400);
  EXPECT_EQ(comm.stats().get("bf16", Collective::AllReduce).bytes, comm.size() > 1 ? 200 : 0);
}

TEST(DeviceBackend, Choice) {
  const Communicator world = Communicator::world();
  EXPECT_EQ(resolve_comm_backend(CommBackend::Mpi, world), CommBackend::Mpi);
  EXPECT_EQ(resolve_comm_backend(CommBackend::MpiHost, world), CommBackend::MpiHost);
  const CommBackend chosen = resolve_comm_backend(CommBackend::Auto, world);
  if (!nccl_available()) {
    EXPECT_EQ(chosen, CommBackend::Mpi);
    EXPECT_THROW(resolve_comm_backend(CommBackend::Nccl, world), CollectiveError);
    Communicator comm = world.dup();
    EXPECT_THROW(attach_nccl(comm), CollectiveError);
  }
  if (std::is_same<DeviceSpace, HostSpace>::value) {
    EXPECT_TRUE(mpi_is_device_aware());
  }
}

// On a CUDA build with one GPU per rank: the same collectives through NCCL and through MPI.
TEST(DeviceBackend, NcclMatchesMpi) {
  const Communicator world = Communicator::world();
  if (!nccl_available()) {
    GTEST_SKIP() << "skipped: this build has no NCCL";
  }
  if (resolve_comm_backend(CommBackend::Auto, world) != CommBackend::Nccl) {
    GTEST_SKIP() << "skipped: ranks share a GPU, which NCCL refuses";
  }
  Communicator nccl = world.dup();
  attach_nccl(nccl);
  const Communicator mpi = world.dup();
  const int64_t count = 4099;
  Vector<float> a = on_device(values(world.rank(), count, true)),
                b = on_device(values(world.rank(), count, true));
  device_all_reduce(nccl, a.data(), count, ReduceOp::Sum, "test");
  device_all_reduce(mpi, b.data(), count, ReduceOp::Sum, "test");
  const auto x = on_host(a), y = on_host(b);
  for (int64_t i = 0; i < count; ++i)  // the summation orders differ
    ASSERT_NEAR(x[size_t(i)], y[size_t(i)], 1e-5f * (1.0f + std::fabs(y[size_t(i)])));
  Vector<float> c = on_device(values(world.rank(), count, true)),
                d = on_device(values(world.rank(), count, true));
  all_reduce_bf16(nccl, c.data(), count, "test");
  all_reduce_bf16(mpi, d.data(), count, "test");
  EXPECT_EQ(on_host(c), on_host(d));  // same fp32 sums in rank order: same bits
  EXPECT_EQ(nccl.stats().get("test", Collective::AllReduce).bytes,
            mpi.stats().get("test", Collective::AllReduce).bytes);
}
