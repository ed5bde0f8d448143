// SPDX-License-Identifier: BSD-3-Clause
// Runs under mpiexec with 1, 2, 4 and 8 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/device_collectives.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/comm/reduced_precision.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"

using namespace tessera;

namespace {

// Independent enumeration: all (d, x, y, z) with product P.
std::vector<std::array<int, 4>> brute_force_shapes(int p) {
  std::vector<std::array<int, 4>> out;
  for (int d = 1; d <= p; ++d)
    for (int x = 1; x <= p; ++x)
      for (int y = 1; y <= p; ++y)
        for (int z = 1; z <= p; ++z)
          if (d * x * y * z == p) out.push_back({d, x, y, z});
  return out;
}

std::vector<int> members(const Communicator& comm, int world_rank) {
  std::vector<int> all(size_t(comm.size()));
  MPI_Allgather(&world_rank, 1, MPI_INT, all.data(), 1, MPI_INT, comm.get());
  return all;
}

}  // namespace

TEST(CommStats, DeferredSecondsAreReadWhenTheCountersAre) {
  CommStats stats;
  int reads = 0;
  stats.record("spmm allreduce", Collective::AllReduce, 100, 1.0);
  stats.record_deferred("spmm allreduce", Collective::AllReduce, 50, [&] { return ++reads, 0.5; });
  EXPECT_EQ(reads, 0);
  const CommStats copy = stats;  // settles its source
  EXPECT_EQ(reads, 1);
  const CollectiveCounters c = stats.get("spmm allreduce", Collective::AllReduce);
  EXPECT_EQ(c.calls, 2);
  EXPECT_EQ(c.bytes, 150);
  EXPECT_DOUBLE_EQ(c.seconds, 1.5);
  EXPECT_DOUBLE_EQ(copy.total(Collective::AllReduce).seconds, 1.5);
  EXPECT_EQ(stats.total_bytes(), 150);
  EXPECT_EQ(reads, 1);
}

TEST(GridShape, Prints) {
  EXPECT_EQ((GridShape{1, 2, 3, 4}).str(), "2x3x4");
  EXPECT_EQ((GridShape{2, 1, 3, 4}).str(), "2x1x3x4");
  EXPECT_EQ((GridShape{2, 1, 3, 4}).size(), 24);
}

TEST(ProcessGrid, FactorizationsAreExactlyTheDivisorTuples) {
  for (int p : {1, 2, 6, 8, 12}) {
    std::set<std::array<int, 4>> listed;
    for (const GridShape& s : ProcessGrid::factorizations(p, true)) listed.insert({s.d, s.x, s.y, s.z});
    const auto expected = brute_force_shapes(p);
    const std::set<std::array<int, 4>> expected_set(expected.begin(), expected.end());
    EXPECT_EQ(listed, expected_set) << "P = " << p;
    EXPECT_EQ(listed.size(), ProcessGrid::factorizations(p, true).size()) << "duplicates for P = " << p;
    for (const GridShape& s : ProcessGrid::factorizations(p, false)) EXPECT_EQ(s.d, 1);
  }
  EXPECT_EQ(ProcessGrid::factorizations(8, true).size(), 20u);
  EXPECT_EQ(ProcessGrid::factorizations(8, false).size(), 10u);
}

