// SPDX-License-Identifier: BSD-3-Clause
// The `tessera` command: an MPI program whose every rank parses the same command line.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/cli/command_line.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/huge_pages.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/runtime.hpp"

int main(int argc, char** argv) {
  // Downloads are not an MPI job: `tessera data` hands over to the Python package before MPI starts.
  if (argc >= 2 && std::string(argv[1]) == "data") return tessera::app::run_data_command(argc, argv);
  tessera::restart_with_huge_page_malloc(argv);
  // The library names options as `name`; the program's messages name its flags.
  tessera::set_message_renderer([](const std::string& message) { return tessera::app::with_flags(message); });
  // MPI_THREAD_MULTIPLE: --mode sampled's worker thread communicates. An MPI that provides less still runs
  // every other mode; the sampled source checks the level it got.
  return tessera::run_main(argc, argv, MPI_THREAD_MULTIPLE, [](int argc, char** argv) {
    const tessera::Communicator world = tessera::Communicator::world();
    // Read by the first chunked exchange, deep inside a run: a bad value is refused here, by every rank.
    std::string environment;
    try {
      (void)tessera::mpi_chunk_bytes();
    } catch (const std::exception& e) {
      environment = e.what();
    }
    world.check(environment.empty(), environment);
    const std::unique_ptr<CLI::App> app = tessera::app::make_app();
    tessera::app::Command selected;
    tessera::app::add_prep_command(*app, selected);
    tessera::app::add_info_command(*app, selected);
    tessera::app::add_train_command(*app, selected);
    tessera::app::add_predict_command(*app, selected);
    tessera::app::add_bench_command(*app, selected);
    tessera::app::add_plan_command(*app, selected);
    tessera::app::add_partition_command(*app, selected);
    if (!tessera::app::parse_command_line(*app, std::vector<std::string>(argv, argv + argc), world)) return 0;
    return selected(world);
  });
}
