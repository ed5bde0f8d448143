// SPDX-License-Identifier: BSD-3-Clause
// The .npz reader (zip directory, stored and deflated members, .npy headers, every dtype conversion):
// lists the members, then reads each one to its end in bounded pieces as int64, float and double.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input_file.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/npz_input.hpp"

namespace {

template <class T>
void read_all(const std::string& path, const std::string& member) {
  tessera::NpyStream stream(path, member);
  int64_t left = stream.header().count();
  std::vector<T> piece(256);
  // Bounded work: a header may claim 10^15 elements, the data ends long before (an Error) or is capped.
  for (int rounds = 0; left > 0 && rounds < 4096; ++rounds) {
    const int64_t n = std::min<int64_t>(left, int64_t(piece.size()));
    if (rounds % 2 == 1)
      stream.skip(n);
    else
      stream.read(piece.data(), n);
    left -= n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tessera_fuzz::write_input(data, size, ".npz");
  std::vector<std::string> members;
  try {
    members = tessera::npz_members(path);
  } catch (const tessera::Error&) {
    return 0;
  }
  if (members.size() > 8) members.resize(8);
  for (const std::string& m : members) {
    try {
      read_all<int64_t>(path, m);
    } catch (const tessera::Error&) {
    }
    try {
      read_all<float>(path, m);
    } catch (const tessera::Error&) {
    }
    try {
      read_all<double>(path, m);
    } catch (const tessera::Error&) {
    }
  }
  return 0;
}
