// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/collectives.hpp"

#include <climits>
#include <cstdlib>
#include <utility>

#include "tessera/core/error.hpp"

namespace tessera {

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

int mpi_count(int64_t count, const char* call) {
  require(count >= 0 && count <= INT_MAX, call, ": count ", count,
          " does not fit MPI's int; split the message into smaller rounds");
  return int(count);
}

namespace {

int64_t chunk_bytes_from_environment() {
  const char* text = std::getenv("TESSERA_MPI_CHUNK_BYTES");
  if (text == nullptr || *text == '\0') return INT_MAX;
  char* end = nullptr;
  const long long bytes = std::strtoll(text, &end, 10);
  require(*end == '\0' && bytes >= 1, "TESSERA_MPI_CHUNK_BYTES must be a positive number of bytes, not '", text,
          "'");
  return bytes;
}

int64_t& chunk_bytes() {
  static int64_t bytes = chunk_bytes_from_environment();
  return bytes;
}

char* at(void* base, int64_t elements, size_t size) {
  return static_cast<char*>(base) + elements * int64_t(size);
}
const char* at(const void* base, int64_t elements, size_t size) {
  return static_cast<const char*>(base) + elements * int64_t(size);
}

// Any tag works: these messages are the only point-to-point traffic Tessera puts on a communicator, and
// a call's receives all complete before its next call posts more, so pieces cannot cross calls.
constexpr int kPieceTag = 7411;

}  // namespace

int64_t mpi_chunk_bytes() {
  return chunk_bytes();
}

void set_mpi_chunk_bytes(int64_t bytes) {
  require(bytes >= 1, "the MPI chunk limit must be at least 1 byte, not ", bytes);
  chunk_bytes() = bytes;
}

namespace detail {

void all_reduce_chunked(const Communicator& comm, void* data, int64_t count, MPI_Datatype type, size_t size,
                        MPI_Op op, int64_t chunk) {
  for (int64_t off = 0; off < count; off += chunk)
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, at(data, off, size), int(std::min(chunk, count - off)), type, op,
                            comm.get()),
              "MPI_Allreduce");
}

void broadcast_chunked(const Communicator& comm, void* data, int64_t count, MPI_Datatype type, size_t size,
                       int root, int64_t chunk) {
  for (int64_t off = 0; off < count; off += chunk)
    check_mpi(MPI_Bcast(at(data, off, size), int(std::min(chunk, count - off)), type, root, comm.get()),
              "MPI_Bcast");
}

// One MPI_Allgatherv when every count and offset fits; otherwise each rank's part is broadcast from its
// own send buffer in pieces. `counts` is the same on every rank, so every rank takes the same branch.
void all_gather_v_chunked(const Communicator& comm, const void* send, const std::vector<int64_t>& counts,
                          void* recv, MPI_Datatype type, size_t size, int64_t chunk) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (size_t r = 0; r < counts.size(); ++r) offsets[r + 1] = offsets[r] + counts[r];
  const int64_t largest = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  if (largest <= chunk && offsets.back() <= INT_MAX) {
    std::vector<int> n(counts.begin(), counts.end()), displs(offsets.begin(), offsets.end() - 1);
    check_mpi(MPI_Allgatherv(send, n[size_t(comm.rank())], type, recv, n.data(), displs.data(), type, comm.get()),
              "MPI_Allgatherv");
    return;
  }
  const size_t me = size_t(comm.rank());
  for (size_t r = 0; r < counts.size(); ++r) {
    for (int64_t off = 0; off < counts[r]; off += chunk) {
      const int n = int(std::min(chunk, counts[r] - off));
      void* piece = at(recv, offsets[r] + off, size);
      if (r == me)  // the root sends from its own input and copies it into place through MPI (device memory)
        check_mpi(MPI_Sendrecv(at(send, off, size), n, type, int(me), kPieceTag, piece, n, type, int(me),
                               kPieceTag, comm.get(), MPI_STATUS_IGNORE),
                  "MPI_Sendrecv");
      check_mpi(MPI_Bcast(piece, n, type, int(r), comm.get()), "MPI_Bcast");
    }
  }
}

