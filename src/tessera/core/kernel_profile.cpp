// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/core/kernel_profile.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <unordered_map>

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/core/views.hpp"

namespace tessera {

namespace {

// A point in the run: an event on the Kokkos stream on a device, the wall clock on a host.
#if defined(KOKKOS_ENABLE_CUDA)
using Mark = cudaEvent_t;
constexpr bool kDeviceTimes = true;
Mark new_mark() {
  cudaEvent_t e;
  require(cudaEventCreate(&e) == cudaSuccess, "kernel profile: cudaEventCreate failed");
  return e;
}
void record(Mark& m) {
  cudaEventRecord(m, ExecSpace().cuda_stream());
}
double seconds_between(Mark& a, Mark& b) {
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return 1e-3 * ms;
}
void free_mark(Mark m) {
  cudaEventDestroy(m);
}
#elif defined(KOKKOS_ENABLE_HIP)
using Mark = hipEvent_t;
constexpr bool kDeviceTimes = true;
Mark new_mark() {
  hipEvent_t e;
  require(hipEventCreate(&e) == hipSuccess, "kernel profile: hipEventCreate failed");
  return e;
}
void record(Mark& m) {
  (void)hipEventRecord(m, ExecSpace().hip_stream());
}
double seconds_between(Mark& a, Mark& b) {
  (void)hipEventSynchronize(b);
  float ms = 0;
  (void)hipEventElapsedTime(&ms, a, b);
  return 1e-3 * ms;
}
void free_mark(Mark m) {
  (void)hipEventDestroy(m);
}
#else
using Mark = double;
constexpr bool kDeviceTimes = false;
Mark new_mark() {
  return 0.0;
}
void record(Mark& m) {
  m = wall_seconds();
}
double seconds_between(Mark& a, Mark& b) {
  return b - a;
}
void free_mark(Mark) {}
#endif

// Intervals finished but not yet read: reading an event waits for it, so they are read in batches.
constexpr size_t kResolveBatch = 4096;

}  // namespace

// A named namespace, not the anonymous one: KernelProfile::State, which the header declares, holds these.
namespace kernel_profile_detail {
struct Interval {
  int name = -1;
  Mark begin{}, end{};
};
}  // namespace kernel_profile_detail

struct KernelProfile::State {
  using Interval = kernel_profile_detail::Interval;

  std::vector<KernelTime> totals;  // by name id
  std::unordered_map<std::string, int> ids;
  std::unordered_map<uint64_t, Interval> open;
  uint64_t next_id = 0;
  std::vector<uint64_t> regions;  // open region ids, innermost last
  std::vector<Interval> finished;
  std::vector<Mark> spare;
  // Counted from any thread (a worker thread may allocate while kernels run on the main one).
  std::atomic<int64_t> allocations{0}, allocated_bytes{0};

