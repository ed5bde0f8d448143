// SPDX-License-Identifier: BSD-3-Clause
// The `tessera` command: an MPI program whose every rank parses the same command line.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/huge_pages.hpp"
#include "tessera/core/runtime.hpp"
#include "usage.hpp"

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
std::vector<std::string> config_first(int argc, char** argv, std::string& config, bool& missing) {
  std::vector<std::string> args(argv, argv + argc);
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

int main(int argc, char** argv) {
  tessera::restart_with_huge_page_malloc(argv);
  // MPI_THREAD_MULTIPLE: --mode sampled's worker thread communicates. An MPI that provides less still runs
  // every other mode; the sampled source checks the level it got.
  return tessera::run_main(argc, argv, MPI_THREAD_MULTIPLE, [](int argc, char** argv) {
    const tessera::Communicator world = tessera::Communicator::world();
    // Read by the first chunked exchange, deep inside a run: a bad value is refused here, by every rank.
    std::string environment;
    try {
      (void)tessera::mpi_chunk_bytes();
    } catch (const std::exception& e) {
      environment = e.what();
    }
    world.check(environment.empty(), environment);
    CLI::App app("Tessera: distributed graph neural network training", "tessera");
    app.require_subcommand(1);
    app.set_version_flag("--version", tessera::app::version_text(),
                         "Print the version, Kokkos, MPI, HDF5 and vendor libraries");
    app.set_config("--config", "", "TOML file of `tessera train` options (see tessera train --help)")
        ->configurable(false);
    app.config_formatter(std::make_shared<TrainConfig>());
    app.allow_config_extras(CLI::config_extras_mode::error);
    tessera::app::Command selected;
    tessera::app::add_prep_command(app, selected);
    tessera::app::add_info_command(app, selected);
    tessera::app::add_train_command(app, selected);
    tessera::app::add_predict_command(app, selected);
    tessera::app::add_bench_command(app, selected);
    tessera::app::add_plan_command(app, selected);
    tessera::app::add_partition_command(app, selected);
    std::string config;
    bool config_missing = false;
    std::vector<std::string> args = config_first(argc, argv, config, config_missing);
    world.check(!config_missing, "--config needs a TOML file name (tessera train --config run.toml)");
    args.erase(args.begin());  // the program's name
    // A misspelt subcommand or option is named with its closest valid spelling before CLI11 parses.
    const std::string unknown = tessera::app::unknown_word_message(app, args);
    world.check(unknown.empty(), unknown);
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      // Every rank parsed the same arguments, so a usage error is collective.
      if (e.get_exit_code() == 0) {
        if (world.rank() == 0) app.exit(e);
        return 0;
      }
      const std::string what = e.what();
      const bool from_config = dynamic_cast<const CLI::ConfigError*>(&e) != nullptr ||
                               (!config.empty() && what.find(config) != std::string::npos);
      throw tessera::CollectiveError((from_config ? config_message(what, config) : what) +
                                     " (see tessera --help)");
    }
    return selected(world);
  });
}
