// SPDX-License-Identifier: BSD-3-Clause
// The subcommands of the `tessera` program. Each registers its options on the CLI11 app and returns
// the function that runs it once parsing succeeded.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "tessera/comm/communicator.hpp"
#include "tessera/models/train.hpp"

namespace tessera::app {

using Command = std::function<int(const Communicator& world)>;

/// `tessera prep ogb|synth ...`
void add_prep_command(CLI::App& app, Command& selected);
/// `tessera train --data FILE ...`
void add_train_command(CLI::App& app, Command& selected);
/// What runs a parsed `tessera train`: given the validated options (their metrics header holding the
/// version and the effective configuration), returns the exit status.
using TrainRunner = std::function<int(const TrainOptions& options, const Communicator& world)>;
/// `tessera train` whose parsed options go to `run` (the bindings' entry; the program's runs the training).
void add_train_command(CLI::App& app, Command& selected, TrainRunner run);
/// `tessera bench spmm|gemm|stream`
void add_bench_command(CLI::App& app, Command& selected);
/// `tessera info FILE`
void add_info_command(CLI::App& app, Command& selected);

/// `tessera partition --data F --parts K --method metis|random`
void add_partition_command(CLI::App& app, Command& selected);

/// `tessera predict --checkpoint DIR --data F --output OUT.h5 ...`
void add_predict_command(CLI::App& app, Command& selected);

/// `tessera plan --data F --ranks G ...`
void add_plan_command(CLI::App& app, Command& selected);

/// `tessera data ...`, before MPI starts: runs the recorded Python interpreter on `-m tessera.data` with the
/// arguments after "data" (argv[2:]). Returns only when that cannot start.
int run_data_command(int argc, char** argv);

/// "1.2 GiB"-style text for a byte count.
std::string human_bytes(double bytes);
/// Rank 0 line: "peak memory per rank max X, all ranks Y".
std::string peak_memory_report(const Communicator& world);

}  // namespace tessera::app