  Mark take() {
    if (spare.empty()) return new_mark();
    Mark m = spare.back();
    spare.pop_back();
    return m;
  }
  uint64_t begin(const std::string& name, int64_t bytes = 0) {
    auto [it, added] = ids.emplace(name, int(totals.size()));
    if (added) totals.push_back({name, 0, 0.0, 0});
    totals[size_t(it->second)].bytes += bytes;
    Interval in{it->second, take(), take()};
    record(in.begin);
    open.emplace(next_id, in);
    return next_id++;
  }
  void end(uint64_t id) {
    auto it = open.find(id);
    if (it == open.end()) return;
    record(it->second.end);
    finished.push_back(it->second);
    open.erase(it);
    if (finished.size() >= kResolveBatch) resolve();
  }
  void resolve() {
    for (Interval& in : finished) {
      KernelTime& t = totals[size_t(in.name)];
      t.calls += 1;
      t.seconds += seconds_between(in.begin, in.end);
      spare.push_back(in.begin);
      spare.push_back(in.end);
    }
    finished.clear();
  }
  ~State() {
    for (Interval& in : finished) spare.push_back(in.begin), spare.push_back(in.end);
    for (auto& [id, in] : open) spare.push_back(in.begin), spare.push_back(in.end);
    for (Mark m : spare) free_mark(m);
  }
};

namespace {

KernelProfile::State* active = nullptr;

void begin_kernel(const char* name, uint32_t, uint64_t* id) {
  *id = active->begin(name);
}
void end_kernel(uint64_t id) {
  active->end(id);
}
void push_region(const char* name) {
  active->regions.push_back(active->begin(name));
}
void pop_region() {
  if (active->regions.empty()) return;
  active->end(active->regions.back());
  active->regions.pop_back();
}

// The allocation hook that was set before the profile (the huge-page advice's): called on, and put back.
Kokkos_Profiling_allocateDataFunction allocation_chained = nullptr;

void count_allocation(Kokkos::Tools::SpaceHandle space, const char* label, const void* ptr, uint64_t bytes) {
  if (KernelProfile::State* profile = active) {  // a hook set on top of this one may outlive the profile
    profile->allocations.fetch_add(1, std::memory_order_relaxed);
    profile->allocated_bytes.fetch_add(int64_t(bytes), std::memory_order_relaxed);
  }
  if (allocation_chained != nullptr) allocation_chained(space, label, ptr, bytes);
}

uint64_t copy_id = 0;
void begin_copy(Kokkos::Tools::SpaceHandle dst, const char*, const void*, Kokkos::Tools::SpaceHandle src,
                const char*, const void*, uint64_t bytes) {
  copy_id = active->begin(std::string("deep_copy ") + src.name + " -> " + dst.name, int64_t(bytes));
}
void end_copy() {
  active->end(copy_id);
}

void set_callbacks(bool on) {
  namespace tools = Kokkos::Tools::Experimental;
  tools::set_begin_parallel_for_callback(on ? begin_kernel : nullptr);
  tools::set_end_parallel_for_callback(on ? end_kernel : nullptr);
  tools::set_begin_parallel_reduce_callback(on ? begin_kernel : nullptr);
  tools::set_end_parallel_reduce_callback(on ? end_kernel : nullptr);
  tools::set_begin_parallel_scan_callback(on ? begin_kernel : nullptr);
  tools::set_end_parallel_scan_callback(on ? end_kernel : nullptr);
  tools::set_push_region_callback(on ? push_region : nullptr);
  tools::set_pop_region_callback(on ? pop_region : nullptr);
  tools::set_begin_deep_copy_callback(on ? begin_copy : nullptr);
  tools::set_end_deep_copy_callback(on ? end_copy : nullptr);
  if (on) {
    allocation_chained = tools::get_callbacks().allocate_data;
    tools::set_allocate_data_callback(count_allocation);
  } else if (tools::get_callbacks().allocate_data == count_allocation) {
    tools::set_allocate_data_callback(allocation_chained);
  }
}

}  // namespace

KernelProfile::KernelProfile() : state_(std::make_unique<State>()) {
  require(active == nullptr && Kokkos::Tools::Experimental::get_callbacks().begin_parallel_for == nullptr,
          "kernel profile: another profile or a Kokkos tool library is already active");
  Kokkos::fence();  // what ran before is not counted
  active = state_.get();
  set_callbacks(true);
}

KernelProfile::~KernelProfile() {
  set_callbacks(false);
  active = nullptr;
  Kokkos::fence();
}

AllocationTotals KernelProfile::allocations() const {
  return AllocationTotals{state_->allocations.load(), state_->allocated_bytes.load()};
}

std::vector<KernelTime> KernelProfile::totals() {
  Kokkos::fence();
  state_->resolve();
  std::vector<KernelTime> out;
  for (const KernelTime& t : state_->totals)
    if (t.calls > 0) out.push_back(t);
  std::sort(out.begin(), out.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.seconds > b.seconds; });
  return out;
}

