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
#include <deque>
#include <string>
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

// Kokkos 3.7 renamed --kokkos-threads to --kokkos-num-threads and 4.x reads only the new name, 3.4 only
// the old one: either spelling is rewritten, in place, to the one this Kokkos reads.
void spell_thread_arguments(int argc, char** argv) {
#if KOKKOS_VERSION >= 30700
  const std::string from = "--kokkos-threads", to = "--kokkos-num-threads";
#else
  const std::string from = "--kokkos-num-threads", to = "--kokkos-threads";
#endif
  static std::deque<std::string> respelled;  // argv points into it until the program ends
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument.compare(0, from.size(), from) != 0) continue;
    const std::string rest = argument.substr(from.size());
    if (!rest.empty() && rest[0] != '=') continue;
    respelled.push_back(to + rest);
    argv[i] = respelled.back().data();
  }
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

// SLURM_CPUS_PER_TASK as a positive count, 0 when unset; a value that is not one is ignored with a warning
// (from world rank 0: every rank reads the same environment), since the job can run without it.
int slurm_cpus_per_task() {
  const char* value = nonempty_env("SLURM_CPUS_PER_TASK");
  if (!value) return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*end == '\0' && n > 0 && n < (1 << 20)) return int(n);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  if (world_rank == 0)
    std::fprintf(stderr, "tessera: warning: SLURM_CPUS_PER_TASK is '%s', not a positive integer; ignored\n",
                 value);
  return 0;
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("thread placement: ") + what + " failed");
}

// The ranks of this rank's node (MPI_COMM_TYPE_SHARED), freed at scope end.
class NodeComm {
 public:
  NodeComm() {
    int world_rank = 0;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &comm_),
              "MPI_Comm_split_type");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~NodeComm() { MPI_Comm_free(&comm_); }
  NodeComm(const NodeComm&) = delete;
  NodeComm& operator=(const NodeComm&) = delete;
  MPI_Comm get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// The CPU ids every rank of the node may run on (collective over the node); node_cpus is their union.
std::vector<std::vector<int>> node_cpu_masks(const NodeComm& node, int& node_cpus) {
  const CpuMask mine = my_cpu_mask();
  std::vector<uint64_t> all(size_t(node.size()) * kMaskWords);
  check_mpi(
      MPI_Allgather(mine.data(), kMaskWords, MPI_UINT64_T, all.data(), kMaskWords, MPI_UINT64_T, node.get()),
      "MPI_Allgather of CPU masks");
  std::vector<std::vector<int>> masks;
  CpuMask node_union(kMaskWords, 0);
  for (int r = 0; r < node.size(); ++r) {
    masks.push_back(cpu_ids(&all[size_t(r) * kMaskWords]));
    for (int w = 0; w < kMaskWords; ++w) node_union[size_t(w)] |= all[size_t(r) * kMaskWords + size_t(w)];
  }
  node_cpus = int(cpu_ids(node_union.data()).size());
  return masks;
}

// Kokkos' OpenMP backend keeps a fixed table of 512 thread slots (OpenMPExec::MAX_THREAD_COUNT) and
// crashes at initialization past it, e.g. one rank on a 768-CPU node.
constexpr int kKokkosMaxThreads = 512;

#if defined(KOKKOS_ENABLE_OPENMP)
void warn_thread_cap(const char* source, long asked) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  if (world_rank == 0)
    std::fprintf(stderr,
                 "tessera: warning: %s asks for %ld threads per rank; Kokkos' OpenMP backend runs at "
                 "most %d, so each rank runs %d\n",
                 source, asked, kKokkosMaxThreads, kKokkosMaxThreads);
}

