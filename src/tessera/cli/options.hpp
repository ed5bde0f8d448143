// SPDX-License-Identifier: BSD-3-Clause
// Every string the command line (and its TOML configuration) gives is parsed here, into the library's
// typed options; the library itself never parses a flag. Each parser throws Error naming the flag.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/grid_shape.hpp"
#include "tessera/comm/reduced_precision.hpp"
#include "tessera/comm/simulated_network.hpp"
#include "tessera/graph/partition.hpp"
#include "tessera/graph/permutation.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/models/predict.hpp"
#include "tessera/models/train.hpp"
#include "tessera/prefetch/controller.hpp"

namespace tessera::app {

/// A seed: decimal digits only, 0 to 2^63 - 1 (checkpoints and metrics store it as a signed 64-bit
/// integer); `flag` names the option in errors.
uint64_t parse_seed(const std::string& text, const std::string& flag = "--seed");
/// --seed on `cmd`, into `seed` through parse_seed (CLI11's own conversion of an unsigned integer wraps
/// "-1" and saturates past 2^64 - 1).
CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& description);

/// "XxYxZ" (d = 1) or "DxXxYxZ", every axis >= 1.
GridShape parse_grid(const std::string& text);
/// --mode minibatch --batch-size: a count ("1024") or a fraction of the nodes ("0.25"), into `options`.
void parse_minibatch_size(const std::string& text, MinibatchOptions& options);
/// --mode sampled --batch-size: a count of seeds per rank.
int64_t parse_seed_count(const std::string& text);
/// "4G", "512M", "1.5GiB", "1000000": bytes (K, M, G, T are powers of 1024); `flag` names the option in
/// errors.
int64_t parse_byte_size(const std::string& text, const std::string& flag);
/// "15,10,5": one fanout per layer, input layer first; -1 = every neighbour.
std::vector<int> parse_fanouts(const std::string& text);
/// --pos-weight "2.5" or "1,4,0.5": positive, finite weights separated by commas.
std::vector<float> parse_positive_weights(const std::string& text);
/// --metric: auto, accuracy, rocauc, ap, f1-micro or f1-macro.
MetricKind parse_metric(const std::string& name);
/// `--task`: auto, node or link.
TaskKind parse_task_kind(const std::string& name);
LinkDecoderKind parse_link_decoder(const std::string& name);
/// "LAT_US,GBPS" (empty: off).
SimulatedNetwork parse_network(const std::string& text);

/// full, minibatch or sampled.
TrainMode parse_mode(const std::string& name);
/// auto or refuse (--memory-policy).
MemoryPolicy parse_memory_policy(const std::string& name);
/// gcn or sage.
ModelKind parse_model_kind(const std::string& name);
/// none, batch or rms.
NormKind parse_norm(const std::string& name);
/// adam or adamw.
OptimizerKind parse_optimizer(const std::string& name);
/// constant, step or cosine.
ScheduleKind parse_schedule(const std::string& name);
/// --selection: accuracy or accuracy-and-loss.
Selection parse_selection(const std::string& name);
/// none, single or double.
PermuteMode parse_permute_mode(const std::string& name);
/// --feature-dtype: "f32" / "fp32" or "bf16".
StorageDtype parse_feature_dtype(const std::string& name);
StorageDtype parse_activation_dtype(const std::string& name);
/// f32 (fp32) or bf16.
CommDtype parse_comm_dtype(const std::string& name);
/// "f32" / "fp32" or "bf16".
GemmDtype parse_gemm_dtype(const std::string& name);
/// auto, blas or onednn.
HostGemmLibrary parse_host_gemm(const std::string& name);
/// auto, host, team or vendor.
KernelPath parse_kernel_path(const std::string& name);
/// "auto", "mpi", "mpi-host" or "nccl".
CommBackend parse_comm_backend(const std::string& name);
/// none, static, periodic, adaptive or external.
PrefetchPolicy parse_prefetch_policy(const std::string& name);
/// "auto", "host" or "device" (--sample-on).
SamplePlace parse_sample_place(const std::string& name);
/// "auto", "on" or "off" (--prefetch-thread).
StepThread parse_step_thread(const std::string& name);
/// metis or random.
PartitionMethod parse_partition_method(const std::string& name);
/// predict --parameters: auto, best or final.
CheckpointParameters parse_checkpoint_parameters(const std::string& name);
/// predict --engine: auto, full or layerwise.
InferenceEngine parse_inference_engine(const std::string& name);

}  // namespace tessera::app
