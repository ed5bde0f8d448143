// SPDX-License-Identifier: BSD-3-Clause
// What a run reads and writes, checked before anything is loaded: an output never names an input, another
// output or an existing directory, and its directory exists (a checkpoint directory is created). Paths
// compare by their resolved form (symbolic links and `..` followed, also for files that do not exist yet)
// and, where both exist, by device and inode, so a hard link to the input is caught too.
#pragma once

#include <string>
#include <vector>

namespace tessera {

/// The absolute form of `path` with every symbolic link, "." and ".." resolved; for a path that does not
/// exist, its directory resolved and the last name appended. Empty when the directory does not exist.
std::string resolved_path(const std::string& path);

/// Throws Error "<path>: cannot write <what> (<reason>)" unless a file can be created beside `path` (probed
/// with a temporary that is removed again). Local.
void probe_writable(const std::string& path, const std::string& what);

/// A run's files: inputs, file outputs, directory outputs. Each is named by the option that gave it.
class PathPlan {
 public:
  /// A file the run reads (the graph, a checkpoint resumed from, a partition file).
  void input(const std::string& path, const std::string& option);
  /// A file the run writes (written under a temporary name beside it and renamed).
  void output_file(const std::string& path, const std::string& option);
  /// A directory the run writes into (created when absent).
  void output_directory(const std::string& path, const std::string& option);
  /// Checks every rule and creates missing output directories; throws Error with the first problem, a
  /// line naming the path and the options involved. Local: call it on one rank (Communicator::run_on).
  void check_and_prepare() const;

 private:
  struct Entry {
    std::string path, option;
  };
  std::vector<Entry> inputs_, files_, directories_;
};

}  // namespace tessera
