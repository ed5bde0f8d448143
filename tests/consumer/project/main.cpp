// A user program: builds a process grid and sums over one axis with Tessera's installed headers.
#include <tessera/comm/collectives.hpp>
#include <tessera/comm/process_grid.hpp>
#include <tessera/core/runtime.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  return tessera::run_main(argc, argv, MPI_THREAD_FUNNELED, [](int, char**) {
    const tessera::Communicator world = tessera::Communicator::world();
    const tessera::ProcessGrid grid(world, tessera::GridShape{1, world.size(), 1, 1});
    const int sum = tessera::all_reduce_value(grid.axis(tessera::Axis::X), 1, tessera::ReduceOp::Sum, "demo");
    if (sum != world.size()) return 1;
    if (world.rank() == 0) std::printf("consumer: %d ranks on grid %s\n", sum, grid.shape().str().c_str());
    return 0;
  });
}
