// SPDX-License-Identifier: BSD-3-Clause
// Errors. Inside a rank every problem is an exception; the top of the program (run_main in
// runtime.hpp) turns it into `tessera: error: <what>` and a non-zero exit on every rank.
//   Error           - this rank saw a problem; the job is aborted (other ranks may be inside a collective).
//   CollectiveError - every rank raised the same error at the same point (after a collective check),
//                     so the job can shut down cleanly.
#pragma once

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CollectiveError : public Error {
 public:
  using Error::Error;
};

/// Builds a message from its arguments with operator<< and throws Error.
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw Error(message.str());
}

/// fail(parts...) unless `condition` holds.
template <class... Parts>
void require(bool condition, const Parts&... parts) {
  if (!condition) fail(parts...);
}

/// For operating-system calls: throws Error "<parts> (<strerror(errno)>)" when !ok. errno is read inside,
/// after `ok` was evaluated (an argument std::strerror(errno) could be evaluated before the call it reports).
template <class... Parts>
void require_os(bool ok, const Parts&... parts) {
  if (ok) return;
  const int code = errno;
  fail(parts..., " (", std::strerror(code), ")");
}

}  // namespace tessera