TEST(ProcessGrid, EveryFactorizationHasTheRightAxisCommunicators) {
  const Communicator world = Communicator::world();
  const int p = world.size(), me = world.rank();
  for (const std::array<int, 4>& shape : brute_force_shapes(p)) {
    const int gd = shape[0], gx = shape[1], gy = shape[2], gz = shape[3];
    const ProcessGrid grid(world, GridShape{gd, gx, gy, gz});
    SCOPED_TRACE(grid.shape().str());
    // rank = ((d*Gz + z)*Gx + x)*Gy + y, decoded independently.
    const int y = me % gy, x = (me / gy) % gx, z = (me / (gy * gx)) % gz, d = me / (gy * gx * gz);
    EXPECT_EQ(grid.coords().d, d);
    EXPECT_EQ(grid.coords().x, x);
    EXPECT_EQ(grid.coords().y, y);
    EXPECT_EQ(grid.coords().z, z);
    auto rank_at = [&](int dd, int xx, int yy, int zz) { return ((dd * gz + zz) * gx + xx) * gy + yy; };
    std::vector<int> expect_d, expect_x, expect_y, expect_z, expect_replica;
    for (int i = 0; i < gd; ++i) expect_d.push_back(rank_at(i, x, y, z));
    for (int i = 0; i < gx; ++i) expect_x.push_back(rank_at(d, i, y, z));
    for (int i = 0; i < gy; ++i) expect_y.push_back(rank_at(d, x, i, z));
    for (int i = 0; i < gz; ++i) expect_z.push_back(rank_at(d, x, y, i));
    for (int r = 0; r < p; ++r)
      if (r / (gx * gy * gz) == d) expect_replica.push_back(r);
    EXPECT_EQ(members(grid.axis(Axis::D), me), expect_d);
    EXPECT_EQ(members(grid.axis(Axis::X), me), expect_x);
    EXPECT_EQ(members(grid.axis(Axis::Y), me), expect_y);
    EXPECT_EQ(members(grid.axis(Axis::Z), me), expect_z);
    EXPECT_EQ(members(grid.replica(), me), expect_replica);
    EXPECT_EQ(grid.axis(Axis::X).rank(), x);
    EXPECT_EQ(grid.rank_of(grid.coords_of(me)), me);
    // A sum over an axis adds exactly that axis' members.
    const int sum = all_reduce_value(grid.axis(Axis::Y), me, ReduceOp::Sum, "grid");
    EXPECT_EQ(sum, std::accumulate(expect_y.begin(), expect_y.end(), 0));
  }
}

TEST(ProcessGrid, WrongShapeFailsOnEveryRank) {
  const Communicator world = Communicator::world();
  const int p = world.size();
  for (const GridShape& bad : {GridShape{1, 1, 1, p + 1}, GridShape{1, 0, 1, p}, GridShape{2, 1, 1, p}}) {
    try {
      ProcessGrid grid(world, bad);
      ADD_FAILURE() << "accepted " << bad.str();
    } catch (const CollectiveError& e) {
      const std::string what = e.what();
      const bool zero = bad.x == 0;
      EXPECT_NE(
          what.find(zero ? "every axis must be at least 1" : "ranks but the job has " + std::to_string(p)),
          std::string::npos)
          << what;
    }
  }
}

TEST(Communicator, CheckCarriesTheFailingRanksMessageToAll) {
  const Communicator world = Communicator::world();
  const int last = world.size() - 1;
  try {
    world.check(world.rank() != last, "rank " + std::to_string(world.rank()) + " saw a bad row");
    FAIL() << "check passed";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(std::string(e.what()), "rank " + std::to_string(last) + " saw a bad row");
  }
  EXPECT_NO_THROW(world.check(true, "unused"));
  try {
    world.run_on(0, [] { fail("only rank 0 knows"); });
    FAIL() << "run_on passed";
  } catch (const CollectiveError& e) {
    EXPECT_STREQ(e.what(), "only rank 0 knows");
  }
}

