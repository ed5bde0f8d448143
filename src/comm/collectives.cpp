// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/collectives.hpp"

#include <climits>
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

Request::Request(MPI_Request request, const Communicator& comm, std::string phase, Collective kind,
                 int64_t bytes)
    : request_(request),
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
    if (active()) MPI_Wait(&request_, MPI_STATUS_IGNORE);
    request_ = std::exchange(other.request_, MPI_REQUEST_NULL);
    stats_ = other.stats_;
    phase_ = std::move(other.phase_);
    kind_ = other.kind_;
    bytes_ = other.bytes_;
    start_ = other.start_;
  }
  return *this;
}

Request::~Request() {
  if (active()) MPI_Wait(&request_, MPI_STATUS_IGNORE);
}

void Request::wait() {
  if (!active()) return;
  check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
  stats_->record(phase_, kind_, bytes_, wall_seconds() - start_);
}

bool Request::test() {
  if (!active()) return true;
  int done = 0;
  check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
  if (done) stats_->record(phase_, kind_, bytes_, wall_seconds() - start_);
  return done != 0;
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
