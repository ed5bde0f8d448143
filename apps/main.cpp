// SPDX-License-Identifier: BSD-3-Clause
// The `tessera` command: an MPI program whose every rank parses the same command line.
#include <mpi.h>

#include <cstdio>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/runtime.hpp"

int main(int argc, char** argv) {
  // MPI_THREAD_MULTIPLE: --mode sampled's worker thread communicates. An MPI that provides less still runs
  // every other mode; the sampled trainer checks the level it got.
  return tessera::run_main(argc, argv, MPI_THREAD_MULTIPLE, [](int argc, char** argv) {
    const tessera::Communicator world = tessera::Communicator::world();
    CLI::App app("Tessera: distributed graph neural network training", "tessera");
    app.require_subcommand(1);
    tessera::app::Command selected;
    tessera::app::add_prep_command(app, selected);
    tessera::app::add_info_command(app, selected);
    tessera::app::add_train_command(app, selected);
    tessera::app::add_bench_command(app, selected);
    tessera::app::add_plan_command(app, selected);
    tessera::app::add_partition_command(app, selected);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      // Every rank parsed the same arguments, so a usage error is collective.
      if (e.get_exit_code() == 0) {
        if (world.rank() == 0) app.exit(e);
        return 0;
      }
      throw tessera::CollectiveError(std::string(e.what()) + " (see tessera --help)");
    }
    return selected(world);
  });
}
