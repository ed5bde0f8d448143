// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/training/checkpoint_lock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>

#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/paths.hpp"

namespace tessera {

namespace {

// POSIX record locks belong to the process, and closing any descriptor of the file releases them all: a
// second lock of the same file in one process must be refused here, not by the kernel.
std::mutex held_mutex;
std::set<std::string> held_paths;

std::string holder_text() {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  char when[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return "host " + std::string(host) + ", pid " + std::to_string(getpid()) + ", since " + when;
}

std::string file_text(int fd) {
  char buffer[512] = "";
  const ssize_t got = pread(fd, buffer, sizeof(buffer) - 1, 0);
  std::string text(buffer, got > 0 ? size_t(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

// Whether errno after F_SETLK says the file system keeps no locks (rather than that another holds it).
bool no_lock_support(int code) { return code == ENOLCK || code == EOPNOTSUPP || code == ENOSYS; }

}  // namespace

CheckpointLock::CheckpointLock(const std::string& dir, const Communicator& comm) {
  comm.run_on(0, [&] {
    path_ = resolved_path(path_in(dir));
    require(!path_.empty(), path_in(dir), ": the checkpoint directory does not exist");
    {
      const std::lock_guard<std::mutex> guard(held_mutex);
      require(held_paths.insert(path_).second, dir,
              ": this process already trains into this checkpoint directory; give each run its own");
    }
    const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int code = errno;
      {
        const std::lock_guard<std::mutex> guard(held_mutex);
        held_paths.erase(path_);
      }
      errno = code;
      require_os(false, path_in(dir), ": cannot open the checkpoint lock");
    }
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (fcntl(fd, F_SETLK, &lock) != 0) {
      const int code = errno;
      const std::string holder = file_text(fd);
      close(fd);
      const std::lock_guard<std::mutex> guard(held_mutex);
      held_paths.erase(path_);
      if (no_lock_support(code)) {
        log_line(dir + ": the file system keeps no locks (" + std::strerror(code) +
                 "); nothing keeps a second job out of this checkpoint directory");
        return;
      }
      fail(dir, ": another job trains into this checkpoint directory (",
           holder.empty() ? std::string("its lock file names no holder") : holder,
           "); wait for it to end or give this run another `checkpoint`");
    }
    const std::string previous = file_text(fd);
    if (!previous.empty())
      log_line(dir + ": the checkpoint lock of a job that ended (" + previous + ") is taken over");
    const std::string text = holder_text() + "\n";
    const bool wrote = ftruncate(fd, 0) == 0 && pwrite(fd, text.data(), text.size(), 0) == ssize_t(text.size());
    if (!wrote) log_line(dir + ": cannot record this job in the checkpoint lock (" + std::strerror(errno) + ")");
    fd_ = fd;
  });
}

CheckpointLock::~CheckpointLock() {
  if (fd_ < 0) return;
  // The holder's line goes with the lock: a file left naming a job reads as a job that died.
  [[maybe_unused]] const int cleared = ftruncate(fd_, 0);
  close(fd_);
  const std::lock_guard<std::mutex> guard(held_mutex);
  held_paths.erase(path_);
}

}  // namespace tessera
