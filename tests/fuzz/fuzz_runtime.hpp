// SPDX-License-Identifier: BSD-3-Clause
// The HDF5 readers run collectively: a harness process is a one-rank MPI job (singleton init) with Kokkos
// up, started once in LLVMFuzzerInitialize and never finalized: MPI_Finalize unloads MPI's components,
// and LeakSanitizer could then no longer name (and so suppress) the memory they keep.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
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

/// After an input: an HDF5 object still open after success or a CollectiveError is a finding (abort): every
/// ranks' agreed error closes what it opened, or a long job that reads many files runs out of memory. A
/// plain Error (one rank's, which aborts an MPI job) leaves its objects to the shutdown's H5close: closed
/// here the same way.
namespace detail {
inline void require_hdf5_closed(bool after_plain_error) {
  const ssize_t count = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (count == 0) return;
  if (!after_plain_error) {
    std::fprintf(stderr, "fuzz: %ld HDF5 objects left open\n", long(count));
    std::abort();
  }
  std::vector<hid_t> ids(static_cast<size_t>(count));
  H5Fget_obj_ids(H5F_OBJ_ALL, H5F_OBJ_ALL, ids.size(), ids.data());
  for (const hid_t id : ids)
    if (H5Iget_type(id) != H5I_FILE) H5Oclose(id);
  for (const hid_t id : ids)
    if (H5Iget_type(id) == H5I_FILE) H5Fclose(id);
}
}  // namespace detail

/// Runs one input's reader calls: a Tessera error ends the input (printed when TESSERA_FUZZ_VERBOSE is
/// set), anything else escapes as a finding; then the HDF5 rule above.
template <class Body>
void run_input(const Body& body) {
  const bool verbose = std::getenv("TESSERA_FUZZ_VERBOSE") != nullptr;
  bool plain_error = false;
  try {
    body();
    if (verbose) std::fprintf(stderr, "accepted\n");
  } catch (const tessera::Error& e) {
    plain_error = dynamic_cast<const tessera::CollectiveError*>(&e) == nullptr;
    if (verbose) std::fprintf(stderr, "%s\n", e.what());
  }
  detail::require_hdf5_closed(plain_error);
}

/// MPI_COMM_WORLD of the one-rank job.
inline const tessera::Communicator& world() {
  static const tessera::Communicator comm = tessera::Communicator::world();
  return comm;
}

}  // namespace tessera_fuzz
