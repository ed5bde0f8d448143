// SPDX-License-Identifier: BSD-3-Clause
// A child process spoken to in lines: its stdin takes our lines, a reader thread collects the lines it
// prints. It runs in its own process group, so stopping it also stops anything it started (a shell
// pipeline, `sleep`) and the reader never waits on an orphan holding the pipe. Not installed.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace tessera {

class AgentProcess {
 public:
  /// Starts `/bin/sh -c command`. Throws Error when it cannot be started.
  explicit AgentProcess(const std::string& command);
  /// Kills the process group and reaps it; SIGPIPE's disposition is back to what it was before.
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  /// Writes one line (a newline is added); false when the agent no longer reads (it exited).
  bool send(const std::string& line);
  /// The oldest line the agent printed that was not taken yet.
  std::optional<std::string> take_line();
  /// The agent closed its output (exited or crashed) and every line was taken.
  bool finished();

 private:
  void read_loop();
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::thread reader_;
  std::atomic<bool> stop_{false}, eof_{false};
  std::mutex mutex_;
  std::deque<std::string> lines_;
  struct sigaction previous_sigpipe_ {};  // put back when the agent goes: SIGPIPE is the process's
};

}  // namespace tessera
