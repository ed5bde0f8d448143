// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/comm/shared_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/paths.hpp"

namespace tessera {

namespace {

std::string broadcast_text(const Communicator& comm, std::string text) {
  int64_t length = int64_t(text.size());
  broadcast(comm, &length, 1, 0, "outputs");
  text.resize(size_t(length));
  if (length > 0) broadcast(comm, text.data(), length, 0, "outputs");
  return text;
}

}  // namespace

SharedOutput::SharedOutput(const Communicator& comm, const std::string& path, const std::string& what)
    : comm_(comm.get(), false, comm.shared_stats()), path_(path), what_(what) {
  comm_.run_on(0, [&] {
    probe_writable(path_, what_);  // also refuses a FIFO, a device or a socket
    target_ = output_target(path_);
    temporary_ = temporary_beside(target_, long(getpid()));
    std::FILE* f = std::fopen(temporary_.c_str(), "wb");
    require_os(f != nullptr, path_, ": cannot write ", what_);
    std::fclose(f);
  });
  target_ = broadcast_text(comm_, target_);
  temporary_ = broadcast_text(comm_, temporary_);
}

SharedOutput::~SharedOutput() {
  if (!done_ && comm_.rank() == 0) std::remove(temporary_.c_str());
}

void SharedOutput::commit() {
  comm_.run_agreed([&] { sync_file(temporary_); });
  comm_.run_on(0, [&] { commit_output(temporary_, target_, what_); });
  done_ = true;
}

void SharedOutput::abandon() {
  comm_.barrier();  // every rank has let go of the file
  if (comm_.rank() == 0) std::remove(temporary_.c_str());
  done_ = true;
}

}  // namespace tessera
