// SPDX-License-Identifier: BSD-3-Clause
// Where a run's device time goes, kernel by kernel: Kokkos' tool callbacks time every parallel_for,
// parallel_reduce and parallel_scan, every deep_copy, and every vendor call (cuBLAS, cuSPARSE, NCCL) that the
// library marks as a profile region, with events on the Kokkos stream on a device (the host is not stalled,
// so the step runs as it would unprofiled apart from the events' cost) and with the wall clock on a host
// (where every kernel is synchronous). What the table leaves of the measured step is time the device sat
// idle: launch latency, host work and waits between kernels. It also counts the memory allocated meanwhile
// (Kokkos Views and scratch): on a device each allocation is a call into the driver that waits for it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/timer.hpp"

namespace tessera {

/// One kernel's (or copy's, or vendor call's) totals.
struct KernelTime {
  std::string name;    ///< Kokkos label, "deep_copy ...", or the vendor call's region name
  int64_t calls = 0;   ///< how many ran
  double seconds = 0;  ///< device time (events) on a device, wall time on a host
  int64_t bytes = 0;   ///< what a deep_copy moved (0 for kernels)
};

/// Memory allocated while a profile lives: Kokkos Views and scratch, in every memory space.
struct AllocationTotals {
  int64_t count = 0;  ///< allocations made
  int64_t bytes = 0;  ///< their sizes, summed
};

/// Times what runs while it lives; one at a time per process.
class KernelProfile {
 public:
  /// Installs the callbacks; throws if another profile (or a Kokkos tool library) is active.
  KernelProfile();
  /// Removes them.
  ~KernelProfile();
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;

  /// Totals per name, largest first (waits for the device to finish what was timed).
  std::vector<KernelTime> totals();
  /// The allocations made since it started.
  AllocationTotals allocations() const;

  struct State;  ///< what the callbacks record (kernel_profile.cpp)

 private:
  std::unique_ptr<State> state_;
};

/// Runs fn and returns how to read its time later: the time between two events on the Kokkos stream on a
/// device (reading waits for the second), the wall clock's on a host (kernels there are synchronous).
std::function<double()> time_on_stream(const std::function<void()>& fn);

/// Runs fn and adds its time to `phase` of `timers`: on a device the time between two events on the Kokkos
/// stream, read when the timers' totals are next read (the host does not wait now), on a host the wall
/// clock (kernels there are synchronous).
void time_phase(PhaseTimers& timers, const std::string& phase, const std::function<void()>& fn);

/// A KernelProfile is active in this process (callers build region names only then).
bool kernel_profile_active();

/// Marks a vendor call (or any leaf region) for a KernelProfile; free when none is active.
class ProfileRegion {
 public:
  /// Opens region `name` when a profile is active (the name is read only then).
  explicit ProfileRegion(const char* name);
  ~ProfileRegion();
  ProfileRegion(const ProfileRegion&) = delete;
  ProfileRegion& operator=(const ProfileRegion&) = delete;

 private:
  bool active_;
};

/// Lines of a table: the `top` largest totals with milliseconds and calls per epoch, microseconds per
/// call and a copy's megabytes per epoch, then the sum over every name per epoch against `epoch_seconds`
/// (the measured epoch), the bytes each direction of host-device copies moved (on a device), and the
/// allocations per epoch.
std::vector<std::string> describe_kernel_profile(const std::vector<KernelTime>& totals,
                                                 const AllocationTotals& allocations, int64_t epochs,
                                                 double epoch_seconds, int top);

}  // namespace tessera
