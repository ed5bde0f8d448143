// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/threads.hpp"

#include <mpi.h>
#if defined(__linux__)
#include <sched.h>
#include <unistd.h>
#endif

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#if defined(KOKKOS_ENABLE_OPENMP)
#include <omp.h>
#endif

#include "tessera/core/error.hpp"

namespace tessera {
namespace {

ThreadChoice& current_choice() {
  static ThreadChoice choice;
  return choice;
}

// One bit per CPU id, the layout every rank sends to its node's ranks.
constexpr int kMaskWords = 16;  // 1024 CPUs, as glibc's cpu_set_t
using CpuMask = std::vector<uint64_t>;

CpuMask my_cpu_mask() {
  CpuMask mask(kMaskWords, 0);
  int cpus = 0;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < std::min(CPU_SETSIZE, 64 * kMaskWords); ++c)
      if (CPU_ISSET(c, &set)) mask[size_t(c / 64)] |= uint64_t(1) << (c % 64), ++cpus;
  }
#endif
  if (cpus == 0) {  // no affinity interface: every CPU the machine reports
    const int n = std::clamp(int(std::thread::hardware_concurrency()), 1, 64 * kMaskWords);
    for (int c = 0; c < n; ++c) mask[size_t(c / 64)] |= uint64_t(1) << (c % 64);
  }
  return mask;
}

std::vector<int> cpu_ids(const uint64_t* words) {
  std::vector<int> ids;
  for (int c = 0; c < 64 * kMaskWords; ++c)
    if ((words[c / 64] >> (c % 64)) & 1) ids.push_back(c);
  return ids;
}

const char* nonempty_env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

// The user's own choice of thread count, if any (the name of where it came from).
const char* explicit_thread_setting(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--kokkos-threads", 16) == 0 ||
        std::strncmp(argv[i], "--kokkos-num-threads", 20) == 0)
      return "--kokkos-threads";
  if (nonempty_env("KOKKOS_NUM_THREADS")) return "KOKKOS_NUM_THREADS";
  if (nonempty_env("OMP_NUM_THREADS")) return "OMP_NUM_THREADS";
  return nullptr;
}

// SLURM_CPUS_PER_TASK as a positive count, 0 when unset or not one.
int slurm_cpus_per_task() {
  const char* value = nonempty_env("SLURM_CPUS_PER_TASK");
  if (!value) return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  return (*end == '\0' && n > 0 && n < (1 << 20)) ? int(n) : 0;
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("thread placement: ") + what + " failed");
}

// The node's ranks, kept from choose_threads to record_threads.
MPI_Comm node_comm = MPI_COMM_NULL;

}  // namespace

int default_thread_count(const std::vector<std::vector<int>>& node_masks, int me, int cpus_per_task) {
  double share = 0;
  for (int cpu : node_masks[size_t(me)]) {
    int users = 0;
    for (const std::vector<int>& mask : node_masks)
      users += std::binary_search(mask.begin(), mask.end(), cpu) ? 1 : 0;
    share += 1.0 / users;
  }
  int threads = std::max(1, int(share + 1e-9));
  if (cpus_per_task > 0) threads = std::min(threads, cpus_per_task);
  return threads;
}

const ThreadChoice& thread_choice() {
  return current_choice();
}

std::string ThreadChoice::describe() const {
  std::string line = std::to_string(world_ranks) + (world_ranks == 1 ? " rank" : " ranks") + " on " +
                     std::to_string(nodes) + (nodes == 1 ? " node, " : " nodes, ");
  if (min_threads == max_threads)
    line += std::to_string(max_threads) + (max_threads == 1 ? " thread each" : " threads each");
  else
    line += std::to_string(min_threads) + "-" + std::to_string(max_threads) + " threads per rank";
  if (source == "default")
    line += " (default: " + std::to_string(node_ranks) + (node_ranks == 1 ? " rank" : " ranks") + " on " +
            std::to_string(node_cpus) + (node_cpus == 1 ? " CPU" : " CPUs") +
            " per node; set OMP_NUM_THREADS to choose)";
  else if (source == "SLURM_CPUS_PER_TASK")
    line += " (SLURM_CPUS_PER_TASK; set OMP_NUM_THREADS to choose)";
  else
    line += " (" + source + ")";
  return line;
}

