// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/paths.hpp"

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

void probe_writable(const std::string& path, const std::string& what) {
  const std::string probe = path + ".tmp-" + std::to_string(getpid());
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  require_os(f != nullptr, path, ": cannot write ", what);
  std::fclose(f);
  std::remove(probe.c_str());
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
    const std::string resolved = resolved_path(f.path);
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
