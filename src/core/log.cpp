// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/log.hpp"

#include <cstdio>

#include "tessera/core/timer.hpp"

namespace tessera {
namespace {
int log_rank = 0;
}

void set_log_rank(int rank) {
  log_rank = rank;
}
bool is_log_rank() {
  return log_rank == 0;
}

void log_line(const std::string& line) {
  if (!is_log_rank()) return;
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

Progress::Progress(std::string what, int64_t total, double interval_seconds)
    : what_(std::move(what)),
      total_(total),
      interval_(interval_seconds),
      start_(wall_seconds()),
      last_(start_) {}

void Progress::advance(int64_t done_now) {
  set(done_ + done_now);
}

void Progress::set(int64_t done_total) {
  done_ = done_total;
  if (!is_log_rank()) return;
  const double now = wall_seconds();
  if (now - last_ < interval_) return;
  last_ = now;
  printed_ = true;
  const double percent = total_ > 0 ? 100.0 * double(done_) / double(total_) : 0.0;
  std::fprintf(stderr, "%s: %.0f%% (%.1f s)\n", what_.c_str(), percent, now - start_);
  std::fflush(stderr);
}

Progress::~Progress() {
  if (printed_ && is_log_rank()) {
    std::fprintf(stderr, "%s: done (%.1f s)\n", what_.c_str(), wall_seconds() - start_);
    std::fflush(stderr);
  }
}

}  // namespace tessera
