// SPDX-License-Identifier: BSD-3-Clause
// What `tessera train` declares: the values CLI11 fills (Args) and every option with its help and group.
// Internal to the command line (train_command.cpp turns Args into TrainOptions).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "tessera/models/train.hpp"

namespace tessera::app {

// What CLI11 fills: strings where the library takes a type (parsed in to_options), the rest in place.
struct Args {
  TrainOptions o;
  std::string mode = "full", grid, model = "gcn", norm = "none", optimizer = "adam", permute = "double",
              lr_schedule = "constant";
  std::string comm_dtype = "f32", gemm_dtype = "f32", host_gemm = "auto", kernels = "auto", comm = "auto",
              batch_size, fanouts, prefetch_policy = "periodic", network, memory_per_rank, load_budget,
              memory_policy = "auto", eval = "sampled", final_eval = "exact", sample_on = "auto",
              selection = "accuracy", prefetch_thread = "auto", metric = "auto", positive_weight,
              task = "auto", link_decoder = "dot", feature_dtype = "f32", activation_dtype = "f32",
              cache_size;
  bool no_sampler_thread = false, no_fuse = false, no_prefetch_thread = false, print_config = false;
  float input_dropout = -1.0f;
  int64_t steps_per_epoch = 0;  // the mode's (MinibatchOptions / SampledOptions::steps_per_epoch)
};

/// Declares every option of `tessera train` but --data on `cmd`, filling `a`, in its help group.
void add_train_arguments(CLI::App* cmd, Args& a);

}  // namespace tessera::app
