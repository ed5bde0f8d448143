// SPDX-License-Identifier: BSD-3-Clause
// Lifetime of MPI and Kokkos, and the top-level error policy of every Tessera program: run_main runs a
// body, and any exception becomes one `tessera: error: ...` line and a non-zero exit on all ranks.
#pragma once

#include <functional>
#include <string>

namespace tessera {

/// Initializes MPI (with at least `thread_level`) and Kokkos; finalizes both in reverse order.
/// One per process. Not copyable.
class Runtime {
 public:
  /// MPI_Init_thread (unless MPI is up already) and Kokkos::initialize.
  Runtime(int& argc, char**& argv, int thread_level);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// This rank in MPI_COMM_WORLD.
  int world_rank() const { return rank_; }
  /// Ranks in MPI_COMM_WORLD.
  int world_size() const { return size_; }
  /// The thread level MPI provides.
  int thread_level() const { return provided_; }

 private:
  int rank_ = 0, size_ = 1, provided_ = 0;
  bool owns_mpi_ = false;
};

/// Registers fn to run (on every rank, in reverse order) when the Runtime shuts down cleanly, before
/// Kokkos and MPI are finalized: libraries with collective cleanup (parallel HDF5) hook in here.
void add_shutdown_hook(std::function<void()> fn);

/// Runs body(argc, argv) inside a Runtime. A CollectiveError is printed by rank 0 and every rank
/// returns 1 after a clean shutdown; any other exception is printed by the rank that caught it and
/// the job is aborted with MPI_Abort(1), so ranks blocked in a collective never hang. Errors are worded
/// by the message renderer (set_message_renderer, core/log.hpp).
int run_main(int argc, char** argv, int thread_level, const std::function<int(int, char**)>& body);

}  // namespace tessera
