// SPDX-License-Identifier: BSD-3-Clause
#include "command_line.hpp"

#include <algorithm>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "usage.hpp"

namespace tessera::app {

namespace {

// A --config file holds `tessera train`'s options: keys outside a section belong to train ([train] works
// too). CLI11 reads configuration files at the top level, so the keys are filed under the subcommand.
class TrainConfig : public CLI::ConfigTOML {
 public:
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> items = CLI::ConfigTOML::from_config(input);
    for (CLI::ConfigItem& item : items)
      if (item.parents.empty() || item.parents.front() != "train")
        item.parents.insert(item.parents.begin(), "train");
    return items;
  }
};

// `tessera train --config F ...` becomes `tessera --config F train ...`: where CLI11 reads the file.
// `missing`: --config came without a file name (CLI11 would then read no file and train on the defaults).
std::vector<std::string> config_first(std::vector<std::string> args, std::string& config, bool& missing) {
  if (args.size() < 2 || args[1] != "train") return args;
  for (size_t k = 2; k < args.size(); ++k) {
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

// CLI11's words for configuration problems, with the file named.
std::string config_message(const std::string& what, const std::string& config) {
  const std::string unknown = "INI was not able to parse train.";
  if (what.rfind(unknown, 0) == 0) return config + ": unknown option '" + what.substr(unknown.size()) + "'";
  if (what.find("was not readable") != std::string::npos)
    return config + ": cannot read the configuration file";
  return config + ": " + what;
}

}  // namespace

std::unique_ptr<CLI::App> make_app() {
  auto app = std::make_unique<CLI::App>("Tessera: distributed graph neural network training", "tessera");
  app->require_subcommand(1);
  app->set_version_flag("--version", version_text(),
                        "Print the version, Kokkos, MPI, HDF5 and vendor libraries");
  app->set_config("--config", "", "TOML file of `tessera train` options (see tessera train --help)")
      ->configurable(false);
  app->config_formatter(std::make_shared<TrainConfig>());
  app->allow_config_extras(CLI::config_extras_mode::error);
  return app;
}

bool parse_command_line(CLI::App& app, std::vector<std::string> given, const Communicator& world) {
  std::string config;
  bool config_missing = false;
  std::vector<std::string> args = config_first(std::move(given), config, config_missing);
  world.check(!config_missing, "--config needs a TOML file name (tessera train --config run.toml)");
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
    throw CollectiveError((from_config ? config_message(what, config) : what) + " (see tessera --help)");
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