std::function<double()> time_on_stream(const std::function<void()>& fn) {
  if (!kDeviceTimes) {
    Stopwatch watch;
    fn();
    const double seconds = watch.seconds();
    return [seconds] { return seconds; };
  }
  // Owned by the reading: the events live until it is dropped.
  struct Marks {
    Mark begin = new_mark(), end = new_mark();
    Marks() = default;
    Marks(const Marks&) = delete;
    Marks& operator=(const Marks&) = delete;
    ~Marks() { free_mark(begin), free_mark(end); }
  };
  const auto marks = std::make_shared<Marks>();
  record(marks->begin);
  fn();
  record(marks->end);
  return [marks] { return seconds_between(marks->begin, marks->end); };
}

void time_phase(PhaseTimers& timers, const std::string& phase, const std::function<void()>& fn) {
  timers.add_deferred(phase, time_on_stream(fn));
}

bool kernel_profile_active() {
  return active != nullptr;
}

ProfileRegion::ProfileRegion(const char* name) : active_(active != nullptr) {
  if (active_) Kokkos::Profiling::pushRegion(name);
}

ProfileRegion::~ProfileRegion() {
  if (active_) Kokkos::Profiling::popRegion();
}

std::vector<std::string> describe_kernel_profile(const std::vector<KernelTime>& totals,
                                                 const AllocationTotals& allocations, int64_t epochs,
                                                 double epoch_seconds, int top) {
  const double per = 1.0 / double(std::max<int64_t>(epochs, 1));
  std::vector<std::string> lines;
  char text[256];
  std::snprintf(text, sizeof(text),
                "kernel profile, rank 0 (%s time per epoch, mean of %lld): ms  calls  us/call  [MB]  name",
                kDeviceTimes ? "device" : "wall", static_cast<long long>(epochs));
  lines.push_back(text);
  double sum = 0, copied_in = 0, copied_out = 0;
  for (size_t k = 0; k < totals.size(); ++k) {
    const KernelTime& t = totals[k];
    sum += t.seconds;
    // Kokkos names a space by its class: "Host" for host memory, "Cuda" / "HIP" for the device's.
    if (t.bytes > 0 && t.name.rfind("deep_copy Host -> ", 0) == 0 && t.name != "deep_copy Host -> Host")
      copied_in += double(t.bytes);
    if (t.bytes > 0 && t.name.size() > 8 && t.name.compare(t.name.size() - 8, 8, " -> Host") == 0 &&
        t.name != "deep_copy Host -> Host")
      copied_out += double(t.bytes);
    if (int(k) >= top) continue;
    int at = std::snprintf(text, sizeof(text), "  %8.3f %6.1f %8.1f  ", 1e3 * t.seconds * per,
                           double(t.calls) * per, 1e6 * t.seconds / double(t.calls));
    if (t.bytes > 0)
      at += std::snprintf(text + at, sizeof(text) - size_t(at), "[%.2f MB] ", 1e-6 * double(t.bytes) * per);
    std::snprintf(text + at, sizeof(text) - size_t(at), "%.90s", t.name.c_str());
    lines.push_back(text);
  }
  std::snprintf(
      text, sizeof(text),
      "  %8.3f ms per epoch in %zu kernels, copies and vendor calls; measured epoch %.3f ms: %.3f ms "
      "outside them (launch latency, host work, waits)",
      1e3 * sum * per, totals.size(), 1e3 * epoch_seconds, 1e3 * (epoch_seconds - sum * per));
  lines.push_back(text);
  if (kDeviceTimes) {
    std::snprintf(text, sizeof(text), "  host -> device copies %.2f MB per epoch, device -> host %.2f MB",
                  1e-6 * copied_in * per, 1e-6 * copied_out * per);
    lines.push_back(text);
  }
  std::snprintf(text, sizeof(text),
                "  allocations %.1f per epoch, %.2f MB (Kokkos Views and scratch, every memory space)",
                double(allocations.count) * per, 1e-6 * double(allocations.bytes) * per);
  lines.push_back(text);
  return lines;
}

}  // namespace tessera