TEST(Collectives, ValuesAndByteCounts) {
  const Communicator world = Communicator::world();
  const Communicator comm = world.dup();  // shares the stats of world
  const int p = comm.size(), r = comm.rank();
  comm.stats().clear();

  std::vector<float> a(10);
  std::iota(a.begin(), a.end(), float(r));
  all_reduce(comm, a.data(), 10, ReduceOp::Sum, "t");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a[size_t(i)], float(p * i + p * (p - 1) / 2));
  EXPECT_EQ(all_reduce_value(comm, r, ReduceOp::Max, "t"), p - 1);
  EXPECT_EQ(all_reduce_value(comm, r, ReduceOp::Min, "t"), 0);

  std::vector<int64_t> mine = {r, 10 * r, 100 * r}, gathered(size_t(3 * p));
  all_gather(comm, mine.data(), 3, gathered.data(), "t");
  for (int q = 0; q < p; ++q) EXPECT_EQ(gathered[size_t(3 * q + 2)], 100 * q);

  std::vector<double> full(size_t(2 * p)), part(2);
  for (int i = 0; i < 2 * p; ++i) full[size_t(i)] = i + r;
  reduce_scatter(comm, full.data(), part.data(), 2, ReduceOp::Sum, "t");
  EXPECT_EQ(part[0], double(p * (2 * r) + p * (p - 1) / 2));

  std::vector<int32_t> send(static_cast<size_t>(p)), recv(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) send[size_t(q)] = 1000 * r + q;
  all_to_all(comm, send.data(), 1, recv.data(), "t");
  for (int q = 0; q < p; ++q) EXPECT_EQ(recv[size_t(q)], 1000 * q + r);

  // Variable: rank r sends q+1 copies of r to rank q.
  std::vector<int64_t> counts(static_cast<size_t>(p)), values;
  for (int q = 0; q < p; ++q) counts[size_t(q)] = q + 1, values.insert(values.end(), size_t(q + 1), r);
  const std::vector<int64_t> recv_counts = exchange_counts(comm, counts, "t");
  std::vector<int64_t> got(size_t(p * (r + 1)));
  all_to_allv(comm, values.data(), counts, got.data(), recv_counts, "t");
  for (int q = 0; q < p; ++q) EXPECT_EQ(recv_counts[size_t(q)], r + 1);
  for (int q = 0; q < p; ++q) EXPECT_EQ(got[size_t(q * (r + 1))], q);

  float b = r == 0 ? 3.5f : 0.0f;
  broadcast(comm, &b, 1, 0, "t");
  EXPECT_EQ(b, 3.5f);

  // Byte accounting, as comm_stats.hpp defines it.
  const CommStats& s = world.stats();
  EXPECT_EQ(s.get("t", Collective::AllReduce).calls, 3);
  EXPECT_EQ(s.get("t", Collective::AllReduce).bytes, 10 * 4 + 4 + 4);
  EXPECT_EQ(s.get("t", Collective::AllGather).bytes, 3 * 8);
  EXPECT_EQ(s.get("t", Collective::ReduceScatter).bytes, 2 * p * 8);
  int64_t to_others = 0;
  for (int q = 0; q < p; ++q)
    if (q != r) to_others += (q + 1) * 8;
  EXPECT_EQ(s.get("t", Collective::AllToAll).calls, 3);
  EXPECT_EQ(s.get("t", Collective::AllToAll).bytes, (p - 1) * 4 + (p - 1) * 8 + to_others);
  EXPECT_EQ(s.get("t", Collective::Broadcast).bytes, r == 0 ? 4 : 0);
  EXPECT_EQ(s.total_bytes(), 48 + 24 + 2 * p * 8 + (p - 1) * 12 + to_others + (r == 0 ? 4 : 0));
}

// One buffer grouped by rank against per-rank buckets, with empty groups (rank r sends (q + r) % 3 values to
// q, so some ranks send nothing to some others) and with nothing at all; also into one reused buffer that
// starts longer than anything received.
TEST(Collectives, GroupedExchangeMatchesBuckets) {
  const Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  std::vector<int64_t> reused(1000, -7);
  for (const bool empty : {false, true}) {
    std::vector<std::vector<int64_t>> buckets(static_cast<size_t>(p));
    std::vector<int64_t> grouped, counts(static_cast<size_t>(p), 0);
    for (int q = 0; q < p; ++q)
      for (int i = 0; i < (empty ? 0 : (q + r) % 3); ++i) {
        buckets[size_t(q)].push_back(1000 * r + 10 * q + i);
        grouped.push_back(1000 * r + 10 * q + i);
        ++counts[size_t(q)];
      }
    std::vector<int64_t> bucket_counts, grouped_counts;
    const std::vector<int64_t> want = exchange_buckets(comm, buckets, "t", &bucket_counts);
    const std::vector<int64_t> got = exchange_grouped(comm, grouped, counts, "t", &grouped_counts);
    EXPECT_EQ(got, want);
    EXPECT_EQ(grouped_counts, bucket_counts);
    std::vector<int64_t> into_counts;
    exchange_grouped_into(comm, grouped, counts, "t", reused, &into_counts);
    EXPECT_EQ(reused, want);
    EXPECT_EQ(into_counts, bucket_counts);
    for (int q = 0; q < p; ++q) EXPECT_EQ(grouped_counts[size_t(q)], empty ? 0 : (q + r) % 3);
  }
}

