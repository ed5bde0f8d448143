// SPDX-License-Identifier: BSD-3-Clause
// The HDF5 readers run collectively: a harness process is a one-rank MPI job (singleton init) with Kokkos
// up, started once in LLVMFuzzerInitialize and never finalized: MPI_Finalize unloads MPI's components,
// and LeakSanitizer could then no longer name (and so suppress) the memory they keep.
#pragma once

#include <mpi.h>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/runtime.hpp"

namespace tessera_fuzz {

inline tessera::Runtime*& runtime_slot() {
  static tessera::Runtime* runtime = nullptr;
  return runtime;
}

inline void start_runtime() {
  if (runtime_slot() != nullptr) return;
  static int argc = 1;
  static char name[] = "tessera-fuzz";
  static char* args[] = {name, nullptr};
  static char** argv = args;
  runtime_slot() = new tessera::Runtime(argc, argv, MPI_THREAD_FUNNELED);
}

/// MPI_COMM_WORLD of the one-rank job.
inline const tessera::Communicator& world() {
  static const tessera::Communicator comm = tessera::Communicator::world();
  return comm;
}

}  // namespace tessera_fuzz
