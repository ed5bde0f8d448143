// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/paths.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (stat(a.c_str(), &sa) != 0 || stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool is_directory(const std::string& path) {
  struct stat s {};
  return stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

// mkdir -p; throws naming the option on the first component that cannot be made.
void make_directories(const std::string& path, const std::string& option) {
  std::string partial;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t slash = std::min(path.find('/', at), path.size());
    partial = path.substr(0, slash);
    at = slash + 1;
    if (partial.empty() || is_directory(partial)) continue;
    require_os(mkdir(partial.c_str(), 0777) == 0 || (errno == EEXIST && is_directory(partial)), path, ": ",
               option, ": cannot create the directory ", partial);
  }
}

}  // namespace

std::string file_kind(const std::string& path) {
  struct stat s {};
  if (stat(path.c_str(), &s) != 0) return {};
  if (S_ISREG(s.st_mode)) return "a regular file";
  if (S_ISDIR(s.st_mode)) return "a directory";
  if (S_ISFIFO(s.st_mode)) return "a FIFO";
  if (S_ISCHR(s.st_mode)) return "a character device";
  if (S_ISBLK(s.st_mode)) return "a block device";
  if (S_ISSOCK(s.st_mode)) return "a socket";
  return "not a regular file";
}

void require_regular_output(const std::string& path, const std::string& option) {
  const std::string kind = file_kind(path);
  require(kind.empty() || kind == "a regular file", path, ": ", option, " names ", kind,
          ", not a regular file (an output replaces a regular file only; give a file's path)");
}

void require_regular_input(const std::string& path, const std::string& option) {
  require_os(access(path.c_str(), R_OK) == 0, path, ": ", option, " cannot be read");
  const std::string kind = file_kind(path);
  require(kind == "a regular file", path, ": ", option, " names ", kind, ", not a regular file");
}

void probe_writable(const std::string& path, const std::string& what) {
  const std::string target = output_target(path);
  if (target.empty()) {
    errno = ENOENT;
    require_os(false, path, ": cannot write ", what);
  }
  require_regular_output(path, what);
  const std::string probe = temporary_beside(target, long(getpid()));
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  require_os(f != nullptr, path, ": cannot write ", what);
  std::fclose(f);
  std::remove(probe.c_str());
}

std::string output_target(const std::string& path) {
  if (path.empty()) return {};
  std::string p = path;
  // Follows the chain of links by hand: realpath() gives up on a link whose target does not exist yet.
  for (int hop = 0; hop < 40; ++hop) {
    struct stat s {};
    if (lstat(p.c_str(), &s) != 0 || !S_ISLNK(s.st_mode)) break;
    char buffer[PATH_MAX];
    const ssize_t length = readlink(p.c_str(), buffer, sizeof(buffer) - 1);
    if (length <= 0) break;
    std::string link(buffer, size_t(length));
    const size_t slash = p.find_last_of('/');
    if (link.front() != '/' && slash != std::string::npos) link = p.substr(0, slash + 1) + link;
    p = link;
  }
  return resolved_path(p);
}

std::string temporary_beside(const std::string& target, long pid) {
  return target + ".tmp-" + std::to_string(pid);
}

namespace {

// fsync of an open descriptor; file systems that cannot sync (EINVAL: pipes, some special ones) are
// not an error.
bool synced(int fd) { return fsync(fd) == 0 || errno == EINVAL || errno == EROFS; }

}  // namespace

void sync_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  require_os(fd >= 0, path, ": cannot open the written file to flush it");
  const bool ok = synced(fd);
  const int code = errno;
  close(fd);
  errno = code;
  require_os(ok, path, ": cannot flush the written file to disk");
}

void commit_output(const std::string& temp, const std::string& target, const std::string& what) {
  try {
    sync_file(temp);
    require_os(std::rename(temp.c_str(), target.c_str()) == 0, target, ": cannot rename the new ", what,
               " onto it");
  } catch (const Error&) {
    std::remove(temp.c_str());
    throw;
  }
  // The rename is durable once the folder's entry is: flushed too (best effort after the rename).
  const size_t slash = target.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : target.substr(0, slash);
  const int fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    const bool ok = synced(fd);
    close(fd);
    require_os(ok, folder, ": cannot flush the folder after writing ", target);
  }
}

std::string resolved_path(const std::string& path) {
  if (path.empty()) return {};
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) != nullptr) return buffer;
  // Not there (yet): resolve the directory, keep the name.
  std::string dir = ".", name = path;
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
    name = path.substr(slash + 1);
  }
  if (name.empty() || name == "." || name == "..") return {};
  if (realpath(dir.c_str(), buffer) == nullptr) return {};
  const std::string base = buffer;
  return base == "/" ? "/" + name : base + "/" + name;
}

void write_text_output(const std::string& path, const std::string& text, const std::string& what) {
  probe_writable(path, what);
  const std::string target = output_target(path), temp = temporary_beside(target, long(getpid()));
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  require_os(f != nullptr, path, ": cannot write ", what);
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    const int code = errno;
    std::remove(temp.c_str());
    errno = code;
    require_os(false, path, ": cannot write ", what);
  }
  commit_output(temp, target, what);
}

void PathPlan::input(const std::string& path, const std::string& option) {
  if (!path.empty()) inputs_.push_back({path, option});
}

void PathPlan::output_file(const std::string& path, const std::string& option) {
  if (!path.empty()) files_.push_back({path, option});
}

void PathPlan::output_directory(const std::string& path, const std::string& option) {
  if (!path.empty()) directories_.push_back({path, option});
}

void PathPlan::check_and_prepare() const {
  for (const Entry& in : inputs_) {
    const std::string kind = file_kind(in.path);  // a missing input is its reader's to report
    require(kind.empty() || kind == "a regular file", in.path, ": ", in.option, " names ", kind,
            ", not a regular file");
  }
  for (const Entry& d : directories_) {
    struct stat s {};
    if (stat(d.path.c_str(), &s) == 0)
      require(S_ISDIR(s.st_mode), d.path, ": ", d.option, " names a file, not a directory");
    else
      make_directories(d.path, d.option);
  }
  std::vector<std::pair<std::string, const Entry*>> outputs;
  for (const Entry& f : files_) {
    if (is_directory(f.path)) fail(f.path, ": ", f.option, " names a directory; give a file name");
    require_regular_output(f.path, f.option);
    const std::string resolved = output_target(f.path);
    if (resolved.empty()) {
      errno = ENOENT;
      require_os(false, f.path, ": cannot write ", f.option);
    }
    for (const Entry& in : inputs_)
      require(resolved != resolved_path(in.path) && !same_file(f.path, in.path), f.path, ": ", f.option,
              " names the input of ", in.option, "; it would be overwritten (choose another path)");
    for (const auto& [other, entry] : outputs)
      require(resolved != other && !same_file(f.path, entry->path), f.path, ": given to both ", entry->option,
              " and ", f.option, "; each output needs its own path");
    outputs.emplace_back(resolved, &f);
  }
  for (const auto& [resolved, entry] : outputs) probe_writable(entry->path, entry->option);
}

}  // namespace tessera
