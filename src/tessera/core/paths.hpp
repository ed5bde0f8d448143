// SPDX-License-Identifier: BSD-3-Clause
// What a run reads and writes, checked before anything is loaded: an output never names an input, another
// output or an existing directory, and its directory exists (a checkpoint directory is created). Paths
// compare by their resolved form (symbolic links and `..` followed, also for files that do not exist yet)
// and, where both exist, by device and inode, so a hard link to the input is caught too.
//
// The output policy every writer follows: the output's target is its name with every symbolic link
// followed (a link is written through, never replaced); an existing target that is not a regular file (a
// FIFO, a device, a socket) is refused before any work; the data goes to a temporary beside the target,
// which is flushed to disk, renamed onto the target, and the folder's entry flushed, so a crash leaves the
// old file or the new one. Inputs must be regular files, checked before they are opened (a FIFO would
// block the reader forever).
#pragma once

#include <string>
#include <vector>

namespace tessera {

/// The absolute form of `path` with every symbolic link, "." and ".." resolved; for a path that does not
/// exist, its directory resolved and the last name appended. Empty when the directory does not exist.
std::string resolved_path(const std::string& path);

/// Where an output named `path` is written: `path` with every symbolic link followed, the last name too
/// (also a link to a file that does not exist yet), then resolved as resolved_path. Empty when its
/// directory does not exist.
std::string output_target(const std::string& path);

/// "a FIFO", "a character device", "a block device", "a socket", "a directory" or "a regular file" for an
/// existing path (links followed), "" for a missing one.
std::string file_kind(const std::string& path);

/// Throws Error "<path>: <option> names a FIFO, not a regular file ..." when `path` (links followed) exists
/// and is not a regular file. Checked without opening it. Local.
void require_regular_output(const std::string& path, const std::string& option);

/// Throws Error "<path>: <option> cannot be read (No such file...)" when `path` is missing or unreadable,
/// and "<path>: <option> names a FIFO, not a regular file" when it is not a regular file: before the file
/// is opened, so that a FIFO never blocks the reader. Local.
void require_regular_input(const std::string& path, const std::string& option);

/// Throws Error "<path>: cannot write <what> (<reason>)" unless a file can be created beside the output's
/// target (probed with a temporary that is removed again), and when the target exists and is not a regular
/// file. Local.
void probe_writable(const std::string& path, const std::string& what);

/// The temporary an output with target `target` is written to: beside it, named by the writer's pid.
std::string temporary_beside(const std::string& target, long pid);

/// Flushes a file's data to disk (open and fsync): every rank that wrote into a shared file calls it, so
/// each node's cached pages reach the file system. Throws Error naming `path` on failure. Local.
void sync_file(const std::string& path);

/// Commits an output written to `temp` (temporary_beside(target)): flushes it, renames it onto `target`
/// and flushes the folder's entry. On failure the temporary is removed and Error names the target and
/// `what`. Local: one rank commits.
void commit_output(const std::string& temp, const std::string& target, const std::string& what);

/// Writes `text` to the output `path` under the output policy (one rank: a temporary beside the target,
/// flushed, renamed). Throws Error naming `path` and `what`.
void write_text_output(const std::string& path, const std::string& text, const std::string& what);

/// A run's files: inputs, file outputs, directory outputs. Each is named by the option that gave it.
class PathPlan {
 public:
  /// A file the run reads (the graph, a checkpoint resumed from, a partition file): it must be a regular
  /// file.
  void input(const std::string& path, const std::string& option);
  /// A file the run writes (written under a temporary name beside its target and renamed): when it exists,
  /// it must be a regular file.
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
