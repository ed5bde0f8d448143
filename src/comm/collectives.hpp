// SPDX-License-Identifier: BSD-3-Clause
// Collectives over a Communicator, blocking and non-blocking, each recording calls, bytes and time under
// a phase name in the communicator's CommStats (see comm_stats.hpp for what "bytes" means per kind).
// Counts are element counts of T; a count that does not fit MPI's int is an Error, not a silent wrap.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/timer.hpp"

namespace tessera {

/// The MPI datatype of T (specialized for the types Tessera sends).
template <class T>
MPI_Datatype mpi_type();
/// MPI_FLOAT.
template <>
inline MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
/// MPI_DOUBLE.
template <>
inline MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}
/// MPI_INT32_T.
template <>
inline MPI_Datatype mpi_type<int32_t>() {
  return MPI_INT32_T;
}
/// MPI_INT64_T.
template <>
inline MPI_Datatype mpi_type<int64_t>() {
  return MPI_INT64_T;
}
/// MPI_UINT8_T.
template <>
inline MPI_Datatype mpi_type<uint8_t>() {
  return MPI_UINT8_T;
}
/// MPI_UINT16_T.
template <>
inline MPI_Datatype mpi_type<uint16_t>() {
  return MPI_UINT16_T;
}
/// MPI_UINT64_T.
template <>
inline MPI_Datatype mpi_type<uint64_t>() {
  return MPI_UINT64_T;
}
/// MPI_CHAR.
template <>
inline MPI_Datatype mpi_type<char>() {
  return MPI_CHAR;
}

/// A reduction: its MPI operation and its identity, so local and distributed sums cannot disagree.
enum class ReduceOp {
  Sum,  ///< MPI_SUM
  Max,  ///< MPI_MAX
  Min   ///< MPI_MIN
};
/// The MPI operation of a reduction.
MPI_Op mpi_op(ReduceOp op);

/// Converts an element count to MPI's int, or throws naming the call.
int mpi_count(int64_t count, const char* call);

/// A pending non-blocking collective. Move-only; waits in its destructor if nobody did, so buffers
/// are never released under a running operation.
class Request {
 public:
  /// No operation.
  Request() = default;
  /// Tracks `request`, posted on `comm`; counts `bytes` of `kind` under `phase` when it completes.
  Request(MPI_Request request, const Communicator& comm, std::string phase, Collective kind, int64_t bytes);
  /// Takes over `other`'s operation.
  Request(Request&& other) noexcept;
  /// Waits for this one's operation, then takes over `other`'s.
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  /// Blocks until the operation has completed (and counts it).
  void wait();
  /// Lets MPI progress the operation; true (and counted) once it has completed.
  bool test();
  /// An operation is pending.
  bool active() const { return request_ != MPI_REQUEST_NULL; }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  CommStats* stats_ = nullptr;
  std::string phase_;
  Collective kind_ = Collective::AllReduce;
  int64_t bytes_ = 0;
  double start_ = 0.0;
};

/// Waits for every request.
void wait_all(std::vector<Request>& requests);

// ---- blocking -------------------------------------------------------------------------------------

/// In-place all-reduce of `count` elements.
template <class T>
void all_reduce(const Communicator& comm, T* data, int64_t count, ReduceOp op, const std::string& phase) {
  Stopwatch watch;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count, "MPI_Allreduce"), mpi_type<T>(), mpi_op(op),
                          comm.get()),
            "MPI_Allreduce");
  comm.stats().record(phase, Collective::AllReduce, count * int64_t(sizeof(T)), watch.seconds());
}

/// All-reduce of one value; returns the result.
template <class T>
T all_reduce_value(const Communicator& comm, T value, ReduceOp op, const std::string& phase) {
  all_reduce(comm, &value, 1, op, phase);
  return value;
}

/// Every rank contributes `count` elements; `recv` gets count * size elements in rank order.
template <class T>
void all_gather(const Communicator& comm, const T* send, int64_t count, T* recv, const std::string& phase) {
  Stopwatch watch;
  const int n = mpi_count(count, "MPI_Allgather");
  check_mpi(MPI_Allgather(send, n, mpi_type<T>(), recv, n, mpi_type<T>(), comm.get()), "MPI_Allgather");
  comm.stats().record(phase, Collective::AllGather, count * int64_t(sizeof(T)), watch.seconds());
}

/// `send` holds count_per_rank * size elements; rank r receives the reduction of block r.
template <class T>
void reduce_scatter(const Communicator& comm, const T* send, T* recv, int64_t count_per_rank, ReduceOp op,
                    const std::string& phase) {
  Stopwatch watch;
  check_mpi(MPI_Reduce_scatter_block(send, recv, mpi_count(count_per_rank, "MPI_Reduce_scatter_block"),
                                     mpi_type<T>(), mpi_op(op), comm.get()),
            "MPI_Reduce_scatter_block");
  comm.stats().record(phase, Collective::ReduceScatter, count_per_rank * comm.size() * int64_t(sizeof(T)),
                      watch.seconds());
}

