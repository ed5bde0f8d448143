// SPDX-License-Identifier: BSD-3-Clause
// Batch schedulers ask a job to stop with a signal: Slurm sends SIGTERM at the time limit or on scancel,
// and `--signal=USR1@SECONDS` sends SIGUSR1 that long ahead of the limit. While a StopSignalWatch exists,
// SIGTERM and SIGUSR1 only set a flag (the handler does nothing else, so it is async-signal-safe); the
// training loop reads the flag at each epoch end, agrees on it over every rank and checkpoints and stops.
#pragma once

namespace tessera {

/// Catches SIGTERM and SIGUSR1 for its lifetime and restores the previous handlers after.
class StopSignalWatch {
 public:
  /// Installs the handlers (a signal received earlier under another watch stays recorded).
  StopSignalWatch();
  ~StopSignalWatch();
  StopSignalWatch(const StopSignalWatch&) = delete;
  StopSignalWatch& operator=(const StopSignalWatch&) = delete;

  /// The signal received while a watch was installed (the latest one), or 0.
  static int received();
  /// Forgets a received signal (a program that trains twice, tests).
  static void clear();
};

/// "SIGTERM", "SIGUSR1", or "signal N".
const char* stop_signal_name(int signal);

}  // namespace tessera
