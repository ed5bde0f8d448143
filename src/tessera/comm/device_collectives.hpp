// SPDX-License-Identifier: BSD-3-Clause
// Collectives on device memory: the dense blocks of the 3D multiply, gradients, norm statistics. Each call
// takes DeviceSpace pointers and is carried, in this order of preference, by
//   NCCL on the Kokkos stream, where the communicator carries an NCCL communicator (attach_nccl below);
//   MPI on the device pointer, where memory is host memory or MPI is device-aware;
//   MPI on a host copy ("staged"), where it is not (Debian's Open MPI is not CUDA-aware): one copy each
//   way of the collective's own buffer, never of a whole feature matrix.
// Byte counters record what the MPI collective records (comm_stats.hpp), whichever carries it, so the
// byte-schedule test holds on every carrier. NCCL calls are enqueued on the stream and counted at once;
// the time recorded for them is the enqueue time unless the caller fences.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/communicator.hpp"
#include "tessera/core/enum_names.hpp"

namespace tessera {

/// What carries the device collectives of a run (`--comm`).
enum class CommBackend {
  Auto,     ///< NCCL where the build has it and every rank has a GPU of its own, else MPI
  Mpi,      ///< MPI (device-aware, or staged through host memory where it is not)
  MpiHost,  ///< MPI on host copies even where MPI claims device support (set_mpi_host_staging)
  Nccl      ///< NCCL (CUDA builds with NCCL; one GPU per rank)
};
/// The names of CommBackend's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<CommBackend> kCommBackendNames[] = {
    {CommBackend::Auto, "auto"},
    {CommBackend::Mpi, "mpi"},
    {CommBackend::MpiHost, "mpi-host"},
    {CommBackend::Nccl, "nccl"}};
/// auto or mpi or mpi-host or nccl: the name of a value.
inline const char* comm_backend_name(CommBackend backend) { return name_of(kCommBackendNames, backend); }

/// Whether this build has NCCL.
bool nccl_available();
/// Whether MPI can be handed device pointers: always on host builds; on device builds when Open MPI
/// reports CUDA support or Cray MPICH has MPICH_GPU_SUPPORT_ENABLED=1.
bool mpi_is_device_aware();

/// Process-wide: MPI carries device collectives on host copies even where it could take device pointers
/// (`--comm mpi-host`, for an MPI whose device support misbehaves; on host builds it exercises the staging
/// path). Off by default.
void set_mpi_host_staging(bool on);
/// Whether device collectives without NCCL go through host copies (forced, or MPI is not device-aware).
bool mpi_host_staging();

/// Collective over `world`: Auto becomes Nccl when the build has NCCL and no two ranks share a GPU (NCCL
/// refuses a communicator with two ranks on one device), else Mpi. An explicit Nccl that cannot run throws
/// CollectiveError on every rank, naming the reason.
CommBackend resolve_comm_backend(CommBackend backend, const Communicator& world);

/// Collective over comm: gives it an NCCL communicator over the same ranks in the same order (one unique
/// id, broadcast over MPI). Throws on every rank where the build has no NCCL.
void attach_nccl(Communicator& comm);

/// In-place all-reduce of `count` device elements (T = float or double).
template <class T>
void device_all_reduce(const Communicator& comm, T* data, int64_t count, ReduceOp op,
                       const std::string& phase);
/// Every rank contributes `count` device elements (T = float); `recv` (device) gets count * size in rank
/// order.
template <class T>
void device_all_gather(const Communicator& comm, const T* send, int64_t count, T* recv,
                       const std::string& phase);
/// Non-blocking in-place sum where MPI carries it directly; elsewhere (NCCL, staged) it completes (NCCL:
/// is enqueued) before returning and the Request is empty.
Request idevice_all_reduce(const Communicator& comm, float* data, int64_t count, const std::string& phase);

/// Whether device collectives on `comm` complete inside the call (NCCL or staged MPI) rather than as
/// non-blocking MPI requests.
bool device_collectives_block(const Communicator& comm);

/// Uncounted building blocks of the bf16 all-reduce (which counts itself once): all-to-all and all-gather
/// of `count` 16-bit words per rank, device buffers, on the same carrier as the calls above.
void device_all_to_all_u16(const Communicator& comm, const uint16_t* send, int64_t count, uint16_t* recv);
/// See device_all_to_all_u16.
void device_all_gather_u16(const Communicator& comm, const uint16_t* send, int64_t count, uint16_t* recv);

}  // namespace tessera
