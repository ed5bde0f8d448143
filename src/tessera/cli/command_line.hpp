// SPDX-License-Identifier: BSD-3-Clause
// The `tessera` command line as every rank parses it: a --config TOML file's keys filed under `train`,
// a misspelt subcommand or option named with its closest spelling, CLI11's errors as one collective line.
// The Python bindings parse `tessera.train`'s options through the same code, so both refuse alike.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/models/train.hpp"

namespace tessera::app {

/// A library message in the program's words: every option the library names in backquotes (`epochs`,
/// `clip-grad-norm`) becomes its flag (--epochs, --clip-grad-norm). The program and the bindings' command-line
/// entry use it.
std::string with_flags(const std::string& message);

/// The program's app: its description, --version and --config (subcommands are added by the caller).
std::unique_ptr<CLI::App> make_app();

/// Collective: parses `args` (the program's name first) into `app` alike on every rank. Returns false when
/// the arguments asked for --help or --version (printed by rank 0: the program exits 0); throws
/// CollectiveError with one line naming the option or the --config file otherwise.
bool parse_command_line(CLI::App& app, std::vector<std::string> args, const Communicator& world);

/// "FILE: line N: " when `message` (starting with "--NAME") is about an option whose value came from the
/// --config file `app` read, else "".
std::string config_origin(const CLI::App& app, const std::string& message);

/// Collective: `tessera train ARGS...` (ARGS without "train"; a --config file among them) parsed and
/// checked as the program does it: the options that run would train with, or nullopt where ARGS asked for
/// --help or --print-config (printed by rank 0). Throws CollectiveError on every rank with the first problem.
std::optional<TrainOptions> parse_train_arguments(const std::vector<std::string>& args,
                                                  const Communicator& world);

}  // namespace tessera::app
