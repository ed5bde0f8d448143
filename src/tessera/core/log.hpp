// SPDX-License-Identifier: BSD-3-Clause
// Rank-0 logging and a progress indicator for long loads. Only the rank set by set_log_rank(0)
// prints; the others are silent, so a P-rank job prints each line once.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

/// The calling rank prints when `rank` is 0 (called by the runtime with the world rank).
void set_log_rank(int rank);
/// This rank prints log lines.
bool is_log_rank();

/// How errors and log lines are worded before they print. The library names options in backquotes
/// (`epochs`); the default prints them so, and a program sets its own (the `tessera` program prints
/// `epochs` as --epochs, the Python module as epochs).
using MessageRenderer = std::string (*)(const std::string& message);
/// Sets how messages are worded (null: as written); returns the renderer it replaces.
MessageRenderer set_message_renderer(MessageRenderer renderer);
/// `message` as the current renderer words it.
std::string render_message(const std::string& message);

/// Prints one line, as the message renderer words it, to stdout on rank 0.
void log_line(const std::string& line);

/// Progress reports on (false: none; `tessera train --quiet` turns them off). Default on.
void set_progress_enabled(bool enabled);

/// Reports progress of a long operation on stderr (rank 0 only), once it has run longer than
/// `interval_seconds` (short runs stay quiet): on a terminal one line rewritten in place about twice a
/// second; otherwise (a batch job's output file) a plain line every `interval_seconds`. Each report says
/// items done of the total, the rate and the time left at that rate. TESSERA_PROGRESS_SECONDS overrides
/// the interval (tests use a small one).
class Progress {
 public:
  /// Reports on `what`, `total` items.
  Progress(std::string what, int64_t total, double interval_seconds = 10.0);
  /// `done_now` more items are done.
  void advance(int64_t done_now);
  /// `done_total` items are done in all.
  void set(int64_t done_total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// One report: "WHAT: DONE/TOTAL (P%), RATE/s, ETA T" (what a report prints, without line control).
  static std::string report(const std::string& what, int64_t done, int64_t total, double elapsed_seconds);

 private:
  std::string what_;
  int64_t total_, done_ = 0;
  double interval_, start_, last_;
  bool terminal_ = false, printed_ = false;
};

}  // namespace tessera