namespace detail {

bool choose_threads(int argc, char** argv) {
  ThreadChoice& choice = current_choice();
  int world_rank = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank");
  if (node_comm != MPI_COMM_NULL) MPI_Comm_free(&node_comm);
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node_comm),
            "MPI_Comm_split_type");
  int node_rank = 0, node_size = 1;
  MPI_Comm_rank(node_comm, &node_rank);
  MPI_Comm_size(node_comm, &node_size);
  const CpuMask mine = my_cpu_mask();
  std::vector<uint64_t> all(size_t(node_size) * kMaskWords);
  check_mpi(
      MPI_Allgather(mine.data(), kMaskWords, MPI_UINT64_T, all.data(), kMaskWords, MPI_UINT64_T, node_comm),
      "MPI_Allgather of CPU masks");
  std::vector<std::vector<int>> masks;
  CpuMask node_union(kMaskWords, 0);
  for (int r = 0; r < node_size; ++r) {
    masks.push_back(cpu_ids(&all[size_t(r) * kMaskWords]));
    for (int w = 0; w < kMaskWords; ++w) node_union[size_t(w)] |= all[size_t(r) * kMaskWords + size_t(w)];
  }
  choice.node_ranks = node_size;
  choice.node_cpus = int(cpu_ids(node_union.data()).size());
  const int cpus_per_task = slurm_cpus_per_task();
  const int threads = default_thread_count(masks, node_rank, cpus_per_task);
  const char* setting = explicit_thread_setting(argc, argv);
#if defined(KOKKOS_ENABLE_OPENMP)
  if (setting) {
    choice.source = setting;
    return true;
  }
  choice.source =
      (cpus_per_task > 0 && threads == cpus_per_task && threads < default_thread_count(masks, node_rank, 0))
          ? "SLURM_CPUS_PER_TASK"
          : "default";
  // Kokkos counts the threads of an OpenMP parallel region, and OpenBLAS (OpenMP build) asks
  // omp_get_max_threads at each call: both follow this.
  omp_set_num_threads(threads);
  return true;
#else
  (void)setting, (void)threads;
  choice.source = "serial backend";
  return false;
#endif
}

void record_threads() {
  ThreadChoice& choice = current_choice();
  choice.threads = int(Kokkos::DefaultHostExecutionSpace().concurrency());
  std::vector<int> node_threads(size_t(choice.node_ranks));
  check_mpi(MPI_Allgather(&choice.threads, 1, MPI_INT, node_threads.data(), 1, MPI_INT, node_comm),
            "MPI_Allgather of thread counts");
  int node_rank = 0;
  MPI_Comm_rank(node_comm, &node_rank);
  MPI_Comm_free(&node_comm);
  choice.node_threads = 0;
  for (int t : node_threads) choice.node_threads += t;
  const int node_max = *std::max_element(node_threads.begin(), node_threads.end());
  const int over = choice.node_threads > choice.node_cpus && node_max > 1 ? 1 : 0;
  int local[4] = {-choice.threads, choice.threads, node_rank == 0 ? 1 : 0, over}, global[4];
  int sums[2] = {local[2], 1};
  check_mpi(MPI_Allreduce(local, global, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  choice.min_threads = -global[0];
  choice.max_threads = global[1];
  choice.nodes = sums[0];
  choice.world_ranks = sums[1];
  choice.oversubscribed = global[3] != 0;
  choice.known = true;
  if (over && node_rank == 0) {
    char host[256] = "?";
#if defined(__linux__)
    gethostname(host, sizeof(host) - 1);
#endif
    const std::string hint =
        choice.source == "default" || choice.source == "SLURM_CPUS_PER_TASK"
            ? "set OMP_NUM_THREADS=" + std::to_string(std::max(1, choice.node_cpus / choice.node_ranks))
            : "unset " + choice.source + " to let Tessera choose (" +
                  std::to_string(std::max(1, choice.node_cpus / choice.node_ranks)) + " per rank here)";
    const bool one = choice.node_ranks == 1;
    std::fprintf(stderr,
                 "tessera: warning: the %d %s on node %s %s %d threads on its %d CPU%s (%s): waiting "
                 "threads spin against each other; %s\n",
                 choice.node_ranks, one ? "rank" : "ranks", host, one ? "runs" : "run", choice.node_threads,
                 choice.node_cpus, choice.node_cpus == 1 ? "" : "s", choice.source.c_str(), hint.c_str());
    std::fflush(stderr);
  }
}

}  // namespace detail
}  // namespace tessera
