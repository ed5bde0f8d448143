// SPDX-License-Identifier: BSD-3-Clause
// One job per checkpoint directory: an advisory lock on DIR/checkpoint.lock (fcntl F_SETLK, which Lustre
// mounted with -o flock, GPFS and NFS with lockd honour across nodes), held by rank 0 for the run. The
// lock file names its holder (host, pid, start), so a second job is refused with who holds it. A job that
// dies loses its lock with its process, so a stale lock file is recognized and taken over.
#pragma once

#include <string>

#include "tessera/comm/communicator.hpp"

namespace tessera {

/// The lock of one checkpoint directory, held by rank 0 while it lives.
class CheckpointLock {
 public:
  /// The lock file's path in a checkpoint directory.
  static std::string path_in(const std::string& dir) { return dir + "/checkpoint.lock"; }

  /// Collective: rank 0 takes the lock of `dir` (which must exist). Throws CollectiveError naming the
  /// holder when another process holds it. Where the file system supports no locks, says so in the log and
  /// goes on without one.
  CheckpointLock(const std::string& dir, const Communicator& comm);
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;
  /// Releases the lock (rank 0; no communication). The file stays, naming its last holder.
  ~CheckpointLock();

  /// Whether this process holds a lock on the directory (false where the file system has none).
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace tessera
