// SPDX-License-Identifier: BSD-3-Clause
// The readers under test take paths: each input is written to one scratch file per process first.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

namespace tessera_fuzz {

// The scratch files written, removed when the process ends normally (a corpus replay under ctest) so that
// runs do not leave one file per process in TMPDIR.
struct ScratchFiles {
  std::set<std::string> paths;
  ~ScratchFiles() {
    for (const std::string& p : paths) std::remove(p.c_str());
  }
};

inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path =
      std::string(dir && *dir ? dir : "/tmp") + "/tessera-fuzz-" + std::to_string(getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();  // the harness itself cannot work: not a finding
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  static ScratchFiles scratch;
  scratch.paths.insert(path);
  return path;
}

/// The structure-aware harnesses' input, read a byte at a time; zeros once it is used up, so every input
/// decodes to some file.
struct Input {
  const uint8_t* data;
  size_t size, at = 0;
  bool more() const { return at < size; }
  uint8_t byte() { return at < size ? data[at++] : 0; }
  uint32_t below(uint32_t n) { return n == 0 ? 0 : byte() % n; }
};

}  // namespace tessera_fuzz