// One MPI_Reduce_scatter_block when a block fits; otherwise block r is reduced onto rank r in pieces.
void reduce_scatter_chunked(const Communicator& comm, const void* send, void* recv, int64_t count_per_rank,
                            MPI_Datatype type, size_t size, MPI_Op op, int64_t chunk) {
  if (count_per_rank <= chunk) {
    check_mpi(MPI_Reduce_scatter_block(send, recv, int(count_per_rank), type, op, comm.get()),
              "MPI_Reduce_scatter_block");
    return;
  }
  for (int r = 0; r < comm.size(); ++r)
    for (int64_t off = 0; off < count_per_rank; off += chunk)
      check_mpi(MPI_Reduce(at(send, int64_t(r) * count_per_rank + off, size), at(recv, off, size),
                           int(std::min(chunk, count_per_rank - off)), type, op, r, comm.get()),
                "MPI_Reduce");
}

// Point to point, every pair's data in pieces of at most `chunk`: no count or offset passes through an
// int, and no rank needs to know another's counts to take the same path (an MPI_Alltoallv would).
void all_to_allv_chunked(const Communicator& comm, const void* send, const std::vector<int64_t>& send_counts,
                         void* recv, const std::vector<int64_t>& recv_counts, MPI_Datatype type, size_t size,
                         int64_t chunk) {
  require(int(send_counts.size()) == comm.size() && int(recv_counts.size()) == comm.size(),
          "all_to_allv: counts for ", send_counts.size(), " and ", recv_counts.size(), " ranks on ", comm.size());
  std::vector<MPI_Request> requests;
  // Receives first, so no piece waits in MPI's unexpected-message queue.
  auto post = [&](const std::vector<int64_t>& counts, bool sending) {
    int64_t offset = 0;
    for (int r = 0; r < comm.size(); ++r) {
      for (int64_t off = 0; off < counts[size_t(r)]; off += chunk) {
        const int n = int(std::min(chunk, counts[size_t(r)] - off));
        requests.emplace_back();
        if (sending)
          check_mpi(MPI_Isend(at(send, offset + off, size), n, type, r, kPieceTag, comm.get(), &requests.back()),
                    "MPI_Isend");
        else
          check_mpi(MPI_Irecv(at(recv, offset + off, size), n, type, r, kPieceTag, comm.get(), &requests.back()),
                    "MPI_Irecv");
      }
      offset += counts[size_t(r)];
    }
  };
  post(recv_counts, false);
  post(send_counts, true);
  check_mpi(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

std::vector<MPI_Request> iall_reduce_chunked(const Communicator& comm, void* data, int64_t count,
                                             MPI_Datatype type, size_t size, MPI_Op op, int64_t chunk) {
  std::vector<MPI_Request> requests;
  for (int64_t off = 0; off < count || requests.empty(); off += chunk) {  // a zero count still posts one
    requests.emplace_back();
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, at(data, off, size), int(std::min(chunk, count - off)), type, op,
                             comm.get(), &requests.back()),
              "MPI_Iallreduce");
  }
  return requests;
}

}  // namespace detail

Request::Request(std::vector<MPI_Request> requests, const Communicator& comm, std::string phase, Collective kind,
                 int64_t bytes)
    : requests_(std::move(requests)),
      stats_(&comm.stats()),
      phase_(std::move(phase)),
      kind_(kind),
      bytes_(bytes),
      start_(wall_seconds()) {}

Request::Request(Request&& other) noexcept {
  *this = std::move(other);
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (active()) MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    requests_ = std::move(other.requests_);
    other.requests_.clear();
    stats_ = other.stats_;
    phase_ = std::move(other.phase_);
    kind_ = other.kind_;
    bytes_ = other.bytes_;
    start_ = other.start_;
  }
  return *this;
}

Request::~Request() {
  if (active()) MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
}

void Request::wait() {
  if (!active()) return;
  check_mpi(MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  requests_.clear();
  stats_->record(phase_, kind_, bytes_, wall_seconds() - start_);
}

bool Request::test() {
  if (!active()) return true;
  int done = 0;
  check_mpi(MPI_Testall(int(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  if (!done) return false;
  requests_.clear();
  stats_->record(phase_, kind_, bytes_, wall_seconds() - start_);
  return true;
}

void wait_all(std::vector<Request>& requests) {
  for (Request& r : requests) r.wait();
}

std::vector<int64_t> exchange_counts(const Communicator& comm, const std::vector<int64_t>& send_counts,
                                     const std::string& phase) {
  require(int(send_counts.size()) == comm.size(), "exchange_counts: ", send_counts.size(), " counts for ",
          comm.size(), " ranks");
  std::vector<int64_t> recv_counts(send_counts.size());
  all_to_all(comm, send_counts.data(), 1, recv_counts.data(), phase);
  return recv_counts;
}

}  // namespace tessera
