// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/communicator.hpp"

#include <utility>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera {

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail(call, " failed: ", std::string(text, size_t(length)));
}

Communicator Communicator::world() {
  return Communicator(MPI_COMM_WORLD, false, std::make_shared<CommStats>());
}

Communicator::Communicator(MPI_Comm comm, bool owned, std::shared_ptr<CommStats> stats)
    : comm_(comm), owned_(owned), stats_(std::move(stats)) {
  if (comm_ != MPI_COMM_NULL) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  if (!stats_) stats_ = std::make_shared<CommStats>();
}

Communicator::Communicator(Communicator&& other) noexcept {
  *this = std::move(other);
}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    owned_ = std::exchange(other.owned_, false);
    rank_ = other.rank_;
    size_ = other.size_;
    stats_ = std::move(other.stats_);
    nccl_ = std::move(other.nccl_);
  }
  return *this;
}

Communicator::~Communicator() {
  reset();
}

void Communicator::reset() noexcept {
  nccl_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
  owned_ = false;
}

Communicator Communicator::split(int color, int key) const {
  MPI_Comm out = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color, key, &out), "MPI_Comm_split");
  return Communicator(out, true, stats_);
}

Communicator Communicator::dup(bool share_stats) const {
  MPI_Comm out = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm_, &out), "MPI_Comm_dup");
  return Communicator(out, true, share_stats ? stats_ : std::make_shared<CommStats>());
}

void Communicator::barrier() const {
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

std::string Communicator::first_problem(bool ok, const std::string& message) const {
  // The lowest failing rank (or size_ if none) tells everyone; then it broadcasts its message.
  int mine = ok ? size_ : rank_, first = size_;
  check_mpi(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
  if (first == size_) return std::string();
  int length = rank_ == first ? int(message.size()) : 0;
  check_mpi(MPI_Bcast(&length, 1, MPI_INT, first, comm_), "MPI_Bcast");
  std::vector<char> text(size_t(length) + 1, '\0');
  if (rank_ == first) message.copy(text.data(), message.size());
  check_mpi(MPI_Bcast(text.data(), length, MPI_CHAR, first, comm_), "MPI_Bcast");
  // A failing rank with an empty message still fails.
  return length > 0 ? std::string(text.data(), size_t(length)) : std::string("check failed");
}

void Communicator::check(bool ok, const std::string& message) const {
  const std::string problem = first_problem(ok, message);
  if (!problem.empty()) throw CollectiveError(problem);
}

}  // namespace tessera
