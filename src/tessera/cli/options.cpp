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
  const bool digits = !text.empty() && text.size() <= 19 && text.find_first_not_of("0123456789") == std::string::npos;
  const uint64_t value = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  require(digits && value <= kMax, flag, " must be a whole number from 0 to 2^63 - 1 (", kMax, "), not '", text,
          "'");
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

std::vector<int> parse_fanouts(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long value = std::strtol(item.c_str(), &end, 10);
    require(!item.empty() && *end == '\0' && (value >= 1 || value == -1) && value <= 1000000,
            "--fanouts: expected positive integers (or -1 for all neighbours) separated by commas, e.g. "
            "15,10,5; got '",
            text, "'");
    out.push_back(int(value));
    at = comma + 1;
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
// The value whose name is `name` among `values`, or an error listing the names.
template <class Enum, size_t N>
Enum by_name(const std::string& flag, const std::string& name,
             const std::pair<const char*, Enum> (&values)[N], const char* expected) {
  for (const auto& [text, value] : values)
    if (name == text) return value;
  fail(flag, " must be ", expected, ", not '", name, "'");
}
}  // namespace

TrainMode parse_mode(const std::string& name) {
  static const std::pair<const char*, TrainMode> v[] = {
      {"full", TrainMode::Full}, {"minibatch", TrainMode::Minibatch}, {"sampled", TrainMode::Sampled}};
  for (const auto& [text, value] : v)
    if (name == text) return value;
  fail("--mode: expected full, minibatch or sampled, got '", name, "'");
}

ModelKind parse_model_kind(const std::string& name) {
  static const std::pair<const char*, ModelKind> v[] = {{"gcn", ModelKind::Gcn}, {"sage", ModelKind::Sage}};
  return by_name("--model", name, v, "gcn or sage");
}

NormKind parse_norm(const std::string& name) {
  static const std::pair<const char*, NormKind> v[] = {
      {"none", NormKind::None}, {"batch", NormKind::Batch}, {"rms", NormKind::Rms}};
  return by_name("--norm", name, v, "none, batch or rms");
}

OptimizerKind parse_optimizer(const std::string& name) {
  static const std::pair<const char*, OptimizerKind> v[] = {{"adam", OptimizerKind::Adam},
                                                            {"adamw", OptimizerKind::AdamW}};
  return by_name("--optimizer", name, v, "adam or adamw");
}

ScheduleKind parse_schedule(const std::string& name) {
  static const std::pair<const char*, ScheduleKind> v[] = {
      {"constant", ScheduleKind::Constant}, {"step", ScheduleKind::Step}, {"cosine", ScheduleKind::Cosine}};
  return by_name("--lr-schedule", name, v, "constant, step or cosine");
}

PermuteMode parse_permute_mode(const std::string& name) {
  static const std::pair<const char*, PermuteMode> v[] = {
      {"none", PermuteMode::None}, {"single", PermuteMode::Single}, {"double", PermuteMode::Double}};
  return by_name("--permute", name, v, "none, single or double");
}

CommDtype parse_comm_dtype(const std::string& name) {
  if (name == "f32" || name == "fp32") return CommDtype::F32;
  if (name == "bf16") return CommDtype::Bf16;
  fail("--comm-dtype: expected f32 or bf16, got '", name, "'");
}

GemmDtype parse_gemm_dtype(const std::string& name) {
  if (name == "f32" || name == "fp32") return GemmDtype::F32;
  if (name == "bf16") return GemmDtype::Bf16;
  fail("--gemm-dtype: expected f32 or bf16, got '", name, "'");
}

HostGemmLibrary parse_host_gemm(const std::string& name) {
  static const std::pair<const char*, HostGemmLibrary> v[] = {
      {"auto", HostGemmLibrary::Auto}, {"blas", HostGemmLibrary::Blas}, {"onednn", HostGemmLibrary::OneDnn}};
  return by_name("--host-gemm", name, v, "auto, blas or onednn");
}

KernelPath parse_kernel_path(const std::string& name) {
  static const std::pair<const char*, KernelPath> v[] = {{"auto", KernelPath::Auto},
                                                         {"host", KernelPath::Host},
                                                         {"team", KernelPath::Team},
                                                         {"vendor", KernelPath::Vendor}};
  return by_name("--kernels", name, v, "auto, host, team or vendor");
}

CommBackend parse_comm_backend(const std::string& name) {
  static const std::pair<const char*, CommBackend> v[] = {{"auto", CommBackend::Auto},
                                                          {"mpi", CommBackend::Mpi},
                                                          {"mpi-host", CommBackend::MpiHost},
                                                          {"nccl", CommBackend::Nccl}};
  return by_name("--comm", name, v, "auto, mpi, mpi-host or nccl");
}

SamplePlace parse_sample_place(const std::string& name) {
  static const std::pair<const char*, SamplePlace> v[] = {
      {"auto", SamplePlace::Auto}, {"host", SamplePlace::Host}, {"device", SamplePlace::Device}};
  return by_name("--sample-on", name, v, "auto, host or device");
}

PrefetchPolicy parse_prefetch_policy(const std::string& name) {
  static const std::pair<const char*, PrefetchPolicy> v[] = {{"none", PrefetchPolicy::None},
                                                             {"static", PrefetchPolicy::Static},
                                                             {"periodic", PrefetchPolicy::Periodic},
                                                             {"adaptive", PrefetchPolicy::Adaptive},
                                                             {"external", PrefetchPolicy::External}};
  return by_name("--prefetch-policy", name, v, "none, static, periodic, adaptive or external");
}

PartitionMethod parse_partition_method(const std::string& name) {
  static const std::pair<const char*, PartitionMethod> v[] = {{"metis", PartitionMethod::Metis},
                                                              {"random", PartitionMethod::Random}};
  return by_name("--method", name, v, "metis or random");
}

CheckpointParameters parse_checkpoint_parameters(const std::string& name) {
  static const std::pair<const char*, CheckpointParameters> v[] = {{"auto", CheckpointParameters::Auto},
                                                                   {"best", CheckpointParameters::Best},
                                                                   {"final", CheckpointParameters::Final}};
  return by_name("--parameters", name, v, "auto, best or final");
}

InferenceEngine parse_inference_engine(const std::string& name) {
  static const std::pair<const char*, InferenceEngine> v[] = {{"auto", InferenceEngine::Auto},
                                                              {"full", InferenceEngine::Full},
                                                              {"layerwise", InferenceEngine::Layerwise}};
  return by_name("--engine", name, v, "auto, full or layerwise");
}

}  // namespace tessera::app
