// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/cli/options.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "tessera/core/error.hpp"

namespace tessera::app {

uint64_t parse_seed(const std::string& text, const std::string& flag) {
  constexpr uint64_t kMax = (uint64_t(1) << 63) - 1;
  const bool digits =
      !text.empty() && text.size() <= 19 && text.find_first_not_of("0123456789") == std::string::npos;
  const uint64_t value = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  require(digits && value <= kMax, flag, " must be a whole number from 0 to 2^63 - 1 (", kMax, "), not '",
          text, "'");
  return value;
}

CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& description) {
  return cmd
      ->add_option_function<std::string>(
          "--seed",
          [&seed](const std::string& text) {
            try {
              seed = parse_seed(text);
            } catch (const Error& e) {
              throw CLI::ValidationError(e.what());
            }
          },
          description + " (0 to 2^63 - 1)")
      ->default_str(std::to_string(seed));
}

GridShape parse_grid(const std::string& text) {
  std::vector<int> parts;
  std::string part;
  require(!text.empty() && text.back() != 'x', "grid '", text,
          "': expected XxYxZ or DxXxYxZ with a number after every 'x', e.g. 2x2x2");
  std::istringstream in(text);
  while (std::getline(in, part, 'x')) {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(!part.empty() && used == part.size(), "grid '", text, "': '", part,
            "' is not a number (expected XxYxZ or DxXxYxZ, e.g. 2x2x2)");
    require(value > 0, "grid '", text, "': every axis must be at least 1");
    parts.push_back(value);
  }
  require(parts.size() == 3 || parts.size() == 4, "grid '", text,
          "': expected 3 axes (XxYxZ) or 4 (DxXxYxZ), got ", parts.size());
  GridShape s;
  if (parts.size() == 4) s.d = parts[0];
  const size_t o = parts.size() - 3;
  s.x = parts[o];
  s.y = parts[o + 1];
  s.z = parts[o + 2];
  return s;
}

void parse_minibatch_size(const std::string& text, MinibatchOptions& options) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  require(!text.empty() && end && *end == '\0' && std::isfinite(value) && value > 0,
          "--batch-size: expected a count or a fraction of the nodes, got '", text, "'");
  if (text.find_first_of(".eE") != std::string::npos) {
    require(value <= 1.0, "--batch-size: a fraction must be at most 1, got ", text);
    options.batch_size = 0;
    options.batch_fraction = value;
  } else {
    require(value <= double(int64_t(1) << 30), "--batch-size: at most 2^30 vertices, not ", text);
    options.batch_size = int64_t(value);
    options.batch_fraction = 0;
  }
}

int64_t parse_seed_count(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long b = std::strtoll(text.c_str(), &end, 10);
  require(!text.empty() && *end == '\0' && b >= 1 && errno != ERANGE && b <= (1ll << 30),
          "--batch-size: --mode sampled takes a count of seeds per rank from 1 to 2^30, not '", text, "'");
  return b;
}

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  std::string unit(end);
  for (char& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() == 3 && unit.substr(1) == "IB") unit.resize(1);
  if (unit.size() == 2 && unit[1] == 'B') unit.resize(1);
  const std::string units = "KMGT";
  const size_t power = unit.empty() ? 0 : units.find(unit[0]) + 1;
  require(end != text.c_str() && std::isfinite(number) && number >= 0 && unit.size() <= 1 &&
              (unit.empty() || power > 0),
          flag, ": expected a size such as 4G, 512M or 1000000 (bytes), not '", text, "'");
  const double bytes = number * std::pow(1024.0, double(power));
  require(bytes < 9e18, flag, ": '", text, "' is too large");
  return int64_t(bytes);
}

namespace {
// "a,b,,c" -> {"a", "b", "", "c"}: every item between commas, empty ones too (the parsers refuse them).
std::vector<std::string> comma_separated(const std::string& text) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    items.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}
}  // namespace

std::vector<int> parse_fanouts(const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : comma_separated(text)) {
    char* end = nullptr;
    const long value = std::strtol(item.c_str(), &end, 10);
    require(!item.empty() && *end == '\0' && (value >= 1 || value == -1) && value <= 1000000,
            "--fanouts: expected positive integers (or -1 for all neighbours) separated by commas, e.g. "
            "15,10,5; got '",
            text, "'");
    out.push_back(int(value));
  }
  return out;
}

std::vector<float> parse_positive_weights(const std::string& text) {
  std::vector<float> out;
  for (const std::string& item : comma_separated(text)) {
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    require(!item.empty() && *end == '\0' && std::isfinite(value) && value > 0 && value < 1e30,
            "--pos-weight: expected positive numbers separated by commas (one for every task, or one per "
            "task), got '",
            text, "'");
    out.push_back(float(value));
  }
  return out;
}

