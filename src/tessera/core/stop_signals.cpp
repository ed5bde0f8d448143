// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/stop_signals.hpp"

#include <csignal>
#include <cstdio>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {

volatile std::sig_atomic_t g_received = 0;

extern "C" void record_stop_signal(int signal) {
  g_received = signal;
}

struct SavedHandlers {
  struct sigaction term {};
  struct sigaction usr1 {};
};
// One set per live watch, innermost last (watches nest in stack order).
SavedHandlers g_saved[8];
int g_depth = 0;

}  // namespace

StopSignalWatch::StopSignalWatch() {
  require(g_depth < 8, "StopSignalWatch: more than 8 nested watches");
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // an interrupted read or MPI progress call resumes instead of failing
  sigaction(SIGTERM, &action, &g_saved[g_depth].term);
  sigaction(SIGUSR1, &action, &g_saved[g_depth].usr1);
  ++g_depth;
}

StopSignalWatch::~StopSignalWatch() {
  --g_depth;
  sigaction(SIGTERM, &g_saved[g_depth].term, nullptr);
  sigaction(SIGUSR1, &g_saved[g_depth].usr1, nullptr);
}

int StopSignalWatch::received() {
  return int(g_received);
}

void StopSignalWatch::clear() {
  g_received = 0;
}

const char* stop_signal_name(int signal) {
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGUSR1) return "SIGUSR1";
  static thread_local char text[32];
  std::snprintf(text, sizeof(text), "signal %d", signal);
  return text;
}

}  // namespace tessera
