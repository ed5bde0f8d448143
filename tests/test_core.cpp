// SPDX-License-Identifier: BSD-3-Clause
#include <gtest/gtest.h>

#include <functional>

#include <sys/stat.h>
#include <unistd.h>
#include <Kokkos_Core.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#if defined(KOKKOS_ENABLE_OPENMP)
#include <omp.h>
#endif

#include "support/allocation_count.hpp"
#include "tessera/core/csr.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/flat_id_map.hpp"
#include "tessera/core/huge_pages.hpp"
#include "tessera/core/kernel_profile.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/random.hpp"
#include "tessera/core/scratch.hpp"
#include "tessera/core/stop_signals.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/timer.hpp"

using namespace tessera;

TEST(Philox, KnownAnswers) {
  // Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds).
  struct Case {
    uint32_t ctr[4], key[2], out[4];
  } cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& c : cases) {
    const Philox4x32Block r = philox4x32_10(c.ctr[0], c.ctr[1], c.ctr[2], c.ctr[3], c.key[0], c.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], c.out[i]) << "word " << i;
  }
}

namespace {
// Fills out(i) with the number of counter (i / 100, i % 100) on execution space Space. A free function:
// CUDA builds cannot place device lambdas inside a test body.
template <class Space>
void fill_uniform(const Kokkos::View<float*, Kokkos::HostSpace>& out, const CounterRng& rng) {
  Kokkos::parallel_for(
      "rng", Kokkos::RangePolicy<Space>(0, int64_t(out.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { out(i) = rng.uniform(uint64_t(i / 100), uint64_t(i % 100)); });
  Kokkos::fence();
}
}  // namespace

TEST(CounterRng, SameKeySameNumbersOnAnyBackendAndThreadCount) {
  const int64_t n = 10000;
  const CounterRng rng(42, 7);
  Kokkos::View<float*, Kokkos::HostSpace> parallel("parallel", n), serial("serial", n);
  fill_uniform<Kokkos::DefaultHostExecutionSpace>(parallel, rng);
  fill_uniform<Kokkos::Serial>(serial, rng);
  // Reverse order on the host: the value depends only on the key, never on the visiting order.
  for (int64_t i = n - 1; i >= 0; --i) {
    const float expected = CounterRng(42, 7).uniform(uint64_t(i / 100), uint64_t(i % 100));
    ASSERT_EQ(parallel(i), expected);
    ASSERT_EQ(serial(i), expected);
  }
}

TEST(CounterRng, StreamsAndSeedsDiffer) {
  const CounterRng a(1, 1), b(1, 2), c(2, 1);
  int same_ab = 0, same_ac = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same_ab += a.bits(i, 0).v[0] == b.bits(i, 0).v[0];
    same_ac += a.bits(i, 0).v[0] == c.bits(i, 0).v[0];
  }
  EXPECT_LE(same_ab, 1);
  EXPECT_LE(same_ac, 1);
}

TEST(CounterRng, BatchedWordsAreWhatBelowScales) {
  const CounterRng rng(5, 77);
  for (const size_t count : {size_t(0), size_t(1), size_t(7), size_t(16), size_t(1000)}) {
    std::vector<uint64_t> a(count), b(count), words(count, 0);
    for (size_t i = 0; i < count; ++i) {
      a[i] = splitmix64(i) >> (i % 40);  // small and full-width counters alike
      b[i] = i * 0x9E3779B97F4A7C15ull;
    }
    rng.below_words(a.data(), b.data(), count, words.data());
    for (size_t i = 0; i < count; ++i) {
      const Philox4x32Block r = rng.bits(a[i], b[i]);
      ASSERT_EQ(words[i], uint64_t(r.v[2]) << 32 | r.v[3]) << i;
      for (const uint64_t n : {uint64_t(1), uint64_t(2), uint64_t(15), uint64_t(1) << 40})
        ASSERT_EQ(mul_high64(words[i], n), rng.below(a[i], b[i], n)) << i << " below " << n;
    }
  }
}

TEST(CounterRng, RunsOfBlocksAreTheBlocks) {
  const CounterRng rng(8, 3);
  std::vector<uint32_t> words;
  for (const int count : {0, 1, 15, 16, 17, 32, 100})
    for (const uint64_t b :
         {uint64_t(0), uint64_t(0xFFFFFFF8u), ~uint64_t(0) - 5}) {  // carries into the high word
      const uint64_t a = uint64_t(77) << 33 | 5;
      words.assign(size_t(4 * count), 0);
      rng.bits_run(a, b, count, words.data());
      for (int k = 0; k < count; ++k) {
        const Philox4x32Block r = rng.bits(a, b + uint64_t(k));
        for (int q = 0; q < 4; ++q) ASSERT_EQ(words[size_t(q * count + k)], r.v[q]) << count << ", " << k;
      }
    }
}

TEST(CounterRng, DistributionsHaveTheirMoments) {
  const CounterRng rng(3, 9);
  const int n = 200000;
  double su = 0, sd = 0, sn = 0, sn2 = 0;
  std::vector<int> buckets(10, 0);
  for (int i = 0; i < n; ++i) {
    const float u = rng.uniform(uint64_t(i), 0, i & 3);
    const double d = rng.uniform_double(uint64_t(i), 1);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    const uint64_t k = rng.below(uint64_t(i), 2, 10);
    ASSERT_LT(k, 10u);
    ++buckets[k];
    const float z = rng.normal(uint64_t(i), 3);
    su += u;
    sd += d;
    sn += z;
    sn2 += double(z) * z;
  }
  // Standard errors: uniform mean 0.00065, normal mean 0.0022, normal variance 0.0032.
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sd / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.015);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
  double chi2 = 0;
  for (int b : buckets) chi2 += (b - n / 10.0) * (b - n / 10.0) / (n / 10.0);
  EXPECT_LT(chi2, 27.9);  // 9 degrees of freedom, p = 0.001
}

