// SPDX-License-Identifier: BSD-3-Clause
// Exercises the error policy of run_main for the CLI tests:
//   abort_probe local      rank 1 (or 0 alone) throws while the others wait in a barrier: MPI_Abort, no hang.
//   abort_probe collective every rank fails a collective check: a clean exit 1, one message.
#include <mpi.h>

#include <cstring>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/runtime.hpp"

int main(int argc, char** argv) {
  return tessera::run_main(argc, argv, MPI_THREAD_FUNNELED, [](int argc, char** argv) {
    const tessera::Communicator world = tessera::Communicator::world();
    const bool collective = argc > 1 && std::strcmp(argv[1], "collective") == 0;
    if (collective) world.check(world.rank() != world.size() - 1, "probe: the last rank disagrees");
    if (world.rank() == (world.size() > 1 ? 1 : 0)) tessera::fail("probe: rank-local failure");
    world.barrier();  // the other ranks block here until the abort reaches them
    return 0;
  });
}
