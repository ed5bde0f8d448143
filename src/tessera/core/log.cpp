// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/log.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "tessera/core/timer.hpp"

namespace tessera {
namespace {
int log_rank = 0;
bool progress_enabled = true;
MessageRenderer message_renderer = nullptr;

double progress_interval(double requested) {
  const char* env = std::getenv("TESSERA_PROGRESS_SECONDS");
  if (env == nullptr) return requested;
  char* end = nullptr;
  const double seconds = std::strtod(env, &end);
  return end != env && *end == '\0' && seconds >= 0 ? seconds : requested;
}

// 12, 3.4k, 5.6M: a rate at a glance.
std::string human_count(double count) {
  char text[32];
  if (count >= 1e9)
    std::snprintf(text, sizeof(text), "%.1fG", count / 1e9);
  else if (count >= 1e6)
    std::snprintf(text, sizeof(text), "%.1fM", count / 1e6);
  else if (count >= 1e3)
    std::snprintf(text, sizeof(text), "%.1fk", count / 1e3);
  else
    std::snprintf(text, sizeof(text), "%.0f", count);
  return text;
}

// 42 s, 3 min 05 s, 2 h 10 min.
std::string human_seconds(double seconds) {
  char text[48];
  const int64_t s = int64_t(seconds + 0.5);
  if (s < 60)
    std::snprintf(text, sizeof(text), "%lld s", (long long)s);
  else if (s < 3600)
    std::snprintf(text, sizeof(text), "%lld min %02lld s", (long long)(s / 60), (long long)(s % 60));
  else
    std::snprintf(text, sizeof(text), "%lld h %02lld min", (long long)(s / 3600), (long long)(s % 3600 / 60));
  return text;
}
}  // namespace

void set_progress_enabled(bool enabled) {
  progress_enabled = enabled;
}

void set_log_rank(int rank) {
  log_rank = rank;
}
bool is_log_rank() {
  return log_rank == 0;
}

MessageRenderer set_message_renderer(MessageRenderer renderer) {
  const MessageRenderer previous = message_renderer;
  message_renderer = renderer;
  return previous;
}

std::string render_message(const std::string& message) {
  return message_renderer != nullptr ? message_renderer(message) : message;
}

void log_line(const std::string& line) {
  if (!is_log_rank()) return;
  std::fprintf(stdout, "%s\n", render_message(line).c_str());
  std::fflush(stdout);
}

Progress::Progress(std::string what, int64_t total, double interval_seconds)
    : what_(std::move(what)),
      total_(total),
      interval_(progress_interval(interval_seconds)),
      start_(wall_seconds()),
      last_(start_),
      terminal_(isatty(fileno(stderr)) != 0) {}

void Progress::advance(int64_t done_now) {
  set(done_ + done_now);
}

std::string Progress::report(const std::string& what, int64_t done, int64_t total, double elapsed_seconds) {
  const double rate = elapsed_seconds > 0 ? double(done) / elapsed_seconds : 0.0;
  std::string line = what + ": " + std::to_string(done);
  if (total > 0) {
    char percent[32];
    std::snprintf(percent, sizeof(percent), " (%.0f%%)", 100.0 * double(done) / double(total));
    line += "/" + std::to_string(total) + percent;
  }
  line += ", " + human_count(rate) + "/s";
  if (total > 0 && rate > 0 && done <= total) line += ", ETA " + human_seconds(double(total - done) / rate);
  return line;
}

void Progress::set(int64_t done_total) {
  done_ = done_total;
  if (!is_log_rank() || !progress_enabled) return;
  const double now = wall_seconds();
  // A terminal is refreshed often once the operation is long; a file gets a line per interval.
  if (now - start_ < interval_ || now - last_ < (terminal_ ? 0.5 : interval_)) return;
  last_ = now;
  printed_ = true;
  const std::string line = report(what_, done_, total_, now - start_);
  if (terminal_)
    std::fprintf(stderr, "\r%s\033[K", line.c_str());
  else
    std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

Progress::~Progress() {
  if (printed_ && is_log_rank()) {
    std::fprintf(stderr, "%s%s: done, %s in %.1f s\n", terminal_ ? "\r\033[K" : "", what_.c_str(),
                 std::to_string(done_).c_str(), wall_seconds() - start_);
    std::fflush(stderr);
  }
}

}  // namespace tessera