TEST(MulHigh64, MatchesWideMultiplication) {
  const uint64_t values[] = {0, 1, 3, 0xFFFFFFFFull, 0x100000000ull, 0x123456789ABCDEFull, ~0ull};
  for (uint64_t a : values)
    for (uint64_t b : values)
      EXPECT_EQ(mul_high64(a, b), uint64_t((unsigned __int128)a * b >> 64)) << a << " * " << b;
}

namespace {
CsrMatrix<float, HostSpace> make_csr(std::vector<int64_t> ptr, std::vector<int64_t> idx, int64_t cols) {
  CsrMatrix<float, HostSpace> m;
  m.num_rows = int64_t(ptr.size()) - 1;
  m.num_cols = cols;
  m.row_ptr = HostVector<int64_t>("ptr", ptr.size());
  m.col_idx = HostVector<int64_t>("idx", idx.size());
  for (size_t i = 0; i < ptr.size(); ++i) m.row_ptr(i) = ptr[i];
  for (size_t i = 0; i < idx.size(); ++i) m.col_idx(i) = idx[i];
  return m;
}

std::string validation_error(const CsrMatrix<float, HostSpace>& m) {
  try {
    validate_csr(m, "A");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Csr, ValidateAcceptsGoodAndNamesEachViolation) {
  EXPECT_EQ(validation_error(make_csr({0, 2, 2, 3}, {0, 2, 1}, 3)), "");
  EXPECT_EQ(validation_error(make_csr({1, 2, 2, 3}, {0, 2, 1}, 3)), "A: row_ptr(0) is 1, expected 0");
  EXPECT_EQ(validation_error(make_csr({0, 2, 1, 3}, {0, 2, 1}, 3)), "A: row_ptr decreases at row 1");
  EXPECT_EQ(validation_error(make_csr({0, 2, 2, 3}, {0, 3, 1}, 3)), "A: row 0 has column 3 outside [0, 3)");
  EXPECT_EQ(validation_error(make_csr({0, 2, 2, 2}, {0, 2, 1}, 3)),
            "A: row_ptr ends at 2 but there are 3 column ids");
}

TEST(Errors, FailJoinsItsParts) {
  try {
    fail("file ", "x.h5", ": row ", 7, " is ", 1.5);
    FAIL() << "fail() returned";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "file x.h5: row 7 is 1.5");
  }
  EXPECT_NO_THROW(require(true, "never"));
  EXPECT_THROW(require(false, "always"), Error);
}

TEST(Progress, ReportsCountRateAndTimeLeft) {
  EXPECT_EQ(tessera::Progress::report("prep: features", 250, 1000, 5.0),
            "prep: features: 250/1000 (25%), 50/s, ETA 15 s");
  EXPECT_EQ(tessera::Progress::report("load", 3000000, 9000000, 2.0),
            "load: 3000000/9000000 (33%), 1.5M/s, ETA 4 s");
  EXPECT_EQ(tessera::Progress::report("x", 1000, 601000, 1.0),
            "x: 1000/601000 (0%), 1.0k/s, ETA 10 min 00 s");
  EXPECT_EQ(tessera::Progress::report("x", 10, 72010, 1.0), "x: 10/72010 (0%), 10/s, ETA 2 h 00 min");
  // Unknown total: no percentage and no ETA; nothing done yet: no rate to extrapolate from.
  EXPECT_EQ(tessera::Progress::report("scan", 42, 0, 2.0), "scan: 42, 21/s");
  EXPECT_EQ(tessera::Progress::report("scan", 0, 10, 0.0), "scan: 0/10 (0%), 0/s");
}

TEST(Timers, ScopedPhaseAccumulates) {
  PhaseTimers timers;
  {
    ScopedPhase phase(timers, "sleep");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  { ScopedPhase phase(timers, "sleep"); }
  EXPECT_GE(timers.get("sleep"), 0.019);
  EXPECT_EQ(timers.get("never"), 0.0);
  EXPECT_GT(peak_rss_bytes(), 0);
}

TEST(Timers, DeferredPhasesAreReadOnceWhenATotalIs) {
  PhaseTimers timers;
  int reads = 0;
  timers.add("spmm", 1.0);
  timers.add_deferred("spmm", [&] { return ++reads, 0.5; });
  timers.add_deferred("gemm", [&] { return ++reads, 0.25; });
  EXPECT_EQ(reads, 0);
  const PhaseTimers copy = timers;  // the copy settles its source first
  EXPECT_EQ(reads, 2);
  EXPECT_DOUBLE_EQ(timers.get("spmm"), 1.5);
  EXPECT_DOUBLE_EQ(copy.get("spmm"), 1.5);
  EXPECT_DOUBLE_EQ(copy.all().at("gemm"), 0.25);
  EXPECT_EQ(reads, 2);
  timers.clear();
  EXPECT_EQ(timers.get("spmm"), 0.0);
}

// Kernels for the profile tests (nvcc takes no device lambda inside a test's private body).
void fill_square_roots(const Vector<double>& x) {
  Kokkos::parallel_for(
      "tessera::test_fill", Kokkos::RangePolicy<ExecSpace>(0, int64_t(x.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { x(i) = ::sqrt(double(i)); });
}

double sum_of(const Vector<double>& x) {
  double total = 0;
  Kokkos::parallel_reduce(
      "tessera::test_sum", Kokkos::RangePolicy<ExecSpace>(0, int64_t(x.extent(0))),
      KOKKOS_LAMBDA(int64_t i, double& s) { s += x(i); }, total);
  return total;
}

TEST(Timers, TimePhaseAddsAKernelsTimeWhenRead) {
  PhaseTimers timers;
  Vector<double> x("x", size_t(1) << 20);
  for (int k = 0; k < 3; ++k) time_phase(timers, "fill", [&] { fill_square_roots(x); });
  const double seconds = timers.get("fill");
  EXPECT_GT(seconds, 0.0);
  EXPECT_LT(seconds, 60.0);
  EXPECT_EQ(timers.get("fill"), seconds);
}

const KernelTime* find_time(const std::vector<KernelTime>& totals, const std::string& name) {
  for (const KernelTime& t : totals)
    if (t.name == name) return &t;
  return nullptr;
}

TEST(KernelProfile, TimesKernelsCopiesAndRegionsWhileItLives) {
  const size_t n = size_t(1) << 16;
  Vector<double> x("x", n);
  HostVector<double> host("host", n);
  fill_square_roots(x);  // before the profile: not counted
  {
    KernelProfile profile;
    EXPECT_TRUE(kernel_profile_active());
    EXPECT_THROW(KernelProfile second, Error);
    for (int k = 0; k < 3; ++k) fill_square_roots(x);
    EXPECT_GT(sum_of(x), 0.0);
    Kokkos::deep_copy(host, x);
    { const ProfileRegion library_call("library call"); }
    const AllocationTotals before = profile.allocations();
    const Vector<float> made("made in the profile", 1000);
    EXPECT_EQ(profile.allocations().count, before.count + 1);
    EXPECT_GE(profile.allocations().bytes, before.bytes + int64_t(1000 * sizeof(float)));
    const std::vector<KernelTime> totals = profile.totals();
    ASSERT_NE(find_time(totals, "tessera::test_fill"), nullptr);
    EXPECT_EQ(find_time(totals, "tessera::test_fill")->calls, 3);
    EXPECT_GT(find_time(totals, "tessera::test_fill")->seconds, 0.0);
    ASSERT_NE(find_time(totals, "tessera::test_sum"), nullptr);
    EXPECT_EQ(find_time(totals, "tessera::test_sum")->calls, 1);
    ASSERT_NE(find_time(totals, "library call"), nullptr);
    EXPECT_EQ(find_time(totals, "library call")->calls, 1);
    int64_t copied = 0;
    for (const KernelTime& t : totals)
      if (t.name.rfind("deep_copy ", 0) == 0) copied += t.bytes;
    EXPECT_EQ(copied, int64_t(n * sizeof(double)));
    for (size_t k = 1; k < totals.size(); ++k) EXPECT_GE(totals[k - 1].seconds, totals[k].seconds);
    const std::vector<std::string> lines =
        describe_kernel_profile(totals, AllocationTotals{6, 3000000}, 3, 1.0, 2);
    ASSERT_GE(lines.size(), 5u);
    EXPECT_NE(lines[0].find("mean of 3"), std::string::npos) << lines[0];
    EXPECT_NE(lines[3].find("measured epoch 1000.000 ms"), std::string::npos) << lines[3];
    EXPECT_EQ(lines.back().find("  allocations 2.0 per epoch, 1.00 MB"), 0u) << lines.back();
  }
  EXPECT_FALSE(kernel_profile_active());
  { const ProfileRegion unprofiled("unprofiled"); }  // no profile: nothing happens
  KernelProfile again;                               // the callbacks were removed: a new profile may start
  EXPECT_TRUE(again.totals().empty());
}

// The profile counts allocations through the Kokkos hook and calls the hook set before it (the huge-page
// advice's), which is back in place when the profile ends.
TEST(KernelProfile, ChainsTheAllocationHookSetBefore) {
  const fixtures::AllocationCount outer;
  {
    KernelProfile profile;
    const Vector<float> inside("inside", 10);
    EXPECT_EQ(profile.allocations().count, 1);
  }
  EXPECT_EQ(outer.count(), 1);
  const Vector<float> after("after", 10);
  EXPECT_EQ(outer.count(), 2);
}

TEST(Scratch, OneBufferPerKeyGrownAsNeeded) {
  void* a = scratch_bytes("test.a", 100);
  EXPECT_EQ(scratch_bytes("test.a", 64), a);
  EXPECT_NE(scratch_bytes("test.b", 64), a);
  void* grown = scratch_bytes("test.a", 1000);
  EXPECT_EQ(scratch_bytes("test.a", 1200), grown);  // a growth leaves a quarter more room
  const auto m = scratch_matrix<float>("test.m", 3, 4);
  EXPECT_EQ(m.extent(0), 3u);
  EXPECT_EQ(m.extent(1), 4u);
  EXPECT_EQ(scratch_vector<double>("test.v", 5).extent(0), 5u);
}

// CPU lists of the ranks on one node -> the threads each gets by default.
std::vector<int> default_threads(const std::vector<std::vector<int>>& masks, int cpus_per_task = 0) {
  std::vector<int> threads;
  for (int r = 0; r < int(masks.size()); ++r)
    threads.push_back(default_thread_count(masks, r, cpus_per_task));
  return threads;
}

TEST(Threads, DefaultSplitsSharedCpusAndKeepsOwnCores) {
  const std::vector<int> two{0, 1}, four{0, 1, 2, 3};
  EXPECT_EQ(default_threads({two}), (std::vector<int>{2}));
  // 8 ranks on 2 shared cores: 1 each (never 0), not 2 each.
  EXPECT_EQ(default_threads(std::vector<std::vector<int>>(8, two)), std::vector<int>(8, 1));
  EXPECT_EQ(default_threads({four, four}), (std::vector<int>{2, 2}));
  EXPECT_EQ(default_threads({four, four, four}), (std::vector<int>{1, 1, 1}));  // 4/3 rounds down
  // Ranks bound to their own cores (srun --cpu-bind=cores) get all of them.
  EXPECT_EQ(default_threads({{0, 1, 2}, {3, 4, 5}, {6}}), (std::vector<int>{3, 3, 1}));
  // Partly shared: {0,1} shared by two, 2 and 3 the first rank's own -> 1 + 2, and 1.
  EXPECT_EQ(default_threads({four, two}), (std::vector<int>{3, 1}));
  // Slurm's --cpus-per-task caps what an unbound rank would take.
  EXPECT_EQ(default_threads({four}, 2), (std::vector<int>{2}));
  EXPECT_EQ(default_threads({two}, 8), (std::vector<int>{2}));
}

TEST(Threads, RuntimeRecordsWhatKokkosAndBlasRun) {
  const ThreadChoice& choice = thread_choice();
  ASSERT_TRUE(choice.known);
  EXPECT_EQ(choice.threads, int(Kokkos::DefaultHostExecutionSpace().concurrency()));
#if defined(KOKKOS_ENABLE_OPENMP)
  EXPECT_EQ(omp_get_max_threads(), choice.threads);  // what OpenBLAS's OpenMP build uses per call
#endif
  EXPECT_EQ(choice.world_ranks, 1);
  EXPECT_EQ(choice.nodes, 1);
  EXPECT_EQ(choice.node_ranks, 1);
  EXPECT_GE(choice.node_cpus, 1);
  EXPECT_EQ(choice.min_threads, choice.threads);
  EXPECT_NE(choice.describe().find("1 rank on 1 node"), std::string::npos) << choice.describe();
}

// Against std::unordered_map: random ids (dense and spread over 2^40, many repeated), through several
// growths.
TEST(FlatIdMap, AgreesWithStdUnorderedMap) {
  std::mt19937_64 gen(11);
  for (int64_t range : {int64_t(50), int64_t(1) << 20, int64_t(1) << 40}) {
    FlatIdMap map(range == 50 ? 0 : 8);
    std::unordered_map<int64_t, int64_t> reference;
    std::uniform_int_distribution<int64_t> id(0, range - 1);
    for (int64_t k = 0; k < 20000; ++k) {
      const int64_t key = id(gen);
      const auto [value, inserted] = map.try_emplace(key, k);
      const auto [it, ref_inserted] = reference.emplace(key, k);
      ASSERT_EQ(inserted, ref_inserted) << "id " << key;
      ASSERT_EQ(value, it->second) << "id " << key;
    }
    EXPECT_EQ(map.size(), reference.size());
    for (const auto& [key, value] : reference) ASSERT_EQ(map.find(key), value);
    for (int k = 0; k < 1000; ++k) {
      const int64_t key = id(gen);
      ASSERT_EQ(map.find(key), reference.count(key) ? reference.at(key) : -1);
    }
  }
  FlatIdMap map;
  EXPECT_EQ(map.find(-5), -1);
  EXPECT_THROW(map.try_emplace(-1, 0), Error);
}

// The allocation hook advises large host Views (where the kernel has THP) and leaves their contents alone;
// small Views are not advised.
TEST(HugePages, LargeHostViewsAreAdvisedAndKeepTheirValues) {
  ASSERT_TRUE(advise_huge_pages_for_host_views(int64_t(4) << 20));
  const std::string mode = transparent_huge_page_mode();
  const HugePageAdvice before = huge_page_advice();
  {
    Kokkos::View<float*, Kokkos::HostSpace> small("small", 1000);
    EXPECT_EQ(huge_page_advice().views, before.views);
    Kokkos::View<float*, Kokkos::HostSpace> large("large", size_t(8) << 20);       // 32 MiB
    for (size_t i = 0; i < large.extent(0); i += 4099) EXPECT_EQ(large(i), 0.0f);  // zero-filled after advice
    large(12345) = 3.0f;
    EXPECT_EQ(large(12345), 3.0f);
  }
  const HugePageAdvice after = huge_page_advice();
  if (mode == "madvise" || mode == "always") {
    EXPECT_EQ(after.views, before.views + 1);
    EXPECT_GE(after.bytes - before.bytes, int64_t(28) << 20);  // the whole 2 MiB pages inside 32 MiB
  } else {
    std::printf("transparent huge pages: mode '%s': madvise may refuse; %lld views advised\n", mode.c_str(),
                static_cast<long long>(after.views - before.views));
  }
}

// A buffer of its own pages reads zeros until written, moves without copying, and gives its pages back:
// the resident memory that 64 MiB of written pages added is gone after reset.
TEST(PageBuffer, ZeroedMovableAndReturned) {
  PageBuffer<int32_t> none(0);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.size(), 0u);
  const size_t count = size_t(16) << 20;  // 64 MiB
  const auto resident = [] {
    std::FILE* statm = std::fopen("/proc/self/statm", "r");
    long pages = 0, size = 0;
    if (statm) {
      if (std::fscanf(statm, "%ld %ld", &size, &pages) != 2) pages = 0;
      std::fclose(statm);
    }
    return double(pages) * 4096.0;
  };
  PageBuffer<int32_t> a(count);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a[0], 0);
  EXPECT_EQ(a[count - 1], 0);
  const double before = resident();
  for (size_t i = 0; i < count; ++i) a[i] = int32_t(i);
  EXPECT_GT(resident() - before, 48.0 * 1048576);
  PageBuffer<int32_t> b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.size(), count);
  EXPECT_EQ(b[12345], 12345);
  const double written = resident();
  b.reset();
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_GT(written - resident(), 48.0 * 1048576);
}

namespace {

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string plan_error(const PathPlan& plan) {
  try {
    plan.check_and_prepare();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Paths, OutputsNeverNameAnInputAnotherOutputOrADirectory) {
  char pattern[] = "/tmp/tessera-paths-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const std::string graph = dir + "/g.h5";
  std::ofstream(graph) << "graph";
  ASSERT_EQ(symlink(graph.c_str(), (dir + "/alias.h5").c_str()), 0);
  ASSERT_EQ(link(graph.c_str(), (dir + "/hard.h5").c_str()), 0);
  const auto with_output = [&](const std::string& path, const std::string& option) {
    PathPlan plan;
    plan.input(graph, "--data");
    plan.output_file(path, option);
    return plan_error(plan);
  };
  // The same file by its name, through "..", a symbolic link and a hard link.
  EXPECT_EQ(with_output(graph, "--metrics"),
            graph + ": --metrics names the input of --data; it would be overwritten (choose another path)");
  EXPECT_NE(with_output(dir + "/../" + dir.substr(5) + "/g.h5", "--metrics").find("names the input"),
            std::string::npos);
  EXPECT_NE(with_output(dir + "/alias.h5", "--save-embeddings").find("names the input of --data"),
            std::string::npos);
  EXPECT_NE(with_output(dir + "/hard.h5", "--save-embeddings").find("names the input of --data"),
            std::string::npos);
  EXPECT_EQ(with_output(dir, "--save-predictions"),
            dir + ": --save-predictions names a directory; give a file name");
  EXPECT_NE(with_output(dir + "/absent/p.txt", "--metrics").find("cannot write --metrics (No such file"),
            std::string::npos);
  EXPECT_EQ(with_output(dir + "/p.txt", "--save-predictions"), "no error");
  EXPECT_NE(access((dir + "/p.txt").c_str(), F_OK), 0) << "the probe leaves nothing behind";
  PathPlan two;
  two.output_file(dir + "/out", "--save-predictions");
  two.output_file(dir + "/./out", "--save-embeddings");
  EXPECT_EQ(
      plan_error(two),
      dir + "/./out: given to both --save-predictions and --save-embeddings; each output needs its own path");
  // A checkpoint directory is created (parents too), and a file in its place refused.
  PathPlan created;
  created.output_directory(dir + "/ck/a/b", "--checkpoint");
  created.output_file(dir + "/ck/a/b/checkpoint.h5", "--checkpoint");
  EXPECT_EQ(plan_error(created), "no error");
  struct stat st {};
  EXPECT_TRUE(stat((dir + "/ck/a/b").c_str(), &st) == 0 && S_ISDIR(st.st_mode));
  PathPlan file_as_dir;
  file_as_dir.output_directory(graph, "--checkpoint");
  EXPECT_EQ(plan_error(file_as_dir), graph + ": --checkpoint names a file, not a directory");
  EXPECT_EQ(resolved_path(dir + "/not-yet"),
            dir.substr(0, 4) == "/tmp" ? resolved_path(dir) + "/not-yet" : "");
  EXPECT_EQ(resolved_path(dir + "/absent/x"), "");
  std::string command = "rm -rf " + dir;
  EXPECT_EQ(std::system(command.c_str()), 0);
}

// The output policy: a link is written through (also to a file not there yet), a FIFO refused without being
// opened, nothing left beside the target.
TEST(Paths, OutputsGoThroughLinksAndNeverOverAFifo) {
  char pattern[] = "/tmp/tessera-outputs-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  ASSERT_EQ(mkdir((dir + "/store").c_str(), 0755), 0);
  ASSERT_EQ(symlink("store/new.txt", (dir + "/dangling").c_str()), 0);
  ASSERT_EQ(symlink("dangling", (dir + "/chain").c_str()), 0);
  EXPECT_EQ(output_target(dir + "/chain"), resolved_path(dir) + "/store/new.txt");
  write_text_output(dir + "/chain", "one\n", "a test output");
  struct stat st {};
  EXPECT_TRUE(lstat((dir + "/chain").c_str(), &st) == 0 && S_ISLNK(st.st_mode));
  std::ifstream in(dir + "/store/new.txt");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "one");
  ASSERT_EQ(mkfifo((dir + "/pipe").c_str(), 0644), 0);
  EXPECT_EQ(file_kind(dir + "/pipe"), "a FIFO");
  EXPECT_EQ(file_kind(dir + "/absent"), "");
  EXPECT_EQ(message_of([&] { write_text_output(dir + "/pipe", "x", "--csv"); }),
            dir + "/pipe: --csv names a FIFO, not a regular file (an output replaces a regular file only; give a "
                  "file's path)");
  EXPECT_EQ(message_of([&] { require_regular_input(dir + "/pipe", "--data"); }),
            dir + "/pipe: --data names a FIFO, not a regular file");
  PathPlan plan;
  plan.input(dir + "/pipe", "--data");
  EXPECT_EQ(plan_error(plan), dir + "/pipe: --data names a FIFO, not a regular file");
  EXPECT_TRUE(stat((dir + "/pipe").c_str(), &st) == 0 && S_ISFIFO(st.st_mode));
  const std::string listing = "ls " + dir + "/store | grep -q tmp-";
  EXPECT_NE(std::system(listing.c_str()), 0) << "a temporary was left";
  const std::string command = "rm -rf " + dir;
  EXPECT_EQ(std::system(command.c_str()), 0);
}

TEST(StopSignals, ClearForgetsASignalForTheNextRun) {
  {
    const StopSignalWatch watch;
    std::raise(SIGUSR1);
    EXPECT_EQ(StopSignalWatch::received(), SIGUSR1);
    StopSignalWatch::clear();
    EXPECT_EQ(StopSignalWatch::received(), 0);
  }
}
