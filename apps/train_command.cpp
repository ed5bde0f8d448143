// SPDX-License-Identifier: BSD-3-Clause
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "commands.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/models/trainer.hpp"

namespace tessera::app {

void add_train_command(CLI::App& app, Command& selected) {
  struct Args {
    TrainOptions options;
    std::string model = "gcn", norm = "none", optimizer = "adam", permute = "double", comm_dtype = "f32";
    std::string mode = "full";
    bool no_sampler_thread = false, no_fuse = false, no_prefetch_thread = false;
    std::string prefetch_policy = "periodic";
    int layers = 2;
    int64_t hidden = 16;
    float dropout = 0.5f, input_dropout = -1.0f, lr = 0.01f, weight_decay = 5e-4f;
    uint64_t seed = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("train", "Train a GCN or GraphSAGE model on a graph file");
  cmd->add_option("--data", a->options.data, "Tessera .h5 graph file")->required();
  cmd->add_option(
      "--grid", a->options.grid,
      "3D process grid XxYxZ for multi-rank full-graph training (GCN), or auto (performance model)");
  cmd->add_option("--machine", a->options.machine, "--grid auto: perlmutter, frontier or local")
      ->capture_default_str();
  cmd->add_option("--machine-file", a->options.machine_file,
                  "--grid auto: a file from tessera bench comm/spmm --fit");
  cmd->add_flag("--overlap", a->options.overlap,
                "3D: overlap each SpMM's all-reduce with the SpMM, in row chunks");
  cmd->add_option("--mode", a->mode,
                  "full (one rank or 3D grid), minibatch (4D grid DxXxYxZ) or sampled (partition-parallel "
                  "neighbour sampling, one replica per rank)")
      ->capture_default_str();
  cmd->add_option("--batch-size", a->options.batch_size,
                  "minibatch: vertices per sample, a count (1024) or a fraction of the nodes (0.1); sampled: "
                  "seeds per rank per step (default 1024)");
  SampledOptions& s = a->options.sampling;
  cmd->add_option("--partition", s.partition,
                  "sampled: /partition/NAME from tessera partition (default metis-RANKS; block on one rank), "
                  "or block (contiguous file ids)");
  cmd->add_option("--fanouts", s.fanouts,
                  "sampled: neighbours per layer, input layer first (default 10 each)");
  cmd->add_option("--prefetch-policy", a->prefetch_policy,
                  "sampled: none, static, periodic, adaptive or external (see README)")
      ->capture_default_str();
  cmd->add_option("--prefetch-fraction", s.fraction, "sampled: cache rows as a fraction of the halo")
      ->capture_default_str();
  cmd->add_option("--prefetch-alpha", s.alpha, "sampled: per-step score decay of cached rows")
      ->capture_default_str();
  cmd->add_option("--prefetch-interval", s.interval,
                  "sampled: steps between evictions (periodic) and per window")
      ->capture_default_str();
  cmd->add_option("--prefetch-agent", s.agent,
                  "sampled, external: command that answers observations (JSON lines)");
  cmd->add_option("--prefetch-agent-timeout", s.agent_timeout_s,
                  "sampled, external: seconds to wait for an answer before falling back to periodic")
      ->capture_default_str();
  cmd->add_flag("--no-prefetch-thread", a->no_prefetch_thread,
                "sampled: prepare each step when it is needed instead of during the previous one");
  cmd->add_option("--simulate-network", s.simulate_network,
                  "sampled, BENCHMARKS ONLY: LAT_US,GBPS - also wait as long as each exchange would take on "
                  "that network (e.g. 2,25)");
  cmd->add_option("--steps-per-epoch", a->options.steps_per_epoch,
                  "minibatch: steps per epoch (default: nodes / (batch size x D), rounded up)");
  cmd->add_flag("--no-sampler-thread", a->no_sampler_thread,
                "minibatch: build each batch when it is needed instead of during the previous step");
  cmd->add_flag("--no-fuse", a->no_fuse,
                "3D / minibatch: run bias, norm, ReLU and dropout as separate kernels (for comparison)");
  cmd->add_option("--comm-dtype", a->comm_dtype,
                  "3D: f32 or bf16 on the wire for the multiply's all-reduces (summed in fp32)")
      ->capture_default_str();
  cmd->add_option("--permute", a->permute, "3D: none, single or double permutation for load balance")
      ->capture_default_str();
  cmd->add_option("--model", a->model, "gcn or sage")->capture_default_str();
  cmd->add_option("--layers", a->layers, "Number of layers")->capture_default_str();
  cmd->add_option("--hidden", a->hidden, "Hidden width")->capture_default_str();
  cmd->add_option("--dropout", a->dropout, "Dropout on hidden layers")->capture_default_str();
  cmd->add_option("--input-dropout", a->input_dropout, "Dropout on input features (default: --dropout)");
  cmd->add_option("--norm", a->norm, "none, batch or rms (hidden layers)")->capture_default_str();
  cmd->add_option("--optimizer", a->optimizer, "adam or adamw")->capture_default_str();
  cmd->add_option("--lr", a->lr, "Learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", a->weight_decay, "Weight decay on weights (not biases)")
      ->capture_default_str();
  cmd->add_option("--epochs", a->options.epochs, "Epochs")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of initialization and dropout")->capture_default_str();
  cmd->add_flag("--normalize-features", a->options.normalize_features, "Divide each feature row by its sum");
  cmd->add_option("--metrics", a->options.metrics_path, "Write one JSON line per epoch here");
  cmd->add_option("--save-predictions", a->options.predictions_path,
                  "Write the best-validation epoch's predicted class of every node here, one per line");
  cmd->add_option("--checkpoint", a->options.checkpoint_dir, "Directory for DIR/checkpoint.h5");
  cmd->add_option("--checkpoint-every", a->options.checkpoint_every,
                  "Checkpoint every K epochs (0: at the end)");
  cmd->add_flag("--resume", a->options.resume, "Continue from DIR/checkpoint.h5");
  cmd->add_option("--eval-every", a->options.eval_every,
                  "Evaluate accuracy every K epochs (and after the last); sampled: 0 = never (benchmarks)")
      ->capture_default_str();
  cmd->add_flag("--quiet", a->options.quiet, "Print only the summary");
  cmd->callback([&selected, a] {
    selected = [a](const Communicator& world) {
      std::string invalid;
      try {
        ModelConfig& m = a->options.model;
        m.kind = parse_model_kind(a->model);
        m.norm = parse_norm(a->norm);
        m.layers = a->layers;
        m.hidden = a->hidden;
        m.dropout = a->dropout;
        m.input_dropout = a->input_dropout < 0 ? a->dropout : a->input_dropout;
        m.seed = a->seed;
        a->options.optimizer.kind = parse_optimizer(a->optimizer);
        a->options.permute = parse_permute_mode(a->permute.c_str());
        a->options.comm_dtype = parse_comm_dtype(a->comm_dtype);
        require(a->mode == "full" || a->mode == "minibatch" || a->mode == "sampled",
                "--mode: expected full, minibatch or sampled, got '", a->mode, "'");
        a->options.minibatch = a->mode == "minibatch";
        a->options.sampled = a->mode == "sampled";
        SampledOptions& s = a->options.sampling;
        s.policy = parse_prefetch_policy(a->prefetch_policy);
        s.thread = !a->no_prefetch_thread;
        if (a->options.sampled && !a->options.batch_size.empty()) {
          char* end = nullptr;
          const long long b = std::strtoll(a->options.batch_size.c_str(), &end, 10);
          require(*end == '\0' && b >= 1,
                  "--batch-size: --mode sampled takes a count of seeds per rank, not '",
                  a->options.batch_size, "'");
          s.batch_size = b;
        }
        a->options.sampler_thread = !a->no_sampler_thread;
        a->options.fuse = !a->no_fuse;
        require(a->options.minibatch || a->options.sampled || a->options.batch_size.empty(),
                "--batch-size needs --mode minibatch or sampled");
        require(!a->options.minibatch || !a->options.batch_size.empty(),
                "--mode minibatch needs --batch-size");
        a->options.optimizer.lr = a->lr;
        a->options.optimizer.weight_decay = a->weight_decay;
      } catch (const std::exception& e) {
        invalid = e.what();
      }
      world.check(invalid.empty(), invalid);
      const TrainResult r = train_full_graph(a->options, world);
      double total = 0;
      for (const EpochRecord& e : r.history) total += e.seconds;
      char line[256];
      if (r.best_epoch < 0)  // --eval-every 0
        std::snprintf(line, sizeof(line), "no evaluation (mean epoch %.1f ms over %zu epochs)",
                      r.history.empty() ? 0.0 : 1e3 * total / double(r.history.size()), r.history.size());
      else
        std::snprintf(line, sizeof(line),
                      "best valid %.4f at epoch %lld: test %.4f (mean epoch %.1f ms over %zu epochs)",
                      r.best_valid, (long long)r.best_epoch, r.test_at_best,
                      r.history.empty() ? 0.0 : 1e3 * total / double(r.history.size()), r.history.size());
      log_line(line);
      return 0;
    };
  });
}

}  // namespace tessera::app
