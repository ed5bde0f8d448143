// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/runtime.hpp"

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/huge_pages.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/threads.hpp"

namespace tessera {
namespace {
std::vector<std::function<void()>>& shutdown_hooks() {
  static std::vector<std::function<void()>> hooks;
  return hooks;
}

// Kokkos gets only the --kokkos-* arguments, which are then removed from argv: given the application's own
// --help it would print its whole option list in front of the application's.
// `quiet`: Kokkos' own oversubscription warning is left out (it counts ranks, not threads, and prints on
// every rank); detail::start_with_thread_choice warns once per node instead.
void initialize_kokkos(int& argc, char** argv, bool quiet) {
  std::vector<char*> kokkos_args{argv[0]};
  static char disable_warnings[] = "--kokkos-disable-warnings";
  if (quiet && !std::getenv("KOKKOS_DISABLE_WARNINGS")) kokkos_args.push_back(disable_warnings);
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--kokkos-", 9) == 0)
      kokkos_args.push_back(argv[i]);
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  argv[argc] = nullptr;
  int kokkos_argc = int(kokkos_args.size());
  kokkos_args.push_back(nullptr);
  Kokkos::initialize(kokkos_argc, kokkos_args.data());
}
}  // namespace

void add_shutdown_hook(std::function<void()> fn) {
  shutdown_hooks().push_back(std::move(fn));
}

Runtime::Runtime(int& argc, char**& argv, int thread_level) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init_thread(&argc, &argv, thread_level, &provided_);
    owns_mpi_ = true;
  } else {
    MPI_Query_thread(&provided_);
  }
  // Errors become exceptions in our own checks instead of MPI's default abort without a message.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  set_log_rank(rank_);
  // Kokkos warns on every start when OMP_PROC_BIND is unset; thread binding is the job launcher's
  // business (srun/mpiexec bind ranks), so an unset variable means "do not bind". A user's value wins.
  setenv("OMP_PROC_BIND", "false", 0);
  detail::start_with_thread_choice(argc, argv, [&](bool quiet) { initialize_kokkos(argc, argv, quiet); });
  // TESSERA_HUGE_PAGES=0 keeps 4 KiB pages (to compare, or where huge pages are unwelcome).
  const char* huge = std::getenv("TESSERA_HUGE_PAGES");
  if (huge == nullptr || std::strcmp(huge, "0") != 0) advise_huge_pages_for_host_views();
}

Runtime::~Runtime() {
  auto& hooks = shutdown_hooks();
  for (auto it = hooks.rbegin(); it != hooks.rend(); ++it) (*it)();
  hooks.clear();
  if (Kokkos::is_initialized()) Kokkos::finalize();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) MPI_Finalize();
}

int run_main(int argc, char** argv, int thread_level, const std::function<int(int, char**)>& body) {
  Runtime runtime(argc, argv, thread_level);
  try {
    return body(argc, argv);
  } catch (const CollectiveError& e) {
    if (runtime.world_rank() == 0) std::fprintf(stderr, "tessera: error: %s\n", render_message(e.what()).c_str());
    std::fflush(stderr);
    return 1;
  } catch (const std::exception& e) {
    if (runtime.world_size() > 1)
      std::fprintf(stderr, "tessera: error: %s (rank %d)\n", render_message(e.what()).c_str(), runtime.world_rank());
    else
      std::fprintf(stderr, "tessera: error: %s\n", render_message(e.what()).c_str());
  } catch (...) {
    std::fprintf(stderr, "tessera: error: unknown exception (rank %d)\n", runtime.world_rank());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

}  // namespace tessera