TEST(Collectives, NonBlockingMatchBlocking) {
  const Communicator comm = Communicator::world().dup();
  const int p = comm.size(), r = comm.rank();
  std::vector<float> x(1000, float(r + 1));
  std::vector<Request> pending;
  pending.push_back(iall_reduce(comm, x.data(), 1000, ReduceOp::Sum, "nb"));
  wait_all(pending);
  EXPECT_EQ(x[999], float(p * (p + 1) / 2));
  const CommStats& s = comm.stats();
  EXPECT_EQ(s.get("nb", Collective::AllReduce).bytes, 4000);
  EXPECT_EQ(s.get("nb", Collective::AllReduce).calls, 1);
  // A request left unwaited completes in its destructor and so records nothing twice.
  { Request dropped = iall_reduce(comm, x.data(), 1, ReduceOp::Max, "dropped"); }
  EXPECT_EQ(s.get("dropped", Collective::AllReduce).calls, 0);
}

// Every collective against its plain definition (computed here from each rank's known inputs), with the
// chunk limit at a few bytes so that every count takes the piecewise path: the messages past 2^31 elements
// that a big graph produces go the same way. Counts differ per pair, and some are 0.
TEST(Collectives, PiecewiseMatchesDefinitions) {
  const Communicator comm = Communicator::world().dup();
  const int p = comm.size(), me = comm.rank();
  const int64_t saved = mpi_chunk_bytes();
  for (const int64_t limit : {int64_t(1), int64_t(12), int64_t(1) << 30}) {
    set_mpi_chunk_bytes(limit);
    SCOPED_TRACE("chunk bytes " + std::to_string(limit));
    auto value = [](int from, int to, int64_t k) { return int64_t(from) * 1000003 + int64_t(to) * 1009 + k; };
    auto count = [](int from, int to) { return int64_t((from * 7 + to * 3) % 5); };  // 0 to 4
    std::vector<int64_t> send_counts(static_cast<size_t>(p)), recv_counts(static_cast<size_t>(p)), send;
    for (int q = 0; q < p; ++q) {
      send_counts[size_t(q)] = count(me, q);
      recv_counts[size_t(q)] = count(q, me);
      for (int64_t k = 0; k < count(me, q); ++k) send.push_back(value(me, q, k));
    }
    std::vector<int64_t> received(
        size_t(std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t(0))));
    all_to_allv(comm, send.data(), send_counts, received.data(), recv_counts, "piece");
    size_t at = 0;
    for (int q = 0; q < p; ++q)
      for (int64_t k = 0; k < count(q, me); ++k) EXPECT_EQ(received[at++], value(q, me, k));

    std::vector<double> sum(7);
    for (int64_t k = 0; k < 7; ++k) sum[size_t(k)] = double(me + 1) * double(k + 1);
    all_reduce(comm, sum.data(), 7, ReduceOp::Sum, "piece");
    for (int64_t k = 0; k < 7; ++k) EXPECT_EQ(sum[size_t(k)], double(p * (p + 1) / 2) * double(k + 1));

    std::vector<int64_t> mine(5), gathered(size_t(5 * p));
    for (int64_t k = 0; k < 5; ++k) mine[size_t(k)] = value(me, 0, k);
    all_gather(comm, mine.data(), 5, gathered.data(), "piece");
    for (int q = 0; q < p; ++q)
      for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(gathered[size_t(q * 5 + k)], value(q, 0, k));

    std::vector<int64_t> vcounts(static_cast<size_t>(p)), vgathered;
    for (int q = 0; q < p; ++q) vcounts[size_t(q)] = count(q, q);
    std::vector<int64_t> vmine(size_t(count(me, me)));
    for (size_t k = 0; k < vmine.size(); ++k) vmine[k] = value(me, me, int64_t(k));
    vgathered.resize(size_t(std::accumulate(vcounts.begin(), vcounts.end(), int64_t(0))));
    all_gather_v(comm, vmine.data(), vcounts, vgathered.data(), "piece");
    at = 0;
    for (int q = 0; q < p; ++q)
      for (int64_t k = 0; k < count(q, q); ++k) EXPECT_EQ(vgathered[at++], value(q, q, k));

    std::vector<float> blocks(size_t(3 * p)), block(3);
    for (int q = 0; q < p; ++q)
      for (int k = 0; k < 3; ++k) blocks[size_t(q * 3 + k)] = float(me + q + k);
    reduce_scatter(comm, blocks.data(), block.data(), 3, ReduceOp::Sum, "piece");
    for (int k = 0; k < 3; ++k) EXPECT_EQ(block[size_t(k)], float(p * (p - 1) / 2 + p * (me + k)));

    std::vector<int32_t> to_each(size_t(2 * p)), from_each(size_t(2 * p));
    for (int q = 0; q < p; ++q) to_each[size_t(2 * q)] = me * 100 + q, to_each[size_t(2 * q + 1)] = -q;
    all_to_all(comm, to_each.data(), 2, from_each.data(), "piece");
    for (int q = 0; q < p; ++q) {
      EXPECT_EQ(from_each[size_t(2 * q)], q * 100 + me);
      EXPECT_EQ(from_each[size_t(2 * q + 1)], -me);
    }

    std::vector<uint8_t> text(11, uint8_t(me == p - 1 ? 42 : 0));
    broadcast(comm, text.data(), 11, p - 1, "piece");
    for (uint8_t c : text) EXPECT_EQ(c, 42);

    std::vector<float> nb(9, 1.0f);
    Request pending = iall_reduce(comm, nb.data(), 9, ReduceOp::Sum, "piece");
    pending.wait();
    for (float v : nb) EXPECT_EQ(v, float(p));
  }
  set_mpi_chunk_bytes(saved);
}

