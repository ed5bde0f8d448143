// SPDX-License-Identifier: BSD-3-Clause
// Threads per rank. Unless told otherwise, an OpenMP program starts one thread per core it may run on,
// so P ranks sharing a node's cores run P times too many threads that spin against each other (8 ranks
// on 2 cores: 1.6-2.0 s per Cora epoch instead of 48 ms). The Runtime therefore chooses each rank's
// thread count from the CPUs it may run on and the ranks sharing them, before Kokkos starts; an explicit
// OMP_NUM_THREADS, KOKKOS_NUM_THREADS or --kokkos-threads always wins.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tessera {

/// How the threads of this job were chosen, as the Runtime found them (every rank holds the same
/// job-wide numbers; `threads` and the node_* fields are this rank's).
struct ThreadChoice {
  bool known = false;    ///< set by the Runtime; false when Kokkos was started by someone else
  int threads = 1;       ///< threads this rank runs (Kokkos' host concurrency after it started)
  std::string source;    ///< "default", "OMP_NUM_THREADS", "KOKKOS_NUM_THREADS", "--kokkos-threads",
                         ///< "SLURM_CPUS_PER_TASK" or "serial backend"
  int node_ranks = 1;    ///< ranks on this rank's node
  int node_cpus = 1;     ///< CPUs the node's ranks may run on (the union of their affinity masks)
  int node_threads = 1;  ///< threads of all the node's ranks together
  int world_ranks = 1;   ///< ranks in the job
  int nodes = 1;         ///< nodes in the job
  int min_threads = 1;   ///< fewest threads of any rank
  int max_threads = 1;   ///< most threads of any rank

  /// One line for the start of a run, e.g. "8 ranks on 1 node, 1 thread each (default: 8 ranks on
  /// 2 CPUs per node; set OMP_NUM_THREADS to choose)".
  std::string describe() const;
};

/// The threads a rank gets by default when the ranks of its node may run on the CPUs in `node_masks`
/// (one list of CPU ids per rank; `me` is this rank's index): each CPU it may use counts as 1/k when
/// k ranks may use it, the sum rounded down, at least 1; at most `cpus_per_task` when that is > 0
/// (Slurm's --cpus-per-task). Ranks bound to their own cores get all of them; ranks that share every
/// core split them evenly.
int default_thread_count(const std::vector<std::vector<int>>& node_masks, int me, int cpus_per_task);

/// What the Runtime chose (known = false before a Runtime started Kokkos).
const ThreadChoice& thread_choice();

namespace detail {
/// How the Runtime starts Kokkos (collective over MPI_COMM_WORLD): finds the node's ranks and their CPUs,
/// sets this rank's OpenMP thread count unless the user chose (argv is read for --kokkos-threads), calls
/// start_kokkos(quiet), then records the threads Kokkos runs and warns once per node whose ranks run more
/// threads than it has CPUs. `quiet` is true on OpenMP builds, where that check replaces Kokkos' own
/// oversubscription warning: it counts ranks rather than threads (8 ranks x 1 thread on 2 cores is a
/// choice, not a mistake) and prints on every rank.
void start_with_thread_choice(int argc, char** argv, const std::function<void(bool quiet)>& start_kokkos);
}  // namespace detail

}  // namespace tessera
