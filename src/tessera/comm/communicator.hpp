// SPDX-License-Identifier: BSD-3-Clause
// An owning MPI communicator. Movable, never copied (a copy would have to run a collective). Communicators
// made from one another (split, dup) share one CommStats, so a whole grid's traffic is counted together.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "tessera/comm/comm_stats.hpp"

namespace tessera {

class NcclComm;  // device_collectives.cpp: an NCCL communicator (CUDA builds with NCCL)

/// An MPI communicator that closes itself, with the byte and time counters of its collectives.
class Communicator {
 public:
  /// MPI_COMM_WORLD, not owned; a fresh CommStats.
  static Communicator world();

  Communicator() = default;
  /// Wraps `comm`; frees it on destruction when `owned`; counts into `stats` (a fresh CommStats when null).
  Communicator(MPI_Comm comm, bool owned, std::shared_ptr<CommStats> stats);
  /// Takes over `other`'s communicator.
  Communicator(Communicator&& other) noexcept;
  /// Frees this one's communicator (if owned) and takes over `other`'s.
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();

  /// The MPI handle.
  MPI_Comm get() const { return comm_; }
  /// This rank in it.
  int rank() const { return rank_; }
  /// Its ranks.
  int size() const { return size_; }
  /// The counters its collectives record into.
  CommStats& stats() const { return *stats_; }
  /// The same, shared.
  const std::shared_ptr<CommStats>& shared_stats() const { return stats_; }

  /// The NCCL communicator over the same ranks (attach_nccl in device_collectives.hpp), or null.
  NcclComm* nccl() const { return nccl_.get(); }
  /// Sets what nccl() returns (attach_nccl's job; split and dup do not copy it).
  void set_nccl(std::shared_ptr<NcclComm> nccl) { nccl_ = std::move(nccl); }

  /// Collective: ranks with the same color form a communicator, ordered by key.
  Communicator split(int color, int key) const;
  /// Collective: the same group with its own context (for a worker thread's traffic). With share_stats
  /// false it counts into fresh CommStats: CommStats is not thread-safe, so a communicator used by another
  /// thread must not share them.
  Communicator dup(bool share_stats = true) const;
  /// MPI_Barrier.
  void barrier() const;

  /// Collective check: if `ok` is false on any rank, every rank throws CollectiveError carrying the
  /// message of the lowest failing rank. Call it where all ranks reach the same point.
  void check(bool ok, const std::string& message) const;
  /// The same without the throw: the lowest failing rank's message on every rank, or "" when all are ok.
  /// For callers that must release collective resources (files) on every rank before throwing.
  std::string first_problem(bool ok, const std::string& message) const;

  /// Runs fn (local work, no communication) on every rank; an exception on any rank is re-thrown on every
  /// rank as CollectiveError with the lowest failing rank's message.
  template <class Fn>
  void run_agreed(Fn&& fn) const {
    std::string error;
    bool ok = true;
    try {
      fn();
    } catch (const std::exception& e) {
      ok = false;
      error = e.what();
    }
    check(ok, error);
  }

  /// Runs fn on rank `root` only; an exception there is re-thrown on every rank as CollectiveError.
  template <class Fn>
  void run_on(int root, Fn&& fn) const {
    run_agreed([&] {
      if (rank_ == root) fn();
    });
  }

 private:
  void reset() noexcept;
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0, size_ = 0;
  std::shared_ptr<CommStats> stats_;
  std::shared_ptr<NcclComm> nccl_;  // released before the MPI communicator it was made from
};

/// Throws Error with the MPI error string if `code` is not MPI_SUCCESS.
void check_mpi(int code, const char* call);

}  // namespace tessera