TEST(Collectives, OversizedCountIsAnError) {
  EXPECT_THROW(mpi_count(int64_t(1) << 31, "MPI_Allreduce"), Error);
  EXPECT_EQ(mpi_count(5, "x"), 5);
}

TEST(Bf16, ConversionRoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(from_bf16(to_bf16(-2.5f)), -2.5f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 0x1p-8f + 0x1p-16f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);  // tie, odd below: rounds up
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(from_bf16(to_bf16(INFINITY))));
  for (float x : {3.14159f, -1e-20f, 6.5e4f, 1e30f})
    EXPECT_LE(std::abs(from_bf16(to_bf16(x)) - x), std::abs(x) * 0x1p-8f) << x;
}

// bf16 on the wire, fp32 sums: against a double-precision sum, each element is off by at most one bf16
// rounding of every rank's input plus one of the result (8 significant bits: unit roundoff u = 2^-8)
// and fp32 addition.
TEST(Bf16, AllReduceIsAccurateIdenticalEverywhereAndHalfTheBytes) {
  const Communicator world = Communicator::world();
  const int p = world.size(), me = world.rank();
  for (int64_t count : {int64_t(1), int64_t(7), int64_t(1000), int64_t(4099)}) {
    auto value = [](int rank, int64_t k) {
      return float(std::sin(0.37 * double(k) + 1.3 * rank) * (1.0 + double(k % 5)));
    };
    Vector<float> data("data", size_t(count));
    auto host = Kokkos::create_mirror_view(data);
    for (int64_t k = 0; k < count; ++k) host(k) = value(me, k);
    Kokkos::deep_copy(data, host);
    world.stats().clear();
    all_reduce_bf16(world, data.data(), count, "bf16");
    Kokkos::deep_copy(host, data);
    for (int64_t k = 0; k < count; ++k) {
      double exact = 0, magnitude = 0;
      for (int r = 0; r < p; ++r) exact += value(r, k), magnitude += std::abs(value(r, k));
      const double bound = p == 1 ? 0.0 : 0x1p-8 * (magnitude + 1.01 * std::abs(exact)) + 1e-6 * magnitude;
      ASSERT_LE(std::abs(double(host(k)) - exact), bound) << "element " << k << " of " << count;
    }
    // Replicas must agree bit for bit.
    std::vector<float> mine(host.data(), host.data() + count), first = mine;
    MPI_Bcast(first.data(), int(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(mine, first);
    const int64_t expected_bytes = p == 1 ? 0 : 2 * count;
    EXPECT_EQ(world.stats().get("bf16", Collective::AllReduce).bytes, expected_bytes);
    // The same data through the fp32 all-reduce: exactly twice the bytes. `data` is device memory on a
    // device build, which the host all_reduce must not be given (it crashed there on the first GPU run).
    if (p > 1) {
      device_all_reduce(world, data.data(), count, ReduceOp::Sum, "f32");
      EXPECT_EQ(world.stats().get("f32", Collective::AllReduce).bytes, 2 * expected_bytes);
    }
  }
}

// Past the MPI chunk limit the bf16 exchanges move in pieces (both stages at once, whichever entry point):
// the same bits and the same counted bytes as in one piece. 12 bytes = 6 bf16 per piece cuts every rank's
// chunk.
TEST(Bf16, PastTheChunkLimitGivesTheSameBits) {
  const Communicator world = Communicator::world();
  const int64_t count = 1001;
  Vector<float> a("a", size_t(count)), b("b", size_t(count));
  auto host = Kokkos::create_mirror_view(a);
  for (int64_t k = 0; k < count; ++k) host(k) = float(std::sin(0.3 * double(k) + world.rank()));
  Kokkos::deep_copy(a, host);
  Kokkos::deep_copy(b, host);
  all_reduce_bf16(world, a.data(), count, "whole");
  const int64_t saved = mpi_chunk_bytes();
  set_mpi_chunk_bytes(12);
  world.stats().clear();
  {
    Bf16AllReduce op(world, b.data(), count / 2, "pieces");
    op.wait();
  }
  all_reduce_bf16(world, b.data() + count / 2, count - count / 2, "pieces");
  set_mpi_chunk_bytes(saved);
  const auto ha = Kokkos::create_mirror_view_and_copy(HostSpace(), a);
  const auto hb = Kokkos::create_mirror_view_and_copy(HostSpace(), b);
  for (int64_t k = 0; k < count; ++k) ASSERT_EQ(ha(k), hb(k)) << k;
  EXPECT_EQ(world.stats().get("pieces", Collective::AllReduce).bytes, world.size() == 1 ? 0 : 2 * count);
}

TEST(Bf16, NonBlockingInChunksMatchesBlocking) {
  const Communicator world = Communicator::world();
  const int64_t count = 3001;
  Vector<float> a("a", size_t(count)), b("b", size_t(count));
  const int me = world.rank();
  auto host = Kokkos::create_mirror_view(a);  // filled on the host: no device lambda in a test body
  for (int64_t k = 0; k < count; ++k) host(k) = float(std::cos(0.01 * double(k * (me + 1))));
  Kokkos::deep_copy(a, host);
  Kokkos::deep_copy(b, host);
  all_reduce_bf16(world, a.data(), count, "blocking");
  std::vector<Bf16AllReduce> pending;
  for (int64_t c = 0; c < 3; ++c) {
    const int64_t r0 = count * c / 3, r1 = count * (c + 1) / 3;
    pending.emplace_back(world, b.data() + r0, r1 - r0, "chunks");
    if (c > 0) pending[size_t(c - 1)].start_gather();  // the order pmm keeps on every rank
    for (Bf16AllReduce& r : pending) r.test();
  }
  for (Bf16AllReduce& r : pending) r.wait();
  const auto ha = Kokkos::create_mirror_view_and_copy(HostSpace(), a);
  const auto hb = Kokkos::create_mirror_view_and_copy(HostSpace(), b);
  for (int64_t k = 0; k < count; ++k) ASSERT_EQ(ha(k), hb(k)) << k;
  EXPECT_EQ(world.stats().get("chunks", Collective::AllReduce).bytes, world.size() == 1 ? 0 : 2 * count);
}
