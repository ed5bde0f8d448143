// SPDX-License-Identifier: BSD-3-Clause
// `tessera train`: the command line (and a TOML file, `--config`) into TrainOptions, then run_training.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "tessera/cli/command_line.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/options.hpp"
#include "tessera/cli/train_arguments.hpp"
#include "tessera/cli/usage.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/stop_signals.hpp"
#include "tessera/models/train.hpp"
#include "tessera/models/training/hooks.hpp"

namespace tessera::app {

namespace {

// Options that only one mode reads: given to another, they are refused, naming the mode they belong to.
struct ModeOnly {
  const char* name;
  bool full, minibatch, sampled;
};
constexpr ModeOnly kModeOnly[] = {{"--batch-size", false, true, true},
                                  {"--steps-per-epoch", false, true, true},
                                  {"--no-sampler-thread", false, true, false},
                                  {"--sample-on", false, true, true},
                                  {"--partition", false, false, true},
                                  {"--partition-file", false, false, true},
                                  {"--fanouts", false, false, true},
                                  {"--prefetch-policy", false, false, true},
                                  {"--prefetch-fraction", false, false, true},
                                  {"--cache-size", false, false, true},
                                  {"--prefetch-alpha", false, false, true},
                                  {"--prefetch-interval", false, false, true},
                                  {"--prefetch-agent", false, false, true},
                                  {"--prefetch-agent-timeout", false, false, true},
                                  {"--prefetch-thread", false, false, true},
                                  {"--no-prefetch-thread", false, false, true},
                                  {"--simulate-network", false, false, true},
                                  {"--grid", true, true, false},
                                  {"--permute", true, true, false},
                                  {"--load-budget", true, true, false},
                                  {"--recompute-aggregation", true, true, false},
                                  {"--memory-per-rank", true, false, false},
                                  {"--memory-policy", true, false, false},
                                  {"--machine", true, false, false},
                                  {"--machine-file", true, false, false}};

// Whether the user chose this option: --print-config writes every option with its default value (and
// flags as false), so such a value from a configuration file is not a choice.
bool chosen(const CLI::App* cmd, const char* name) {
  const CLI::Option* option = cmd->get_option(name);
  if (option->count() == 0) return false;
  const std::string value = option->as<std::string>();
  return value != option->get_default_str() && value != "false" && !value.empty();
}

void refuse_other_modes_options(const CLI::App* cmd, TrainMode mode) {
  for (const ModeOnly& m : kModeOnly) {
    const bool here = mode == TrainMode::Full        ? m.full
                      : mode == TrainMode::Minibatch ? m.minibatch
                                                     : m.sampled;
    if (here || !chosen(cmd, m.name)) continue;
    std::string modes;
    for (const auto& [on, name] :
         {std::pair{m.full, "full"}, {m.minibatch, "minibatch"}, {m.sampled, "sampled"}})
      if (on) modes += (modes.empty() ? "" : " / ") + std::string(name);
    fail(m.name, " is for --mode ", modes, ", not --mode ", train_mode_name(mode));
  }
}

// Values whose defaults are sentinels: given, they must be in range (a negative one must not mean default).
void check_given_values(const CLI::App* cmd, const Args& a) {
  if (chosen(cmd, "--input-dropout"))
    require(a.input_dropout >= 0 && a.input_dropout < 1, "--input-dropout must be in [0, 1), not ",
            a.input_dropout);
  if (chosen(cmd, "--steps-per-epoch"))
    require(a.steps_per_epoch >= 1, "--steps-per-epoch must be at least 1, not ", a.steps_per_epoch);
}

// The strings into the library's types; throws Error naming the flag.
TrainOptions to_options(Args& a, const CLI::App* cmd) {
  TrainOptions o = a.o;
  o.mode = parse_mode(a.mode);
  refuse_other_modes_options(cmd, o.mode);
  check_given_values(cmd, a);
  if (o.mode == TrainMode::Minibatch && !a.grid.empty() && a.grid != "auto")
    require(std::count(a.grid.begin(), a.grid.end(), 'x') == 3, "--grid '", a.grid,
            "': --mode minibatch takes 4 axes DxXxYxZ (replicas first), e.g. 2x1x1x2");
  ModelConfig& m = o.model;
  m.kind = parse_model_kind(a.model);
  m.norm = parse_norm(a.norm);
  m.input_dropout = a.input_dropout < 0 ? m.dropout : a.input_dropout;
  m.fuse = !a.no_fuse;
  o.trainer.optimizer.kind = parse_optimizer(a.optimizer);
  o.schedule.kind = parse_schedule(a.lr_schedule);
  o.trainer.selection = parse_selection(a.selection);
  o.task.metric = parse_metric(a.metric);
  o.task.kind = parse_task_kind(a.task);
  o.task.link_decoder = parse_link_decoder(a.link_decoder);
  if (!a.positive_weight.empty()) o.task.positive_weight = parse_positive_weights(a.positive_weight);
  o.grid.permute = parse_permute_mode(a.permute);
  o.compute.comm_dtype = parse_comm_dtype(a.comm_dtype);
  o.compute.gemm_dtype = parse_gemm_dtype(a.gemm_dtype);
  o.compute.host_gemm = parse_host_gemm(a.host_gemm);
  o.compute.kernels = parse_kernel_path(a.kernels);
  o.compute.comm = parse_comm_backend(a.comm);
  o.grid.memory_policy = parse_memory_policy(a.memory_policy);
  if (!a.memory_per_rank.empty())
    o.grid.memory_per_rank = parse_byte_size(a.memory_per_rank, "--memory-per-rank");
  if (!a.load_budget.empty()) o.grid.exchange_budget = parse_byte_size(a.load_budget, "--load-budget");
  if (a.grid == "auto")
    o.grid.automatic = true;
  else if (!a.grid.empty())
    o.grid.shape = parse_grid(a.grid);
  if (o.mode == TrainMode::Minibatch) {
    require(!a.batch_size.empty(), "--mode minibatch needs --batch-size");
    parse_minibatch_size(a.batch_size, o.minibatch);
  }
  o.minibatch.sampler_thread = !a.no_sampler_thread;
  // --steps-per-epoch and --sample-on go to the options of the mode that runs (each mode has its own).
  const SamplePlace sample_on = parse_sample_place(a.sample_on);
  if (o.mode == TrainMode::Sampled) {
    o.sampled.sample_on = sample_on;
    o.sampled.steps_per_epoch = a.steps_per_epoch;
  } else {
    o.minibatch.sample_on = sample_on;
    o.minibatch.steps_per_epoch = a.steps_per_epoch;
  }
  SampledOptions& s = o.sampled;
  if (o.mode == TrainMode::Sampled && !a.batch_size.empty()) s.batch_size = parse_seed_count(a.batch_size);
  if (!a.fanouts.empty()) s.fanouts = parse_fanouts(a.fanouts);
  s.prefetch.policy = parse_prefetch_policy(a.prefetch_policy);
  o.feature_dtype = parse_feature_dtype(a.feature_dtype);
  o.compute.activation_dtype = parse_activation_dtype(a.activation_dtype);
  if (!a.cache_size.empty()) {
    require(!chosen(cmd, "--prefetch-fraction"),
            "--cache-size and --prefetch-fraction both size the cache: give one of them");
    s.prefetch.cache_bytes = parse_byte_size(a.cache_size, "--cache-size");
    require(s.prefetch.cache_bytes > 0, "--cache-size must be more than 0 bytes, not '", a.cache_size, "'");
  }
  s.thread = parse_step_thread(a.prefetch_thread);
  require(!a.no_prefetch_thread || s.thread != StepThread::On,
          "--no-prefetch-thread and --prefetch-thread on contradict each other: give one");
  if (a.no_prefetch_thread) s.thread = StepThread::Off;
  s.network = parse_network(a.network);
  require(a.eval == "sampled" || a.eval == "exact", "--eval must be sampled or exact, not '", a.eval, "'");
  require(a.final_eval == "exact" || a.final_eval == "sampled",
          "--final-eval must be exact or sampled, not '", a.final_eval, "'");
  s.exact_eval = a.eval == "exact";
  s.exact_final = a.final_eval == "exact";
  return o;
}

// Exit status of a run a signal stopped (sysexits' EX_TEMPFAIL: try again, i.e. resume).
constexpr int kStoppedBySignal = 75;

int report(const TrainResult& r, const TrainOptions& o) {
  if (r.stop_signal != 0) {
    const std::string epoch = std::to_string(r.history.empty() ? 0 : r.history.back().epoch);
    log_line(std::string("stopped by ") + stop_signal_name(r.stop_signal) + " after epoch " + epoch + ": " +
             (o.checkpoint.dir.empty()
                  ? "no --checkpoint DIR was given, nothing saved"
                  : Checkpointer::path_in(o.checkpoint.dir) + " written; continue with --resume") +
             " (exit " + std::to_string(kStoppedBySignal) + ")");
    return kStoppedBySignal;
  }
  // The first epoch carries one-time costs (first touches, plans, caches): left out of the mean when there
  // are others, and the summary says so.
  const size_t first = r.history.size() > 1 ? 1 : 0;
  double total = 0;
  for (size_t k = first; k < r.history.size(); ++k) total += r.history[k].seconds;
  const size_t counted = r.history.size() - first;
  const double mean = counted == 0 ? 0.0 : 1e3 * total / double(counted);
  // Epochs over the whole run (a resumed run's too); the times are this job's.
  char times[200];
  std::snprintf(times, sizeof(times),
                "(mean epoch %.1f ms over this job's %zu epochs%s; peak memory %.1f MiB per rank)", mean,
                counted, first ? " after its first" : "", double(r.peak_bytes) / 1048576.0);
  char line[400];
  if (r.best_epoch < 0)  // --eval-every 0
    std::snprintf(line, sizeof(line), "no evaluation after %lld epochs %s", (long long)r.epochs_done, times);
  else
    std::snprintf(line, sizeof(line), "best valid %.4f at epoch %lld: test %.4f after %lld epochs %s",
                  r.best_valid, (long long)r.best_epoch, r.test_at_best, (long long)r.epochs_done, times);
  log_line(line);
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, Command& selected, TrainRunner run) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("train", "Train a GCN, GraphSAGE or GAT model on a graph file");
  cmd->add_option("--data", a->o.data, "Tessera .h5 graph file")->required();
  add_train_arguments(cmd, *a);
  cmd->footer(
      "Options can also come from a TOML file: tessera train --config run.toml (keys are the long option "
      "names without dashes; the command line overrides the file; --print-config writes one).");
  cmd->callback([&selected, a, cmd, run = std::move(run)] {
    selected = [a, cmd, run](const Communicator& world) {
      std::string invalid;
      TrainOptions options;
      try {
        options = to_options(*a, cmd);
      } catch (const std::exception& e) {
        invalid = e.what();
      }
      // An option's problem names the --config file and line its value came from.
      const CLI::App& root = *cmd->get_parent();
      world.check(invalid.empty(), config_origin(root, invalid) + invalid);
      try {
        check_options(options, world);
      } catch (const CollectiveError& e) {
        throw CollectiveError(config_origin(root, e.what()) + e.what());
      }
      // The configuration as --print-config prints it and the metrics header records it: every value must
      // read back as given (a line break cannot).
      std::string config, problem;
      try {
        config = cmd->config_to_str(true, true);
      } catch (const CLI::ConfigError& e) {
        problem = e.what();
      }
      world.check(problem.empty(), problem);
      // Printed only once the options are known to be valid (the file itself is read only by a run).
      if (a->print_config) {
        if (world.rank() == 0) std::printf("%s", config.c_str());
        return 0;
      }
      options.outputs.metrics_header["version"] = version_short();
      options.outputs.metrics_header["config"] = config;
      return run(options, world);
    };
  });
}

void add_train_command(CLI::App& app, Command& selected) {
  add_train_command(app, selected, [](const TrainOptions& given, const Communicator& world) {
    TrainOptions options = given;
    set_progress_enabled(!options.outputs.quiet);
    // SIGTERM/SIGUSR1 from here on (during the load too) stop the run at an epoch end with a checkpoint.
    const StopSignalWatch watch;
    options.trainer.stop_on_signal = true;
    return report(run_training(options, world), options);
  });
}

}  // namespace tessera::app
