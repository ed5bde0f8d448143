// SPDX-License-Identifier: BSD-3-Clause
// `tessera plan`: every 3D grid for a rank count, ranked by the performance model's predicted epoch time.
#include <cstdio>
#include <memory>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/models/train.hpp"
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera::app {

MachineProfile machine_from_options(const std::string& machine, const std::string& file) {
  return file.empty() ? builtin_machine(machine) : load_machine_file(file);
}

void add_plan_command(CLI::App& app, Command& selected) {
  struct Args {
    std::string data, machine = "local", machine_file, save_machine;
    int ranks = 0, layers = 2;  // train's defaults
    int64_t hidden = 16;
    std::string model = "gcn";
    int64_t heads = 8, output_heads = 1;
    bool recompute_aggregation = false;
    std::string load_budget;
    std::string schedule = "tessera";
    std::string task = "auto";  // train's
    std::string feature_dtype = "f32";
    std::string activation_dtype = "f32";
    std::string gemm_dtype = "f32";
    int64_t embedding_dim = 0, link_negatives = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* plan = app.add_subcommand("plan", "Rank every 3D grid for a rank count by predicted epoch time");
  plan->add_option("--data", a->data, "Tessera .h5 graph file (only its sizes are read)")->required();
  plan->add_option("--ranks", a->ranks, "Number of ranks (GPUs)")->required()->check(CLI::PositiveNumber);
  plan->add_option("--layers", a->layers, "Graph layers")->capture_default_str();
  plan->add_option("--hidden", a->hidden, "Hidden width (GAT: per head)")->capture_default_str();
  plan->add_option("--model", a->model, "as train's: gcn, sage or gat (GAT's attention is counted per edge)")
      ->capture_default_str();
  plan->add_option("--heads", a->heads, "as train's: gat's heads of every hidden layer")
      ->capture_default_str();
  plan->add_option("--output-heads", a->output_heads, "as train's: gat's heads of the last layer")
      ->capture_default_str();
  plan->add_option("--machine", a->machine, "perlmutter, frontier or local")->capture_default_str();
  plan->add_flag("--recompute-aggregation", a->recompute_aggregation,
                 "as train's: layers keep no A H for backward (less memory, more SpMM)");
  plan->add_option("--load-budget", a->load_budget, "as train's: bytes of one round of the load's exchanges");
  plan->add_option("--machine-file", a->machine_file,
                   "Machine file written by tessera bench comm / spmm --fit");
  plan->add_option(
          "--schedule", a->schedule,
          "tessera (what train runs) or plexus: GCN layers as Plexus's implementation runs them, every "
          "layer aggregation first (to compare with Plexus's published epochs)")
      ->check(CLI::IsMember({"tessera", "plexus"}))
      ->capture_default_str();
  plan->add_option("--task", a->task, "as train's: node, link or auto (a link task prices its pairs' gather)")
      ->capture_default_str();
  plan->add_option("--embedding-dim", a->embedding_dim,
                   "as train's: a link task's output width (0: --hidden)")
      ->capture_default_str();
  plan->add_option("--link-negatives", a->link_negatives, "as train's: a link task's negatives per pair")
      ->capture_default_str();
  plan->add_option(
          "--feature-dtype", a->feature_dtype,
          "as train's: f32, or bf16 features (half their bytes; gcn, sage: layer 0 aggregates first)")
      ->capture_default_str();
  plan->add_option("--activation-dtype", a->activation_dtype,
                   "as train's: f32, or bf16 (gcn, sage: layers that aggregate first keep A H in bf16)")
      ->capture_default_str();
  plan->add_option("--gemm-dtype", a->gemm_dtype,
                   "as train's: f32, or bf16 (host GEMMs round their operands into bf16 copies)")
      ->capture_default_str();
  plan->add_option("--save-machine", a->save_machine,
                   "Also write the machine profile planned with (built-in or file) as a machine file");
  plan->callback([&selected, a] {
    selected = [a](const Communicator& world) {
      MachineProfile machine;
      std::string problem;
      int64_t load_budget = kDefaultExchangeBudget;
      try {
        ModelConfig check;
        check.in = check.out = 1;
        check.kind = parse_model_kind(a->model);
        check.layers = a->layers;
        check.hidden = a->hidden;
        check.heads = a->heads;
        check.output_heads = a->output_heads;
        check.validate();  // the bounds train uses
        parse_task_kind(a->task);
        (void)parse_feature_dtype(a->feature_dtype);  // a bad name is refused before the file is read
        require(
            parse_activation_dtype(a->activation_dtype) == StorageDtype::F32 || check.kind != ModelKind::Gat,
            "--activation-dtype bf16 is for --model gcn / sage (layers that aggregate first keep A H in "
            "bf16); a GAT keeps its activations in fp32");
        (void)parse_gemm_dtype(a->gemm_dtype);
        require(a->embedding_dim >= 0, "--embedding-dim must not be negative, not ", a->embedding_dim);
        require(a->link_negatives >= 1 && a->link_negatives <= 1024,
                "--link-negatives must be in [1, 1024], not ", a->link_negatives);
        require(a->schedule == "tessera" || check.kind == ModelKind::Gcn,
                "--schedule plexus prices GCN layers only, not --model ", a->model);
        if (!a->load_budget.empty()) load_budget = parse_byte_size(a->load_budget, "--load-budget");
        machine = machine_from_options(a->machine, a->machine_file);
      } catch (const Error& e) {
        problem = e.what();
      }
      world.check(problem.empty(), problem);
      if (!a->save_machine.empty())
        world.run_on(0, [&] {
          PathPlan paths;
          paths.input(a->data, "`data`");
          paths.input(a->machine_file, "`machine-file`");
          paths.output_file(a->save_machine, "`save-machine`");
          paths.check_and_prepare();
        });
      const GraphFileReader reader(world, a->data);
      ModelConfig model;  // the command line's defaults besides the model, layers, width and heads (dropout)
      model.kind = parse_model_kind(a->model);
      model.layers = a->layers;
      model.hidden = a->hidden;
      model.heads = a->heads;
      model.output_heads = a->output_heads;
      TrainOptions task;
      task.task.kind = parse_task_kind(a->task);
      const bool link = is_link_task(task, reader.meta());
      if (link) model.out = a->embedding_dim > 0 ? a->embedding_dim : a->hidden;
      ProblemSize size = problem_size(reader.meta(), model, a->recompute_aggregation, load_budget);
      if (link) size.link_pairs = reader.meta().link_train_pairs * (1 + a->link_negatives);
      size.plexus_schedule = a->schedule == "plexus";
      size.feature_bytes = storage_bytes(parse_feature_dtype(a->feature_dtype));
      size.activation_bytes = storage_bytes(parse_activation_dtype(a->activation_dtype));
      size.gemm_operand_bytes = operand_bytes(parse_gemm_dtype(a->gemm_dtype));
      char line[256];
      std::snprintf(line, sizeof(line),
                    "plan: %s, %lld nodes, %lld nonzeros, %d layers, hidden %lld, %d ranks, machine %s",
                    a->data.c_str(), (long long)size.nodes, (long long)size.nnz, a->layers,
                    (long long)a->hidden, a->ranks, machine.name.c_str());
      log_line(line);
      if (!a->save_machine.empty()) {
        world.run_on(0, [&] { save_machine_file(machine, a->save_machine); });
        log_line("wrote the machine profile to " + a->save_machine);
      }
      log_line(
          "rank  grid        epoch (s)   comm (s)   spmm (s)   gemm (s)  other (s)   comm/rank   "
          "memory/rank (load peak)");
      int rank = 1;
      for (const GridCost& c : plan_grids(size, a->ranks, machine)) {
        std::snprintf(line, sizeof(line), "%4d  %-10s %10.4f %10.4f %10.4f %10.4f %10.4f  %7.1f MB   %s (%s)",
                      rank++, c.shape.str().c_str(), c.total_s, c.comm_s, c.spmm_s, c.gemm_s, c.other_s,
                      c.comm_bytes / 1e6, human_bytes(c.memory_bytes).c_str(),
                      human_bytes(c.load_memory_bytes).c_str());
        log_line(line);
      }
      return 0;
    };
  });
}

}  // namespace tessera::app
