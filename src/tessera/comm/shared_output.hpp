// SPDX-License-Identifier: BSD-3-Clause
// One output file that the ranks of a communicator write together, under the output policy of
// core/paths.hpp: written to a temporary beside the target (links followed), flushed by every rank that
// wrote, renamed onto the target by rank 0, the folder's entry flushed. Never committed, it is removed.
#pragma once

#include <string>

#include "tessera/comm/communicator.hpp"

namespace tessera {

/// An output file every rank of a communicator writes into: its temporary, then its commit.
class SharedOutput {
 public:
  /// Collective: agrees on the target of `path` and a temporary beside it (rank 0's view), refuses a target
  /// that exists and is not a regular file, and creates the temporary empty, so that an output that cannot
  /// be written fails before any work. Throws CollectiveError naming `path` and `what`.
  SharedOutput(const Communicator& comm, const std::string& path, const std::string& what);
  SharedOutput(const SharedOutput&) = delete;
  SharedOutput& operator=(const SharedOutput&) = delete;
  /// Removes the temporary of an output that was never committed (rank 0; no communication).
  ~SharedOutput();

  /// Where the ranks write.
  const std::string& temporary() const { return temporary_; }
  /// The file the output becomes.
  const std::string& target() const { return target_; }

  /// Collective: every rank flushes what it wrote to the temporary, then rank 0 renames it onto the target.
  void commit();
  /// Collective: the temporary is removed (a write that failed on some rank).
  void abandon();

 private:
  Communicator comm_;  // a view of the caller's
  std::string path_, what_, target_, temporary_;
  bool done_ = false;
};

}  // namespace tessera