/// Block r of `send` (count_per_rank elements) goes to rank r.
template <class T>
void all_to_all(const Communicator& comm, const T* send, int64_t count_per_rank, T* recv,
                const std::string& phase) {
  Stopwatch watch;
  const int n = mpi_count(count_per_rank, "MPI_Alltoall");
  check_mpi(MPI_Alltoall(send, n, mpi_type<T>(), recv, n, mpi_type<T>(), comm.get()), "MPI_Alltoall");
  comm.stats().record(phase, Collective::AllToAll, count_per_rank * (comm.size() - 1) * int64_t(sizeof(T)),
                      watch.seconds());
}

/// Variable all-to-all: send_counts[r] elements (packed in rank order) go to rank r; recv_counts[r]
/// come from rank r. Returns nothing; use exchange_counts() first to learn recv_counts.
template <class T>
void all_to_allv(const Communicator& comm, const T* send, const std::vector<int64_t>& send_counts, T* recv,
                 const std::vector<int64_t>& recv_counts, const std::string& phase);

/// all-to-all of one count per rank: what each rank will send me.
std::vector<int64_t> exchange_counts(const Communicator& comm, const std::vector<int64_t>& send_counts,
                                     const std::string& phase);

/// Variable all-gather: rank r contributes counts[r] elements; recv holds them all in rank order.
template <class T>
void all_gather_v(const Communicator& comm, const T* send, const std::vector<int64_t>& counts, T* recv,
                  const std::string& phase) {
  std::vector<int> n(counts.size()), displs(counts.size());
  int64_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    n[r] = mpi_count(counts[r], "MPI_Allgatherv");
    displs[r] = mpi_count(offset, "MPI_Allgatherv (displacement)");
    offset += counts[r];
  }
  Stopwatch watch;
  check_mpi(MPI_Allgatherv(send, n[size_t(comm.rank())], mpi_type<T>(), recv, n.data(), displs.data(),
                           mpi_type<T>(), comm.get()),
            "MPI_Allgatherv");
  comm.stats().record(phase, Collective::AllGather, counts[size_t(comm.rank())] * int64_t(sizeof(T)),
                      watch.seconds());
}

/// Sends buckets[r] to rank r and returns everything received, in rank order (recv_counts[r] from rank r).
template <class T>
std::vector<T> exchange_buckets(const Communicator& comm, const std::vector<std::vector<T>>& buckets,
                                const std::string& phase, std::vector<int64_t>* recv_counts = nullptr) {
  std::vector<int64_t> send_counts(buckets.size());
  std::vector<T> send;
  for (size_t r = 0; r < buckets.size(); ++r) {
    send_counts[r] = int64_t(buckets[r].size());
    send.insert(send.end(), buckets[r].begin(), buckets[r].end());
  }
  const std::vector<int64_t> counts = exchange_counts(comm, send_counts, phase);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<T> recv(static_cast<size_t>(total));
  all_to_allv(comm, send.data(), send_counts, recv.data(), counts, phase);
  if (recv_counts) *recv_counts = counts;
  return recv;
}

/// Root's `count` elements to every rank.
template <class T>
void broadcast(const Communicator& comm, T* data, int64_t count, int root, const std::string& phase) {
  Stopwatch watch;
  check_mpi(MPI_Bcast(data, mpi_count(count, "MPI_Bcast"), mpi_type<T>(), root, comm.get()), "MPI_Bcast");
  comm.stats().record(phase, Collective::Broadcast, comm.rank() == root ? count * int64_t(sizeof(T)) : 0,
                      watch.seconds());
}

// ---- non-blocking (buffers must outlive the Request) --------------------------------------------------

/// Non-blocking all_reduce.
template <class T>
Request iall_reduce(const Communicator& comm, T* data, int64_t count, ReduceOp op, const std::string& phase) {
  MPI_Request r;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, mpi_count(count, "MPI_Iallreduce"), mpi_type<T>(), mpi_op(op),
                           comm.get(), &r),
            "MPI_Iallreduce");
  return Request(r, comm, phase, Collective::AllReduce, count * int64_t(sizeof(T)));
}

/// Non-blocking all_gather.
template <class T>
Request iall_gather(const Communicator& comm, const T* send, int64_t count, T* recv,
                    const std::string& phase) {
  MPI_Request r;
  const int n = mpi_count(count, "MPI_Iallgather");
  check_mpi(MPI_Iallgather(send, n, mpi_type<T>(), recv, n, mpi_type<T>(), comm.get(), &r), "MPI_Iallgather");
  return Request(r, comm, phase, Collective::AllGather, count * int64_t(sizeof(T)));
}

