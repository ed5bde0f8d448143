// SPDX-License-Identifier: BSD-3-Clause
// GoogleTest main for tests that run under mpiexec: one Runtime per process; rank 0 prints the usual
// report, the other ranks print only their failures (prefixed with the rank). A failure on any rank
// makes that rank exit non-zero, and so the mpiexec run.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "tessera/core/runtime.hpp"
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

// A CUDA build on a machine without a visible GPU cannot start Kokkos: say so and skip (exit 77, which
// ctest reports as skipped) instead of aborting inside Kokkos::initialize.
bool device_missing() {
#if defined(KOKKOS_ENABLE_CUDA)
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return false;
  std::printf("skipped: no GPU visible to this CUDA build (cudaGetDeviceCount: %s)\n",
              status == cudaSuccess ? "0 devices" : cudaGetErrorString(status));
  return true;
#else
  return false;
#endif
}

int main(int argc, char** argv) {
  if (device_missing()) return 77;
  testing::InitGoogleTest(&argc, argv);
  tessera::Runtime runtime(argc, argv, MPI_THREAD_MULTIPLE);
  if (runtime.world_rank() != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(runtime.world_rank()));
  }
  const int local = RUN_ALL_TESTS();
  // Every rank reports the job's verdict, so a failure on rank 3 is not hidden behind rank 0's "PASSED".
  int global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (runtime.world_rank() == 0 && global != local) std::fprintf(stderr, "a test failed on another rank\n");
  return global;
}
