// SPDX-License-Identifier: BSD-3-Clause
#include "agent_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "tessera/core/error.hpp"

extern char** environ;

namespace tessera {

AgentProcess::AgentProcess(const std::string& command) {
  int in[2], out[2];
  require_os(pipe2(in, O_CLOEXEC) == 0, "prefetch agent: cannot create a pipe");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    require_os(false, "prefetch agent: cannot create a pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  const int status = posix_spawn(&pid_, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  if (status != 0) {
    close(in[1]);
    close(out[0]);
    errno = status;
    require_os(false, "prefetch agent: cannot start '", command, "'");
  }
  // A write to an agent that died must fail with EPIPE, not kill this process; only while the agent lives.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &previous_sigpipe_);
  to_child_ = in[1];
  from_child_ = out[0];
  // An agent that stops reading must not block us once the pipe is full: send() then reports failure.
  fcntl(to_child_, F_SETFL, fcntl(to_child_, F_GETFL) | O_NONBLOCK);
  reader_ = std::thread([this] { read_loop(); });
}

AgentProcess::~AgentProcess() {
  stop_ = true;
  if (pid_ > 0) kill(-pid_, SIGKILL);
  if (reader_.joinable()) reader_.join();
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
  if (pid_ > 0) waitpid(pid_, nullptr, 0);
  sigaction(SIGPIPE, &previous_sigpipe_, nullptr);
}

void AgentProcess::read_loop() {
  std::string partial;
  char buffer[4096];
  while (!stop_) {
    pollfd p{from_child_, POLLIN, 0};
    const int ready = poll(&p, 1, 50);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t got = read(from_child_, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    partial.append(buffer, size_t(got));
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1)) {
      const std::lock_guard<std::mutex> lock(mutex_);
      lines_.push_back(partial.substr(0, nl));
    }
  }
  if (!partial.empty()) {
    const std::lock_guard<std::mutex> lock(mutex_);
    lines_.push_back(partial);
  }
  eof_ = true;
}

bool AgentProcess::send(const std::string& line) {
  const std::string text = line + '\n';
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t wrote = write(to_child_, text.data() + done, text.size() - done);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;  // EPIPE: it exited; EAGAIN: it does not read
    done += size_t(wrote);
  }
  return true;
}

std::optional<std::string> AgentProcess::take_line() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (lines_.empty()) return std::nullopt;
  std::string line = std::move(lines_.front());
  lines_.pop_front();
  return line;
}

bool AgentProcess::finished() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return eof_ && lines_.empty();
}

}  // namespace tessera
