// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/cli/command_line.hpp"

#include <unistd.h>

#include <algorithm>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/config_file.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/error.hpp"
#include "tessera/cli/usage.hpp"

namespace tessera::app {

namespace {

// `tessera SUB --config F ...` becomes `tessera --config F SUB ...`: where CLI11 reads the file.
// `missing`: --config came without a file name (CLI11 would then read no file and use the defaults).
std::vector<std::string> config_first(std::vector<std::string> args, std::string& config, bool& missing) {
  for (size_t k = 1; k < args.size(); ++k) {
    const bool joined = args[k].rfind("--config=", 0) == 0;
    if (args[k] != "--config" && !joined) continue;
    config = joined ? args[k].substr(9) : (k + 1 < args.size() ? args[k + 1] : "");
    missing = config.empty() || config.rfind("--", 0) == 0;
    args.erase(args.begin() + long(k), args.begin() + long(joined || k + 1 == args.size() ? k + 1 : k + 2));
    args.insert(args.begin() + 1, {"--config", config});
    break;
  }
  return args;
}

// The subcommands the arguments select, outermost first ({"prep", "ogb"}): the options a --config file
// gives.
std::vector<std::string> subcommand_chain(const CLI::App& app, const std::vector<std::string>& args) {
  std::vector<std::string> chain;
  const CLI::App* at = &app;
  for (size_t k = 1; k < args.size(); ++k) {
    const CLI::App* sub = find_subcommand(at, args[k]);
    if (sub == nullptr) continue;
    chain.push_back(args[k]);
    at = sub;
  }
  return chain;
}

// CLI11's words for configuration problems, with the file named.
std::string config_message(const std::string& what, const std::string& config) {
  const std::string unknown = "INI was not able to parse train.";
  if (what.rfind(unknown, 0) == 0) return config + ": unknown option '" + what.substr(unknown.size()) + "'";
  if (what.find("was not readable") != std::string::npos)
    return config + ": cannot read the configuration file";
  return config + ": " + what;
}

}  // namespace

std::string with_flags(const std::string& message) {
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t open = message.find('`', at);
    const size_t close = open == std::string::npos ? open : message.find('`', open + 1);
    if (close == std::string::npos) break;
    const std::string name = message.substr(open + 1, close - open - 1);
    const bool option =
        !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
    out += message.substr(at, open - at) + (option ? "--" + name : message.substr(open, close - open + 1));
    at = close + 1;
  }
  return out + message.substr(at);
}

std::unique_ptr<CLI::App> make_app() {
  auto app = std::make_unique<CLI::App>("Tessera: distributed graph neural network training", "tessera");
  app->require_subcommand(1);
  app->set_version_flag("--version", version_text(),
                        "Print the version, Kokkos, MPI, HDF5 and vendor libraries");
  app->set_config("--config", "", "TOML file of the subcommand's options (tessera train --print-config writes one)")
      ->configurable(false);
  app->config_formatter(std::make_shared<TomlConfig>());
  app->allow_config_extras(CLI::config_extras_mode::error);
  // Listed for --help: `tessera data` runs before the parser (main.cpp, run_data_command).
  app->add_subcommand("data", "Benchmark datasets by name: tessera data list, tessera data get cora (downloads "
                              "and converts; see tessera data --help)")
      ->allow_extras();
  return app;
}

std::string config_origin(const CLI::App& app, const std::string& message) {
  const auto formatter = std::dynamic_pointer_cast<TomlConfig>(app.get_config_formatter_base());
  return formatter ? formatter->origin_of(message) : std::string();
}

bool parse_command_line(CLI::App& app, std::vector<std::string> given, const Communicator& world) {
  std::string config;
  bool config_missing = false;
  std::vector<std::string> args = config_first(std::move(given), config, config_missing);
  world.check(!config_missing, "--config needs a TOML file name (tessera train --config run.toml)");
  if (!config.empty()) {
    const std::vector<std::string> chain = subcommand_chain(app, args);
    world.check(!chain.empty(), config + ": --config gives a subcommand's options: name the subcommand "
                                         "(tessera train --config " + config + ")");
    std::set<std::string> given_flags;
    for (const std::string& arg : args)
      if (arg.rfind("--", 0) == 0) given_flags.insert(arg.substr(0, arg.find('=')));
    std::dynamic_pointer_cast<TomlConfig>(app.get_config_formatter_base())->select(&app, chain, config, given_flags);
    world.run_on(0, [&] {
      require_os(access(config.c_str(), R_OK) == 0, config, ": cannot read the configuration file");
      const std::string kind = file_kind(config);
      require(kind == "a regular file", config, ": --config names ", kind, ", not a regular file");
    });
  }
  args.erase(args.begin());  // the program's name
  // A misspelt subcommand or option is named with its closest valid spelling before CLI11 parses.
  const std::string unknown = unknown_word_message(app, args);
  world.check(unknown.empty(), unknown);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // Every rank parsed the same arguments, so a usage error is collective.
    if (e.get_exit_code() == 0) {
      if (world.rank() == 0) app.exit(e);
      return false;
    }
    const std::string what = e.what();
    const bool from_config = dynamic_cast<const CLI::ConfigError*>(&e) != nullptr ||
                             (!config.empty() && what.find(config) != std::string::npos);
    if (from_config) throw CollectiveError(config_message(what, config) + " (see tessera --help)");
    // "Could not convert: --seed = abc": the value may have come from the file.
    const size_t flag = what.find("--");
    const std::string origin = config.empty() || flag == std::string::npos ? "" : config_origin(app, what.substr(flag));
    throw CollectiveError(origin + what + " (see tessera --help)");
  }
  return true;
}

std::optional<TrainOptions> parse_train_arguments(const std::vector<std::string>& args,
                                                  const Communicator& world) {
  const std::unique_ptr<CLI::App> app = make_app();
  Command selected;
  std::optional<TrainOptions> parsed;
  add_train_command(*app, selected, [&parsed](const TrainOptions& options, const Communicator&) {
    parsed = options;
    return 0;
  });
  std::vector<std::string> line{"tessera", "train"};
  line.insert(line.end(), args.begin(), args.end());
  if (parse_command_line(*app, line, world)) selected(world);
  return parsed;
}

}  // namespace tessera::app