SimulatedNetwork parse_network(const std::string& text) {
  SimulatedNetwork n;
  if (text.empty()) return n;
  const size_t comma = text.find(',');
  char* end = nullptr;
  bool ok = comma != std::string::npos;
  double lat_us = 0, gbps = 0;
  if (ok) {
    const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
    lat_us = std::strtod(a.c_str(), &end);
    ok = !a.empty() && *end == '\0';
    gbps = std::strtod(b.c_str(), &end);
    ok = ok && !b.empty() && *end == '\0';
  }
  require(
      ok && std::isfinite(lat_us) && std::isfinite(gbps) && lat_us >= 0 && gbps > 0,
      "--simulate-network: expected LAT_US,GBPS (microseconds, gigabytes per second > 0), e.g. 2,25; got '",
      text, "'");
  n.latency_s = lat_us * 1e-6;
  n.bytes_per_s = gbps * 1e9;
  return n;
}

namespace {
// The value `name` names in `table`, or Error "FLAG must be a, b or c, not 'name'".
template <class E, size_t N>
E by_name(const std::string& flag, const std::string& name, const EnumName<E> (&table)[N]) {
  if (const std::optional<E> value = value_named(table, name)) return *value;
  fail(flag, " must be ", choices_of(table), ", not '", name, "'");
}

// The same with the message "FLAG: expected a, b or c, got 'name'".
template <class E, size_t N>
E expected(const std::string& flag, const std::string& name, const EnumName<E> (&table)[N]) {
  if (const std::optional<E> value = value_named(table, name)) return *value;
  fail(flag, ": expected ", choices_of(table), ", got '", name, "'");
}
}  // namespace

TrainMode parse_mode(const std::string& name) {
  return expected("--mode", name, kTrainModeNames);
}
MemoryPolicy parse_memory_policy(const std::string& name) {
  return by_name("--memory-policy", name, kMemoryPolicyNames);
}
ModelKind parse_model_kind(const std::string& name) {
  return by_name("--model", name, kModelKindNames);
}
NormKind parse_norm(const std::string& name) {
  return by_name("--norm", name, kNormKindNames);
}
OptimizerKind parse_optimizer(const std::string& name) {
  return by_name("--optimizer", name, kOptimizerKindNames);
}
ScheduleKind parse_schedule(const std::string& name) {
  return by_name("--lr-schedule", name, kScheduleKindNames);
}
TaskKind parse_task_kind(const std::string& name) {
  return by_name("--task", name, kTaskKindNames);
}

LinkDecoderKind parse_link_decoder(const std::string& name) {
  return by_name("--link-decoder", name, kLinkDecoderKindNames);
}

MetricKind parse_metric(const std::string& name) {
  return by_name("--metric", name, kMetricKindNames);
}
Selection parse_selection(const std::string& name) {
  return by_name("--selection", name, kSelectionNames);
}
PermuteMode parse_permute_mode(const std::string& name) {
  return by_name("--permute", name, kPermuteModeNames);
}
CommDtype parse_comm_dtype(const std::string& name) {
  return expected("--comm-dtype", name, kCommDtypeNames);
}
StorageDtype parse_feature_dtype(const std::string& name) {
  return expected("--feature-dtype", name, kStorageDtypeNames);
}
StorageDtype parse_activation_dtype(const std::string& name) {
  return expected("--activation-dtype", name, kStorageDtypeNames);
}
GemmDtype parse_gemm_dtype(const std::string& name) {
  return expected("--gemm-dtype", name, kGemmDtypeNames);
}
HostGemmLibrary parse_host_gemm(const std::string& name) {
  return by_name("--host-gemm", name, kHostGemmLibraryNames);
}
KernelPath parse_kernel_path(const std::string& name) {
  return by_name("--kernels", name, kKernelPathNames);
}
CommBackend parse_comm_backend(const std::string& name) {
  return by_name("--comm", name, kCommBackendNames);
}
SamplePlace parse_sample_place(const std::string& name) {
  return by_name("--sample-on", name, kSamplePlaceNames);
}
StepThread parse_step_thread(const std::string& name) {
  return by_name("--prefetch-thread", name, kStepThreadNames);
}
PrefetchPolicy parse_prefetch_policy(const std::string& name) {
  return by_name("--prefetch-policy", name, kPrefetchPolicyNames);
}
PartitionMethod parse_partition_method(const std::string& name) {
  return by_name("--method", name, kPartitionMethodNames);
}
CheckpointParameters parse_checkpoint_parameters(const std::string& name) {
  return by_name("--parameters", name, kCheckpointParametersNames);
}
InferenceEngine parse_inference_engine(const std::string& name) {
  return by_name("--engine", name, kInferenceEngineNames);
}

}  // namespace tessera::app
