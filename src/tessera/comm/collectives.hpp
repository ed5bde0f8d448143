// SPDX-License-Identifier: BSD-3-Clause
// Collectives over a Communicator, blocking and non-blocking, each recording calls, bytes and time under
// a phase name in the communicator's CommStats (see comm_stats.hpp for what "bytes" means per kind).
// Counts are element counts of T and may pass 2^31: a message larger than the chunk limit (2^31 - 1 bytes,
// or TESSERA_MPI_CHUNK_BYTES, which the tests set tiny so every exchange takes that path) goes in pieces.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
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
/// MPI_INT8_T.
template <>
inline MPI_Datatype mpi_type<int8_t>() {
  return MPI_INT8_T;
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

/// The most bytes one MPI call moves per piece (TESSERA_MPI_CHUNK_BYTES, default 2^31 - 1).
int64_t mpi_chunk_bytes();
/// Sets that limit (at least 1; every rank must use the same).
void set_mpi_chunk_bytes(int64_t bytes);
/// The most elements of T per piece: the byte limit over sizeof(T), at least 1, at most INT_MAX.
template <class T>
int64_t mpi_chunk_elements() {
  return std::clamp<int64_t>(mpi_chunk_bytes() / int64_t(sizeof(T)), 1, INT_MAX);
}

/// `count` elements of T for one MPI call that is not cut in pieces: refused (naming the call) past the
/// chunk limit, so a tiny TESSERA_MPI_CHUNK_BYTES in the tests finds every call that should have been.
template <class T>
int mpi_piece_count(int64_t count, const char* call) {
  require(count >= 0 && count <= mpi_chunk_elements<T>(), call, ": ", count,
          " elements pass the MPI chunk limit (", mpi_chunk_bytes(), " bytes) in one call");
  return int(count);
}

namespace detail {
// Untyped bodies of the collectives below, each splitting what passes `chunk` elements.
void all_reduce_chunked(const Communicator& comm, void* data, int64_t count, MPI_Datatype type, size_t size,
                        MPI_Op op, int64_t chunk);
void broadcast_chunked(const Communicator& comm, void* data, int64_t count, MPI_Datatype type, size_t size,
                       int root, int64_t chunk);
void all_gather_v_chunked(const Communicator& comm, const void* send, const std::vector<int64_t>& counts,
                          void* recv, MPI_Datatype type, size_t size, int64_t chunk);
void reduce_scatter_chunked(const Communicator& comm, const void* send, void* recv, int64_t count_per_rank,
                            MPI_Datatype type, size_t size, MPI_Op op, int64_t chunk);
void all_to_allv_chunked(const Communicator& comm, const void* send, const std::vector<int64_t>& send_counts,
                         void* recv, const std::vector<int64_t>& recv_counts, MPI_Datatype type, size_t size,
                         int64_t chunk);
std::vector<MPI_Request> iall_reduce_chunked(const Communicator& comm, void* data, int64_t count,
                                             MPI_Datatype type, size_t size, MPI_Op op, int64_t chunk);
}  // namespace detail

/// A pending non-blocking collective (one MPI request per piece). Move-only; waits in its destructor if
/// nobody did, so buffers are never released under a running operation.
class Request {
 public:
  /// No operation.
  Request() = default;
  /// Tracks `requests`, posted on `comm`; counts `bytes` of `kind` under `phase` when they complete.
  Request(std::vector<MPI_Request> requests, const Communicator& comm, std::string phase, Collective kind,
          int64_t bytes);
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
  bool active() const { return !requests_.empty(); }

 private:
  std::vector<MPI_Request> requests_;
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
  detail::all_reduce_chunked(comm, data, count, mpi_type<T>(), sizeof(T), mpi_op(op),
                             mpi_chunk_elements<T>());
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
  detail::all_gather_v_chunked(comm, send, std::vector<int64_t>(size_t(comm.size()), count), recv,
                               mpi_type<T>(), sizeof(T), mpi_chunk_elements<T>());
  comm.stats().record(phase, Collective::AllGather, count * int64_t(sizeof(T)), watch.seconds());
}

/// `send` holds count_per_rank * size elements; rank r receives the reduction of block r.
template <class T>
void reduce_scatter(const Communicator& comm, const T* send, T* recv, int64_t count_per_rank, ReduceOp op,
                    const std::string& phase) {
  Stopwatch watch;
  detail::reduce_scatter_chunked(comm, send, recv, count_per_rank, mpi_type<T>(), sizeof(T), mpi_op(op),
                                 mpi_chunk_elements<T>());
  comm.stats().record(phase, Collective::ReduceScatter, count_per_rank * comm.size() * int64_t(sizeof(T)),
                      watch.seconds());
}

/// Block r of `send` (count_per_rank elements) goes to rank r.
template <class T>
void all_to_all(const Communicator& comm, const T* send, int64_t count_per_rank, T* recv,
                const std::string& phase) {
  Stopwatch watch;
  if (count_per_rank <= mpi_chunk_elements<T>()) {
    const int n = int(count_per_rank);
    check_mpi(MPI_Alltoall(send, n, mpi_type<T>(), recv, n, mpi_type<T>(), comm.get()), "MPI_Alltoall");
  } else {  // the same decision on every rank: count_per_rank is the same everywhere
    const std::vector<int64_t> counts(size_t(comm.size()), count_per_rank);
    detail::all_to_allv_chunked(comm, send, counts, recv, counts, mpi_type<T>(), sizeof(T),
                                mpi_chunk_elements<T>());
  }
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
  Stopwatch watch;
  detail::all_gather_v_chunked(comm, send, counts, recv, mpi_type<T>(), sizeof(T), mpi_chunk_elements<T>());
  comm.stats().record(phase, Collective::AllGather, counts[size_t(comm.rank())] * int64_t(sizeof(T)),
                      watch.seconds());
}

/// Sends counts[r] values to each rank r from one buffer grouped by rank (rank 0's first) and puts what
/// arrived into `recv`, in rank order (recv_counts[r] from rank r), resized to fit. Its capacity is kept: a
/// caller that exchanges every step reuses one buffer, where a fresh one each step had every page zeroed by
/// the kernel on its first touch (9% of a sampled training step's time, with the other per-step buffers).
template <class T>
void exchange_grouped_into(const Communicator& comm, const std::vector<T>& send,
                           const std::vector<int64_t>& counts, const std::string& phase, std::vector<T>& recv,
                           std::vector<int64_t>* recv_counts = nullptr) {
  std::vector<int64_t> got_counts = exchange_counts(comm, counts, phase);
  int64_t total = 0;
  for (int64_t c : got_counts) total += c;
  recv.resize(static_cast<size_t>(total));
  all_to_allv(comm, send.data(), counts, recv.data(), got_counts, phase);
  if (recv_counts) *recv_counts = std::move(got_counts);
}

/// The same, returning what arrived. The buffer is taken and freed before returning: the exchange holds one
/// send and one receive buffer, where buckets held the values twice while packing.
template <class T>
std::vector<T> exchange_grouped(const Communicator& comm, std::vector<T> send,
                                const std::vector<int64_t>& counts, const std::string& phase,
                                std::vector<int64_t>* recv_counts = nullptr) {
  std::vector<T> recv;
  exchange_grouped_into(comm, send, counts, phase, recv, recv_counts);
  return recv;
}

namespace detail {
// Packs the buckets in rank order and exchanges them; buckets the caller gave up (non-const) are freed as
// they are packed.
template <class T, class Buckets>
std::vector<T> exchange_packed(const Communicator& comm, Buckets& buckets, const std::string& phase,
                               std::vector<int64_t>* recv_counts) {
  std::vector<int64_t> send_counts(buckets.size());
  size_t total_send = 0;
  for (const std::vector<T>& bucket : buckets) total_send += bucket.size();
  std::vector<T> send;
  send.reserve(total_send);
  for (size_t r = 0; r < buckets.size(); ++r) {
    send_counts[r] = int64_t(buckets[r].size());
    send.insert(send.end(), buckets[r].begin(), buckets[r].end());
    if constexpr (!std::is_const_v<Buckets>) std::vector<T>().swap(buckets[r]);
  }
  return exchange_grouped(comm, std::move(send), send_counts, phase, recv_counts);
}
}  // namespace detail

/// Sends buckets[r] to rank r and returns everything received, in rank order (recv_counts[r] from rank r).
template <class T>
std::vector<T> exchange_buckets(const Communicator& comm, const std::vector<std::vector<T>>& buckets,
                                const std::string& phase, std::vector<int64_t>* recv_counts = nullptr) {
  return detail::exchange_packed<T>(comm, buckets, phase, recv_counts);
}

/// The same, freeing each bucket as it is packed: the peak is the packed send plus the received data, not
/// the buckets as well (the loaders' largest transient).
template <class T>
std::vector<T> exchange_buckets(const Communicator& comm, std::vector<std::vector<T>>&& buckets,
                                const std::string& phase, std::vector<int64_t>* recv_counts = nullptr) {
  return detail::exchange_packed<T>(comm, buckets, phase, recv_counts);
}

/// Root's `count` elements to every rank.
template <class T>
void broadcast(const Communicator& comm, T* data, int64_t count, int root, const std::string& phase) {
  Stopwatch watch;
  detail::broadcast_chunked(comm, data, count, mpi_type<T>(), sizeof(T), root, mpi_chunk_elements<T>());
  comm.stats().record(phase, Collective::Broadcast, comm.rank() == root ? count * int64_t(sizeof(T)) : 0,
                      watch.seconds());
}

// ---- non-blocking (buffers must outlive the Request) --------------------------------------------------

/// Non-blocking all_reduce (one request per piece).
template <class T>
Request iall_reduce(const Communicator& comm, T* data, int64_t count, ReduceOp op, const std::string& phase) {
  return Request(detail::iall_reduce_chunked(comm, data, count, mpi_type<T>(), sizeof(T), mpi_op(op),
                                             mpi_chunk_elements<T>()),
                 comm, phase, Collective::AllReduce, count * int64_t(sizeof(T)));
}

template <class T>
void all_to_allv(const Communicator& comm, const T* send, const std::vector<int64_t>& send_counts, T* recv,
                 const std::vector<int64_t>& recv_counts, const std::string& phase) {
  Stopwatch watch;
  detail::all_to_allv_chunked(comm, send, send_counts, recv, recv_counts, mpi_type<T>(), sizeof(T),
                              mpi_chunk_elements<T>());
  int64_t to_others = 0;
  for (size_t r = 0; r < send_counts.size(); ++r)
    if (int(r) != comm.rank()) to_others += send_counts[r] * int64_t(sizeof(T));
  comm.stats().record(phase, Collective::AllToAll, to_others, watch.seconds());
}

}  // namespace tessera
