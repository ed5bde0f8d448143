// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/device_collectives.hpp"

#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>
#include <vector>

#if defined(TESSERA_HAVE_NCCL)
#include <nccl.h>
#endif
#if __has_include(<mpi-ext.h>)  // Open MPI's extensions: MPIX_Query_cuda_support
#include <mpi-ext.h>
#endif

#include "tessera/core/error.hpp"
#include "tessera/core/kernel_profile.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/core/views.hpp"

namespace tessera {

#if defined(TESSERA_HAVE_NCCL)
namespace {
void check_nccl(ncclResult_t result, const char* call) {
  require(result == ncclSuccess, call, " failed: ", ncclGetErrorString(result));
}
cudaStream_t stream() {
  return ExecSpace().cuda_stream();
}
}  // namespace

class NcclComm {
 public:
  NcclComm(const ncclUniqueId& id, int size, int rank) {
    check_nccl(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
  }
  ~NcclComm() { ncclCommDestroy(comm_); }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ncclComm_t get() const { return comm_; }

 private:
  ncclComm_t comm_ = nullptr;
};
#else
class NcclComm {};
#endif

namespace {

enum class Carrier { Nccl, Mpi, Staged };

bool forced_staging = false;

Carrier carrier(const Communicator& comm) {
  if (comm.nccl()) return Carrier::Nccl;
  return mpi_host_staging() ? Carrier::Staged : Carrier::Mpi;
}

template <class T>
using DeviceBuffer = Kokkos::View<T*, DeviceSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// The staged path's two host buffers (what is sent, what is received), grown as needed and kept: a fresh
// allocation per collective would pay its page faults every step. Device collectives run on the thread that
// trains; worker threads use host collectives on communicators of their own.
template <class T>
HostVector<T> staging_buffer(int which, int64_t count) {
  static std::vector<double> buffers[2];  // double: aligned for every T staged here
  std::vector<double>& b = buffers[which];
  const size_t words = (size_t(count) * sizeof(T) + sizeof(double) - 1) / sizeof(double);
  if (b.size() < words) b.resize(words);
  return HostVector<T>(reinterpret_cast<T*>(b.data()), size_t(count));
}

// A host copy of `count` device elements (after the kernels that wrote them have finished).
template <class T>
HostVector<T> to_host(const T* device, int64_t count) {
  HostVector<T> host = staging_buffer<T>(0, count);
  Kokkos::deep_copy(host, DeviceBuffer<const T>(device, size_t(count)));
  return host;
}

template <class T>
void to_device(const HostVector<T>& host, T* device) {
  Kokkos::deep_copy(DeviceBuffer<T>(device, host.extent(0)), host);
}

template <class T>
HostVector<T> host_buffer(int64_t count) {
  return staging_buffer<T>(1, count);
}

}  // namespace


bool nccl_available() {
#if defined(TESSERA_HAVE_NCCL)
  return true;
#else
  return false;
#endif
}

bool mpi_is_device_aware() {
  if (std::is_same<DeviceSpace, HostSpace>::value) return true;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  if (MPIX_Query_cuda_support() == 1) return true;
#endif
  const char* cray = std::getenv("MPICH_GPU_SUPPORT_ENABLED");
  return cray != nullptr && std::strcmp(cray, "1") == 0;
}

void set_mpi_host_staging(bool on) {
  forced_staging = on;
}

bool mpi_host_staging() {
  static const bool aware = mpi_is_device_aware();
  return forced_staging || !aware;
}

CommBackend resolve_comm_backend(CommBackend backend, const Communicator& world) {
  if (backend == CommBackend::Mpi || backend == CommBackend::MpiHost) return backend;
  std::string reason;
  if (!nccl_available()) {
    reason = "this build has no NCCL (a CUDA build that found nccl.h has)";
  } else {
    // Same node name and device ordinal on two ranks = one GPU shared, which NCCL refuses.
    char name[MPI_MAX_PROCESSOR_NAME + 16] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
#if defined(TESSERA_HAVE_NCCL)
    std::snprintf(name + length, 16, "#%d", ExecSpace().cuda_device());
#endif
    std::vector<char> all(sizeof(name) * size_t(world.size()));
    all_gather(world, name, int64_t(sizeof(name)), all.data(), "setup");
    std::set<std::string> devices;
    for (int r = 0; r < world.size(); ++r) devices.insert(std::string(all.data() + size_t(r) * sizeof(name)));
    if (int(devices.size()) < world.size())
      reason = "two or more ranks share a GPU (NCCL needs one GPU per rank; `comm` mpi runs shared GPUs)";
  }
  if (backend == CommBackend::Auto) return reason.empty() ? CommBackend::Nccl : CommBackend::Mpi;
  world.check(reason.empty(), "`comm` nccl: " + reason);
  return CommBackend::Nccl;
}

void attach_nccl(Communicator& comm) {
#if defined(TESSERA_HAVE_NCCL)
  ncclUniqueId id;
  if (comm.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  broadcast(comm, reinterpret_cast<char*>(&id), int64_t(sizeof(id)), 0, "setup");
  comm.set_nccl(std::make_shared<NcclComm>(id, comm.size(), comm.rank()));
#else
  comm.check(false, "NCCL is not in this build (a CUDA build that found nccl.h has it)");
#endif
}

bool device_collectives_block(const Communicator& comm) {
  return carrier(comm) != Carrier::Mpi;
}

#if defined(TESSERA_HAVE_NCCL)
namespace {
ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::Max ? ncclMax : op == ReduceOp::Min ? ncclMin : ncclSum;
}
template <class T>
ncclDataType_t nccl_type() {
  return std::is_same<T, double>::value ? ncclFloat64 : ncclFloat32;
}
}  // namespace
#endif

template <class T>
void device_all_reduce(const Communicator& comm, T* data, int64_t count, ReduceOp op,
                       const std::string& phase) {
  switch (carrier(comm)) {
    case Carrier::Nccl: {
#if defined(TESSERA_HAVE_NCCL)
      const ProfileRegion region("ncclAllReduce");
      comm.stats().record_deferred(phase, Collective::AllReduce, count * int64_t(sizeof(T)),
                                   time_on_stream([&] {
                                     check_nccl(ncclAllReduce(data, data, size_t(count), nccl_type<T>(),
                                                              nccl_op(op), comm.nccl()->get(), stream()),
                                                "ncclAllReduce");
                                   }));
#endif
      return;
    }
    case Carrier::Mpi:
      Kokkos::fence();  // MPI reads memory the stream may still be writing
      return all_reduce(comm, data, count, op, phase);
    case Carrier::Staged: {
      HostVector<T> host = to_host(data, count);
      all_reduce(comm, host.data(), count, op, phase);
      return to_device(host, data);
    }
  }
}

template <class T>
void device_all_gather(const Communicator& comm, const T* send, int64_t count, T* recv,
                       const std::string& phase) {
  switch (carrier(comm)) {
    case Carrier::Nccl: {
#if defined(TESSERA_HAVE_NCCL)
      const ProfileRegion region("ncclAllGather");
      comm.stats().record_deferred(
          phase, Collective::AllGather, count * int64_t(sizeof(T)), time_on_stream([&] {
            check_nccl(ncclAllGather(send, recv, size_t(count), nccl_type<T>(), comm.nccl()->get(), stream()),
                       "ncclAllGather");
          }));
#endif
      return;
    }
    case Carrier::Mpi:
      Kokkos::fence();
      return all_gather(comm, send, count, recv, phase);
    case Carrier::Staged: {
      const HostVector<T> mine = to_host(send, count);
      HostVector<T> all = host_buffer<T>(count * comm.size());
      all_gather(comm, mine.data(), count, all.data(), phase);
      return to_device(all, recv);
    }
  }
}

template void device_all_reduce<float>(const Communicator&, float*, int64_t, ReduceOp, const std::string&);
template void device_all_reduce<double>(const Communicator&, double*, int64_t, ReduceOp, const std::string&);
template void device_all_gather<float>(const Communicator&, const float*, int64_t, float*,
                                       const std::string&);

Request idevice_all_reduce(const Communicator& comm, float* data, int64_t count, const std::string& phase) {
  if (carrier(comm) != Carrier::Mpi) {
    device_all_reduce(comm, data, count, ReduceOp::Sum, phase);
    return Request();
  }
  Kokkos::fence();
  return iall_reduce(comm, data, count, ReduceOp::Sum, phase);
}

namespace {

// The MPI legs of the bf16 exchanges, in pieces past the chunk limit (counts past 2^31 never reach an int).
// Not counted here: the bf16 all-reduce records its own bytes. The decision depends on `count`, which is
// the same on every rank.
void u16_all_to_all(const Communicator& comm, const uint16_t* send, int64_t count, uint16_t* recv) {
  if (count <= mpi_chunk_elements<uint16_t>()) {
    const int n = int(count);
    check_mpi(MPI_Alltoall(send, n, MPI_UINT16_T, recv, n, MPI_UINT16_T, comm.get()), "MPI_Alltoall");
    return;
  }
  const std::vector<int64_t> counts(size_t(comm.size()), count);
  detail::all_to_allv_chunked(comm, send, counts, recv, counts, MPI_UINT16_T, sizeof(uint16_t),
                              mpi_chunk_elements<uint16_t>());
}

void u16_all_gather(const Communicator& comm, const uint16_t* send, int64_t count, uint16_t* recv) {
  if (count <= mpi_chunk_elements<uint16_t>()) {
    const int n = int(count);
    check_mpi(MPI_Allgather(send, n, MPI_UINT16_T, recv, n, MPI_UINT16_T, comm.get()), "MPI_Allgather");
    return;
  }
  detail::all_gather_v_chunked(comm, send, std::vector<int64_t>(size_t(comm.size()), count), recv,
                               MPI_UINT16_T, sizeof(uint16_t), mpi_chunk_elements<uint16_t>());
}

}  // namespace

void device_all_to_all_u16(const Communicator& comm, const uint16_t* send, int64_t count, uint16_t* recv) {
  switch (carrier(comm)) {
    case Carrier::Nccl: {
#if defined(TESSERA_HAVE_NCCL)
      // NCCL has no all-to-all: one grouped send and receive per peer (16-bit words as byte pairs).
      const size_t bytes = size_t(count) * sizeof(uint16_t);
      check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < comm.size(); ++r) {
        check_nccl(ncclSend(send + r * count, bytes, ncclUint8, r, comm.nccl()->get(), stream()), "ncclSend");
        check_nccl(ncclRecv(recv + r * count, bytes, ncclUint8, r, comm.nccl()->get(), stream()), "ncclRecv");
      }
      check_nccl(ncclGroupEnd(), "ncclGroupEnd");
#endif
      return;
    }
    case Carrier::Mpi: {
      Kokkos::fence();
      return u16_all_to_all(comm, send, count, recv);
    }
    case Carrier::Staged: {
      const HostVector<uint16_t> mine = to_host(send, count * comm.size());
      HostVector<uint16_t> theirs = host_buffer<uint16_t>(count * comm.size());
      u16_all_to_all(comm, mine.data(), count, theirs.data());
      return to_device(theirs, recv);
    }
  }
}

void device_all_gather_u16(const Communicator& comm, const uint16_t* send, int64_t count, uint16_t* recv) {
  switch (carrier(comm)) {
    case Carrier::Nccl: {
#if defined(TESSERA_HAVE_NCCL)
      check_nccl(ncclAllGather(send, recv, size_t(count) * sizeof(uint16_t), ncclUint8, comm.nccl()->get(),
                               stream()),
                 "ncclAllGather");
#endif
      return;
    }
    case Carrier::Mpi: {
      Kokkos::fence();
      return u16_all_gather(comm, send, count, recv);
    }
    case Carrier::Staged: {
      const HostVector<uint16_t> mine = to_host(send, count);
      HostVector<uint16_t> all = host_buffer<uint16_t>(count * comm.size());
      u16_all_gather(comm, mine.data(), count, all.data());
      return to_device(all, recv);
    }
  }
}

}  // namespace tessera