// A user's explicit count above Kokkos' limit is lowered to it where it is read, with a warning.
void cap_explicit_threads(int argc, char** argv, const char* setting) {
#if KOKKOS_VERSION >= 30700
  static char capped_argument[] = "--kokkos-num-threads=512";
#else
  static char capped_argument[] = "--kokkos-threads=512";
#endif
  if (std::strcmp(setting, "--kokkos-threads") == 0) {
    for (int i = 1; i < argc; ++i) {
      const char* eq = std::strchr(argv[i], '=');
      if (std::strncmp(argv[i], "--kokkos-", 9) != 0 || eq == nullptr) continue;
      const long n = std::strtol(eq + 1, nullptr, 10);
      if (n > kKokkosMaxThreads) warn_thread_cap("--kokkos-threads", n), argv[i] = capped_argument;
    }
    return;
  }
  const long n = std::strtol(std::getenv(setting), nullptr, 10);
  if (n <= kKokkosMaxThreads) return;
  warn_thread_cap(setting, n);
  if (std::strcmp(setting, "KOKKOS_NUM_THREADS") == 0) setenv("KOKKOS_NUM_THREADS", "512", 1);
  omp_set_num_threads(kKokkosMaxThreads);
}
#endif

// Sets this rank's OpenMP threads unless the user chose; records where the count came from. Returns
// whether Tessera checks the node's threads (OpenMP builds), so Kokkos' own warning can be silenced.
bool choose_threads(int argc, char** argv, const std::vector<std::vector<int>>& masks, int node_rank,
                    ThreadChoice& choice) {
  spell_thread_arguments(argc, argv);
  const int cpus_per_task = slurm_cpus_per_task();
  const int threads = std::min(kKokkosMaxThreads, default_thread_count(masks, node_rank, cpus_per_task));
  const char* setting = explicit_thread_setting(argc, argv);
#if defined(KOKKOS_ENABLE_OPENMP)
  if (setting) {
    cap_explicit_threads(argc, argv, setting);
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

// One line on the node's first rank when its ranks run more threads than it has CPUs.
void warn_oversubscribed(const ThreadChoice& choice) {
  char host[256] = "?";
#if defined(__linux__)
  gethostname(host, sizeof(host) - 1);
#endif
  const std::string per_rank = std::to_string(std::max(1, choice.node_cpus / choice.node_ranks));
  const std::string hint =
      choice.source == "default" || choice.source == "SLURM_CPUS_PER_TASK"
          ? "set OMP_NUM_THREADS=" + per_rank
          : "unset " + choice.source + " to let Tessera choose (" + per_rank + " per rank here)";
  const bool one = choice.node_ranks == 1;
  std::fprintf(stderr,
               "tessera: warning: the %d %s on node %s %s %d threads on its %d CPU%s (%s): waiting "
               "threads spin against each other; %s\n",
               choice.node_ranks, one ? "rank" : "ranks", host, one ? "runs" : "run", choice.node_threads,
               choice.node_cpus, choice.node_cpus == 1 ? "" : "s", choice.source.c_str(), hint.c_str());
  std::fflush(stderr);
}

// After Kokkos started: the threads it runs, summed over the node and reduced over the job.
void record_threads(const NodeComm& node, ThreadChoice& choice) {
  choice.threads = int(Kokkos::DefaultHostExecutionSpace().concurrency());
  std::vector<int> node_threads(size_t(node.size()));
  check_mpi(MPI_Allgather(&choice.threads, 1, MPI_INT, node_threads.data(), 1, MPI_INT, node.get()),
            "MPI_Allgather of thread counts");
  choice.node_threads = 0;
  for (int t : node_threads) choice.node_threads += t;
  const int node_max = *std::max_element(node_threads.begin(), node_threads.end());
  int extremes[2] = {-choice.threads, choice.threads};
  int sums[2] = {node.rank() == 0 ? 1 : 0, 1};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  choice.min_threads = -extremes[0];
  choice.max_threads = extremes[1];
  choice.nodes = sums[0];
  choice.world_ranks = sums[1];
  choice.known = true;
  if (node.rank() == 0 && choice.node_threads > choice.node_cpus && node_max > 1) warn_oversubscribed(choice);
}

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

void start_with_thread_choice(int argc, char** argv, const std::function<void(bool)>& start_kokkos) {
  ThreadChoice& choice = current_choice();
  const NodeComm node;
  const std::vector<std::vector<int>> masks = node_cpu_masks(node, choice.node_cpus);
  choice.node_ranks = node.size();
  start_kokkos(choose_threads(argc, argv, masks, node.rank(), choice));
  record_threads(node, choice);
}

}  // namespace detail
}  // namespace tessera