/// Non-blocking reduce_scatter.
template <class T>
Request ireduce_scatter(const Communicator& comm, const T* send, T* recv, int64_t count_per_rank, ReduceOp op,
                        const std::string& phase) {
  MPI_Request r;
  check_mpi(MPI_Ireduce_scatter_block(send, recv, mpi_count(count_per_rank, "MPI_Ireduce_scatter_block"),
                                      mpi_type<T>(), mpi_op(op), comm.get(), &r),
            "MPI_Ireduce_scatter_block");
  return Request(r, comm, phase, Collective::ReduceScatter,
                 count_per_rank * comm.size() * int64_t(sizeof(T)));
}

/// Non-blocking all_to_all.
template <class T>
Request iall_to_all(const Communicator& comm, const T* send, int64_t count_per_rank, T* recv,
                    const std::string& phase) {
  MPI_Request r;
  const int n = mpi_count(count_per_rank, "MPI_Ialltoall");
  check_mpi(MPI_Ialltoall(send, n, mpi_type<T>(), recv, n, mpi_type<T>(), comm.get(), &r), "MPI_Ialltoall");
  return Request(r, comm, phase, Collective::AllToAll,
                 count_per_rank * (comm.size() - 1) * int64_t(sizeof(T)));
}

/// Non-blocking broadcast.
template <class T>
Request ibroadcast(const Communicator& comm, T* data, int64_t count, int root, const std::string& phase) {
  MPI_Request r;
  check_mpi(MPI_Ibcast(data, mpi_count(count, "MPI_Ibcast"), mpi_type<T>(), root, comm.get(), &r),
            "MPI_Ibcast");
  return Request(r, comm, phase, Collective::Broadcast, comm.rank() == root ? count * int64_t(sizeof(T)) : 0);
}

/// Non-blocking variable all-to-all. The count/displacement arrays live inside the Request's owner:
/// pass `plan` storage that outlives the request (AllToAllvPlan below does).
struct AllToAllvPlan {
  std::vector<int> send_counts;  ///< elements to each rank
  std::vector<int> send_displs;  ///< their offsets in the send buffer
  std::vector<int> recv_counts;  ///< elements from each rank
  std::vector<int> recv_displs;  ///< their offsets in the receive buffer
  int64_t bytes_to_others = 0;   ///< what the byte counters record
  /// The MPI counts and offsets of a variable all-to-all of T (throws past MPI's int).
  template <class T>
  static AllToAllvPlan make(const Communicator& comm, const std::vector<int64_t>& send_counts,
                            const std::vector<int64_t>& recv_counts);
};

/// Non-blocking variable all-to-all with the counts of `plan`.
template <class T>
Request iall_to_allv(const Communicator& comm, const T* send, T* recv, const AllToAllvPlan& plan,
                     const std::string& phase) {
  MPI_Request r;
  check_mpi(MPI_Ialltoallv(send, plan.send_counts.data(), plan.send_displs.data(), mpi_type<T>(), recv,
                           plan.recv_counts.data(), plan.recv_displs.data(), mpi_type<T>(), comm.get(), &r),
            "MPI_Ialltoallv");
  return Request(r, comm, phase, Collective::AllToAll, plan.bytes_to_others);
}

template <class T>
AllToAllvPlan AllToAllvPlan::make(const Communicator& comm, const std::vector<int64_t>& send_counts,
                                  const std::vector<int64_t>& recv_counts) {
  AllToAllvPlan plan;
  const size_t p = size_t(comm.size());
  plan.send_counts.resize(p);
  plan.send_displs.resize(p);
  plan.recv_counts.resize(p);
  plan.recv_displs.resize(p);
  int64_t send_offset = 0, recv_offset = 0;
  for (size_t r = 0; r < p; ++r) {
    plan.send_counts[r] = mpi_count(send_counts[r], "MPI_Alltoallv");
    plan.recv_counts[r] = mpi_count(recv_counts[r], "MPI_Alltoallv");
    plan.send_displs[r] = mpi_count(send_offset, "MPI_Alltoallv (displacement)");
    plan.recv_displs[r] = mpi_count(recv_offset, "MPI_Alltoallv (displacement)");
    send_offset += send_counts[r];
    recv_offset += recv_counts[r];
    if (int(r) != comm.rank()) plan.bytes_to_others += send_counts[r] * int64_t(sizeof(T));
  }
  return plan;
}

template <class T>
void all_to_allv(const Communicator& comm, const T* send, const std::vector<int64_t>& send_counts, T* recv,
                 const std::vector<int64_t>& recv_counts, const std::string& phase) {
  const AllToAllvPlan plan = AllToAllvPlan::make<T>(comm, send_counts, recv_counts);
  Stopwatch watch;
  check_mpi(MPI_Alltoallv(send, plan.send_counts.data(), plan.send_displs.data(), mpi_type<T>(), recv,
                          plan.recv_counts.data(), plan.recv_displs.data(), mpi_type<T>(), comm.get()),
            "MPI_Alltoallv");
  comm.stats().record(phase, Collective::AllToAll, plan.bytes_to_others, watch.seconds());
}

}  // namespace tessera
