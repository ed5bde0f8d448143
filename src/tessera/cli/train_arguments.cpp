// SPDX-License-Identifier: BSD-3-Clause
// `tessera train`'s options: names, help, defaults and help groups (train_arguments.hpp).
#include "tessera/cli/train_arguments.hpp"

#include "tessera/cli/options.hpp"

namespace tessera::app {

namespace {

void add_model_options(CLI::App* cmd, Args& a) {
  ModelConfig& m = a.o.model;
  cmd->add_option("--model", a.model, "gcn, sage or gat")->capture_default_str();
  cmd->add_option("--layers", m.layers, "Number of graph layers")->capture_default_str();
  cmd->add_option("--hidden", m.hidden, "Hidden width (gat: per head)")->capture_default_str();
  cmd->add_option("--heads", m.heads, "gat: attention heads of the hidden layers (concatenated)")
      ->capture_default_str();
  cmd->add_option("--output-heads", m.output_heads, "gat: attention heads of the last layer (averaged)")
      ->capture_default_str();
  cmd->add_option("--attention-dropout", m.attention_dropout, "gat: dropout on the attention coefficients")
      ->capture_default_str();
  cmd->add_option("--dropout", m.dropout, "Dropout on hidden layers")->capture_default_str();
  cmd->add_option("--input-dropout", a.input_dropout, "Dropout on input features (default: --dropout)");
  cmd->add_option("--norm", a.norm, "none, batch or rms (hidden layers)")->capture_default_str();
  cmd->add_flag("--no-fuse", a.no_fuse, "Norm, ReLU and dropout as separate layers (for comparison)");
  add_seed_option(cmd, m.seed, "Seed of initialization, dropout and sampling");
  cmd->add_option("--optimizer", a.optimizer, "adam or adamw")->capture_default_str();
  cmd->add_option("--lr", a.o.trainer.optimizer.lr, "Learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", a.o.trainer.optimizer.weight_decay,
                  "Weight decay on weights (not biases)")
      ->capture_default_str();
  cmd->add_option("--lr-schedule", a.lr_schedule,
                  "constant, step (--lr times --lr-gamma every --lr-step-every epochs) or cosine (down to "
                  "--lr-min at the end of the run)")
      ->capture_default_str();
  cmd->add_option("--lr-warmup", a.o.schedule.warmup_epochs,
                  "Epochs of linear warm-up before the schedule (fractions allowed; 0: none)")
      ->capture_default_str();
  cmd->add_option("--lr-step-every", a.o.schedule.step_every, "step schedule: epochs between decays")
      ->capture_default_str();
  cmd->add_option("--lr-gamma", a.o.schedule.gamma, "step schedule: the factor of each decay")
      ->capture_default_str();
  cmd->add_option("--lr-min", a.o.schedule.min_lr, "cosine schedule: the learning rate at the end")
      ->capture_default_str();
  cmd->add_option("--clip-grad-norm", a.o.trainer.clip_grad_norm,
                  "Scale the gradients down to this global L2 norm before each update where theirs is larger "
                  "(0: never)")
      ->capture_default_str();
  cmd->add_option("--epochs", a.o.trainer.epochs, "Epochs")->capture_default_str();
  cmd->add_flag("--normalize-features", a.o.normalize_features, "Divide each feature row by its sum");
}

void add_grid_options(CLI::App* cmd, Args& a) {
  cmd->add_option("--mode", a.mode,
                  "full (one rank or a 3D grid), minibatch (4D grid DxXxYxZ) or sampled (partition-parallel "
                  "neighbour sampling, one replica per rank)")
      ->capture_default_str();
  cmd->add_option("--grid", a.grid, "full: XxYxZ or auto (performance model); minibatch: DxXxYxZ");
  cmd->add_option("--machine", a.o.grid.machine, "--grid auto: perlmutter, frontier or local")
      ->capture_default_str();
  cmd->add_option("--machine-file", a.o.grid.machine_file,
                  "--grid auto: a file from tessera bench comm/spmm --fit");
  cmd->add_option("--memory-per-rank", a.memory_per_rank,
                  "full: memory each rank may use (e.g. 4G); a grid predicted to need more is refused before "
                  "the load, and --grid auto picks among those that fit; 0: no check (default: the node's "
                  "available memory shared by its ranks)");
  cmd->add_option(
         "--memory-policy", a.memory_policy,
         "full: a run predicted not to fit: auto (recompute the aggregation where that fits, said in "
         "the log) or refuse (list every way out with its prediction)")
      ->capture_default_str();
  cmd->add_option(
      "--load-budget", a.load_budget,
      "full / minibatch: bytes of one round of the load's exchanges per rank (e.g. 64M); a rank "
      "sends its edges and features in as many rounds as that takes; 0: one round (default 256M)");
  cmd->add_option("--permute", a.permute, "none, single or double permutation for load balance")
      ->capture_default_str();
  cmd->add_flag("--overlap", a.o.compute.overlap,
                "Overlap each SpMM's all-reduce with the SpMM, in row chunks");
  cmd->add_flag("--recompute-aggregation", a.o.compute.recompute_aggregation,
                "full / minibatch: keep no layer's A H for backward, aggregate again there (less memory, one "
                "more SpMM and all-reduce per layer, same results)");
  cmd->add_option("--comm-dtype", a.comm_dtype, "f32 or bf16 on the wire for the multiply's all-reduces")
      ->capture_default_str();
  cmd->add_option("--activation-dtype", a.activation_dtype,
                  "f32, or bf16: gcn / sage layers that aggregate first keep A H for the weight gradient in "
                  "bf16 (half its memory; the forward unchanged)")
      ->capture_default_str();
  cmd->add_option("--kernels", a.kernels, "auto, host, team (what device builds run) or vendor")
      ->capture_default_str();
  cmd->add_option("--gemm-dtype", a.gemm_dtype,
                  "f32, or bf16: host GEMMs round both operands to bf16 and sum in fp32 (oneDNN; AMX where "
                  "the CPU has it)")
      ->capture_default_str();
  cmd->add_option("--host-gemm", a.host_gemm,
                  "host fp32 GEMMs through auto (oneDNN where the build has it), blas or onednn")
      ->capture_default_str();
  cmd->add_flag("--allow-tf32", a.o.compute.allow_tf32,
                "Vendor GEMMs may round fp32 inputs to TF32 (CUDA builds)");
  cmd->add_option("--comm", a.comm,
                  "device collectives: auto (NCCL with one GPU per rank, else MPI), mpi, mpi-host (MPI on "
                  "host copies) or "
                  "nccl (CUDA builds)")
      ->capture_default_str();
  cmd->add_option(
      "--batch-size", a.batch_size,
      "minibatch: vertices per sample, a count (1024) or a fraction of the nodes (0.1); sampled: seeds "
      "per rank per step, a link task's training pairs (default 1024)");
  cmd->add_option("--steps-per-epoch", a.steps_per_epoch,
                  "minibatch / sampled: steps per epoch (default: about one pass over the nodes)");
  cmd->add_flag("--no-sampler-thread", a.no_sampler_thread, "minibatch: build each batch when it is needed");
  cmd->add_option(
         "--sample-on", a.sample_on,
         "minibatch / sampled: where training samples are built: host (a thread, then an upload), device "
         "(kernels on the GPU or the host's threads, nothing uploaded; sampled mode on one rank only) or "
         "auto (device on GPU builds; for sampled mode where it runs on one rank)")
      ->capture_default_str();
}

void add_sampled_options(CLI::App* cmd, Args& a) {
  SampledOptions& s = a.o.sampled;
  cmd->add_option(
      "--partition", a.o.sampled.partition,
      "sampled: /partition/NAME from tessera partition, or block (default metis-RANKS where the file has it, "
      "else block)");
  cmd->add_option(
      "--partition-file", a.o.sampled.partition_file,
      "sampled: read the partition from this file (tessera partition --output) instead of --data");
  cmd->add_option("--fanouts", a.fanouts,
                  "sampled: neighbours per layer, input layer first (default 10 each)");
  cmd->add_option("--prefetch-policy", a.prefetch_policy,
                  "sampled: none, static, periodic, adaptive or external")
      ->capture_default_str();
  cmd->add_option("--prefetch-fraction", s.prefetch.fraction, "sampled: cache rows as a fraction of the halo")
      ->capture_default_str();
  cmd->add_option("--cache-size", a.cache_size,
                  "sampled: the cache's memory per rank, bytes (K, M, G suffixes): as many halo rows as fit "
                  "in it, instead of --prefetch-fraction");
  cmd->add_option("--feature-dtype", a.feature_dtype,
                  "Hold the node features in f32 or bf16 (half the bytes: rounded once at load, read as "
                  "fp32; sampled: also fetched and cached so)")
      ->capture_default_str();
  cmd->add_option("--prefetch-alpha", s.prefetch.alpha, "sampled: per-step score decay of cached rows")
      ->capture_default_str();
  cmd->add_option("--prefetch-interval", s.prefetch.interval,
                  "sampled: steps between evictions (periodic) and per window")
      ->capture_default_str();
  cmd->add_option("--prefetch-agent", s.prefetch.agent,
                  "sampled, external: command that answers observations (JSON lines)");
  cmd->add_option("--prefetch-agent-timeout", s.prefetch.agent_timeout_s,
                  "sampled, external: seconds to wait for an answer before falling back to periodic")
      ->capture_default_str();
  cmd->add_option("--prefetch-thread", a.prefetch_thread,
                  "sampled: prepare each next step on a worker thread while a step trains (on), when it is "
                  "needed (off), or auto: on unless ranks of one thread each fill the node's CPUs")
      ->capture_default_str();
  cmd->add_flag("--no-prefetch-thread", a.no_prefetch_thread, "sampled: the same as --prefetch-thread off");
  cmd->add_option("--eval", a.eval,
                  "sampled: each evaluation on sampled neighbourhoods (sampled) or exact, layer-wise over "
                  "every neighbour (exact: one pass over every node per evaluation)")
      ->capture_default_str();
  cmd->add_option("--final-eval", a.final_eval,
                  "sampled: exact (the best parameters evaluated layer-wise at the end, and node outputs "
                  "exact, where the memory allows) or sampled (neither)")
      ->capture_default_str();
  cmd->add_option("--simulate-network", a.network,
                  "sampled, BENCHMARKS ONLY: LAT_US,GBPS - also wait as long as each exchange would take");
}

void add_output_options(CLI::App* cmd, Args& a) {
  TrainOptions& o = a.o;
  cmd->add_option("--metrics", o.outputs.metrics,
                  "Write one JSON line per epoch (and per step, sampled) here");
  cmd->add_option("--save-predictions", o.outputs.predictions,
                  "Write the best-validation epoch's predicted class of every node here, one per line");
  cmd->add_option(
      "--save-embeddings", o.outputs.embeddings,
      "Write the best-validation epoch's last hidden layer of every node here (HDF5, /embeddings; a link "
      "task: the model's output, the embeddings its pairs are scored by)");
  cmd->add_option("--checkpoint", o.checkpoint.dir, "Directory for DIR/checkpoint.h5");
  cmd->add_option("--checkpoint-every", o.checkpoint.every, "Checkpoint every K epochs (0: at the end)");
  cmd->add_flag("--resume", o.checkpoint.resume, "Continue from DIR/checkpoint.h5");
  cmd->add_flag(
      "--overwrite-checkpoint", o.checkpoint.overwrite,
      "Start over although DIR/checkpoint.h5 exists (replaced at this run's first save); without it, "
      "or --resume, such a run is refused");
  cmd->add_flag("--resume-force", o.checkpoint.accept_run_differences,
                "With --resume: continue although the checkpoint was written with other result-changing "
                "options or another graph (the differences are listed in the log)");
  cmd->add_option("--eval-every", o.trainer.eval_every,
                  "Evaluate every K epochs (and after the last); 0 = never")
      ->capture_default_str();
  cmd->add_option("--patience", o.patience, "Stop after K evaluations without a better validation accuracy")
      ->capture_default_str();
  cmd->add_option(
         "--metric", a.metric,
         "What evaluation reports and the best epoch is chosen by: auto (accuracy for a single-label "
         "graph, rocauc for a multi-label one; a link task: mrr where its splits give each pair its own "
         "negatives, else rocauc), accuracy, rocauc, ap, f1-micro or f1-macro (multi-label: mean over "
         "tasks), hits@20, hits@50, hits@100 or mrr (link tasks)")
      ->capture_default_str();
  cmd->add_option(
         "--task", a.task,
         "What the run predicts: node (the graph's node labels), link (whether node pairs are "
         "edges, from its /link splits; full-graph or sampled mode) or auto (link for a graph of link "
         "splits without node labels)")
      ->capture_default_str();
  cmd->add_option("--embedding-dim", o.task.embedding_dim,
                  "Link tasks: the width of the node embeddings pairs are scored by (the model's output); "
                  "0: --hidden")
      ->capture_default_str();
  cmd->add_option("--link-batch", o.task.link_batch,
                  "Link tasks, full-graph mode: training pairs per step, each step a full forward (0: every "
                  "pair, one step per epoch); each epoch shuffles the pairs (sampled mode: --batch-size)")
      ->capture_default_str();
  cmd->add_option("--link-decoder", a.link_decoder,
                  "Link tasks: how a pair (u, v) is scored: dot (h_u . h_v) or mlp (an MLP on h_u * h_v, "
                  "trained with the model, as OGB's link baselines)")
      ->capture_default_str();
  cmd->add_option("--link-decoder-layers", o.task.link_decoder_layers,
                  "--link-decoder mlp: its linear layers (ReLU between them, one score out)")
      ->capture_default_str();
  cmd->add_option("--link-decoder-hidden", o.task.link_decoder_hidden,
                  "--link-decoder mlp: the width of its hidden layers (0: the embeddings')")
      ->capture_default_str();
  cmd->add_option("--link-negatives", o.task.link_negatives,
                  "Link tasks: negative pairs drawn per training pair each step (its source, a uniform "
                  "target)")
      ->capture_default_str();
  cmd->add_option("--pos-weight", a.positive_weight,
                  "Multi-label graphs: the loss's weight of positive labels, one value for every task or "
                  "one per task (W1,W2,...); default 1");
  cmd->add_option(
         "--selection", a.selection,
         "The best evaluation, and progress for --patience: accuracy (the highest validation "
         "accuracy) or accuracy-and-loss (the GAT paper's: progress is a validation accuracy at least "
         "its highest or a loss at most its lowest; the best, the last evaluation where both held)")
      ->capture_default_str();
  cmd->add_flag("--quiet", o.outputs.quiet, "Print only the summary");
  cmd->add_flag("--verbose", o.outputs.console.verbose,
                "After every epoch also its per-phase times over the ranks (where a replica has several), "
                "sampling and cache lines; every load phase as it ends and the load's summary");
  cmd->add_flag("--profile-kernels", o.outputs.profile_kernels,
                "Time every kernel, copy and vendor call of the epochs after the first (device time on a "
                "GPU) and print the largest per epoch at the end, rank 0's");
  cmd->add_option("--details-every", o.outputs.console.details_every,
                  "The per-epoch detail lines of --verbose after every K-th epoch only (0: never)")
      ->capture_default_str();
  cmd->add_flag("--print-config", a.print_config,
                "Print the effective configuration (TOML for --config) and exit")
      ->configurable(false);
}

// `tessera train --help` in groups, in this order.
constexpr std::pair<const char*, const char*> kHelpGroups[] = {
    {"--data", "Data"},
    {"--normalize-features", "Data"},
    {"--feature-dtype", "Data"},
    {"--model", "Model"},
    {"--layers", "Model"},
    {"--hidden", "Model"},
    {"--heads", "Model"},
    {"--output-heads", "Model"},
    {"--attention-dropout", "Model"},
    {"--dropout", "Model"},
    {"--input-dropout", "Model"},
    {"--norm", "Model"},
    {"--no-fuse", "Model"},
    {"--seed", "Model"},
    {"--optimizer", "Optimizer"},
    {"--lr", "Optimizer"},
    {"--weight-decay", "Optimizer"},
    {"--lr-schedule", "Optimizer"},
    {"--lr-warmup", "Optimizer"},
    {"--lr-step-every", "Optimizer"},
    {"--lr-gamma", "Optimizer"},
    {"--lr-min", "Optimizer"},
    {"--clip-grad-norm", "Optimizer"},
    {"--epochs", "Optimizer"},
    {"--eval-every", "Optimizer"},
    {"--patience", "Optimizer"},
    {"--selection", "Optimizer"},
    {"--metric", "Optimizer"},
    {"--pos-weight", "Optimizer"},
    {"--task", "Optimizer"},
    {"--embedding-dim", "Optimizer"},
    {"--link-negatives", "Optimizer"},
    {"--link-batch", "Optimizer"},
    {"--link-decoder", "Optimizer"},
    {"--link-decoder-layers", "Optimizer"},
    {"--link-decoder-hidden", "Optimizer"},
    {"--mode", "Parallelism"},
    {"--grid", "Parallelism"},
    {"--machine", "Parallelism"},
    {"--machine-file", "Parallelism"},
    {"--memory-per-rank", "Parallelism"},
    {"--memory-policy", "Parallelism"},
    {"--permute", "Parallelism"},
    {"--comm", "Parallelism"},
    {"--comm-dtype", "Parallelism"},
    {"--batch-size", "Mini-batch and sampled"},
    {"--steps-per-epoch", "Mini-batch and sampled"},
    {"--no-sampler-thread", "Mini-batch and sampled"},
    {"--sample-on", "Mini-batch and sampled"},
    {"--partition", "Sampled / prefetch"},
    {"--partition-file", "Sampled / prefetch"},
    {"--fanouts", "Sampled / prefetch"},
    {"--prefetch-policy", "Sampled / prefetch"},
    {"--prefetch-fraction", "Sampled / prefetch"},
    {"--cache-size", "Sampled / prefetch"},
    {"--prefetch-alpha", "Sampled / prefetch"},
    {"--prefetch-interval", "Sampled / prefetch"},
    {"--prefetch-agent", "Sampled / prefetch"},
    {"--prefetch-agent-timeout", "Sampled / prefetch"},
    {"--prefetch-thread", "Sampled / prefetch"},
    {"--no-prefetch-thread", "Sampled / prefetch"},
    {"--eval", "Sampled / prefetch"},
    {"--final-eval", "Sampled / prefetch"},
    {"--metrics", "Output"},
    {"--save-predictions", "Output"},
    {"--save-embeddings", "Output"},
    {"--checkpoint", "Output"},
    {"--checkpoint-every", "Output"},
    {"--resume", "Output"},
    {"--resume-force", "Output"},
    {"--overwrite-checkpoint", "Output"},
    {"--quiet", "Output"},
    {"--verbose", "Output"},
    {"--profile-kernels", "Output"},
    {"--details-every", "Output"},
    {"--overlap", "Performance"},
    {"--recompute-aggregation", "Performance"},
    {"--load-budget", "Performance"},
    {"--kernels", "Performance"},
    {"--gemm-dtype", "Performance"},
    {"--activation-dtype", "Performance"},
    {"--host-gemm", "Performance"},
    {"--allow-tf32", "Performance"},
    {"--print-config", "Diagnostics"},
    {"--simulate-network", "Diagnostics"}};

}  // namespace

void add_train_arguments(CLI::App* cmd, Args& a) {
  add_model_options(cmd, a);
  add_grid_options(cmd, a);
  add_sampled_options(cmd, a);
  add_output_options(cmd, a);
  for (const auto& [name, group] : kHelpGroups) cmd->get_option(name)->group(group);
}

}  // namespace tessera::app
