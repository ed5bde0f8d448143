// SPDX-License-Identifier: BSD-3-Clause
// How a full-graph run gets its grid before the load (docs/guide/full-graph.md): the one given, or the one
// the performance model picks; then the memory model's check, which under --memory-policy auto recomputes
// the aggregation where that makes the run fit, and otherwise refuses with every way out it predicts.
#include "tessera/models/grid_choice.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/models/link_task.hpp"

namespace tessera {

namespace {

// Bytes each rank may use, the same on every rank (the smallest), so every rank takes the same decision.
struct MemoryBudget {
  int64_t bytes = 0;   // 0: no check
  std::string source;  // where the number came from
};

// Admitted with kMemoryMargin to spare: the model is meant never to be below the measured peak, and the
// margin is room for what varies between runs and machines.
bool fits(double bytes, const MemoryBudget& budget) {
  return budget.bytes <= 0 || bytes * (1 + kMemoryMargin) <= double(budget.bytes);
}

MemoryBudget memory_budget(const TrainOptions& o, const Communicator& world) {
  if (o.grid.memory_per_rank >= 0) return {o.grid.memory_per_rank, "`memory-per-rank`"};
  const AvailableMemory node = available_memory();
  const int sharing = thread_choice().known ? std::max(1, thread_choice().node_ranks) : 1;
  const int64_t unknown = std::numeric_limits<int64_t>::max();
  const int64_t least =
      all_reduce_value(world, node.bytes < 0 ? unknown : node.bytes / sharing, ReduceOp::Min, "memory");
  if (least == unknown) return {0, "no /proc/meminfo"};
  return {least, node.source + " at start / " + std::to_string(sharing) + " ranks on the node"};
}

std::string gib(double bytes) {
  char text[32];
  if (bytes < double(int64_t(1) << 30))
    std::snprintf(text, sizeof(text), "%.0f MiB", bytes / double(1 << 20));
  else
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / double(int64_t(1) << 30));
  return text;
}

MachineProfile machine_of(const TrainOptions& o) {
  return o.grid.machine_file.empty() ? builtin_machine(o.grid.machine)
                                     : load_machine_file(o.grid.machine_file);
}

// Before the load: the predicted peak per rank on `shape`, refused when above the budget with every way out
// the model predicts.
void check_memory(const ProblemSize& size, const GridShape& shape, const MachineProfile& machine,
                  const MemoryBudget& budget, const TrainOptions& o, const Communicator& world) {
  const MemoryEstimate e = predict_memory(size, shape, machine);
  if (!o.outputs.quiet)
    log_line("memory per rank on grid " + shape.str() + ": predicted peak " + gib(e.peak) + " (load " +
             gib(e.load_peak) + ", graph " + gib(e.graph) + ", training " + gib(e.training) + "); " +
             (budget.bytes > 0 ? gib(double(budget.bytes)) + " available (" + budget.source + ")"
                               : "not checked (" + budget.source + ")"));
  if (fits(e.peak, budget)) return;
  std::string ways;
  for (const MemoryWayOut& w :
       memory_ways_out(size, shape, machine, double(budget.bytes) / (1 + kMemoryMargin)))
    ways += w.change + " (" + gib(w.peak_bytes) + "); ";
  ways = ways.empty() ? "Nothing is predicted to fit, on these ranks or on up to 64 times as many; "
                        "`memory-per-rank` 0 runs anyway"
                      : "Predicted to fit: " + ways + "or `memory-per-rank` 0 to run anyway";
  world.check(false, "grid " + shape.str() + " needs about " + gib(e.peak) +
                         " per rank (predicted peak; load " + gib(e.load_peak) + "), which with the " +
                         std::to_string(int(kMemoryMargin * 100 + 0.5)) + "% margin is more than the " +
                         gib(double(budget.bytes)) + " each rank has (" + budget.source + "). " + ways);
}

// The permutation the load uses: on one rank without a grid, the file's order (a permutation balances
// blocks that do not exist).
}  // namespace

PermuteMode load_permutation(const TrainOptions& o) {
  const bool one_rank = o.mode == TrainMode::Full && !o.grid.shape && !o.grid.automatic;
  return one_rank ? PermuteMode::None : o.grid.permute;
}

Graph3DOptions graph3d_options(const TrainOptions& o) {
  Graph3DOptions load;
  load.layers = o.model.layers;
  load.permute = load_permutation(o);
  load.seed = o.model.seed;
  load.normalization = normalization_for(o.model.kind);
  load.normalize_features = o.normalize_features;
  return load;
}

// The run's problem as the memory model prices it: sizes, the load's budget and its permutation.
namespace {

ProblemSize run_problem(const TrainOptions& o, const GraphMeta& meta) {
  ProblemSize size = problem_size(meta, o.model, o.compute.recompute_aggregation, o.grid.exchange_budget);
  size.one_order = load_permutation(o) != PermuteMode::Double;
  size.feature_bytes = storage_bytes(o.mode == TrainMode::Sampled ? StorageDtype::F32 : o.feature_dtype);
  size.normalize_features = o.normalize_features;
  size.activation_bytes = storage_bytes(o.compute.activation_dtype);
  size.gemm_operand_bytes = operand_bytes(o.compute.gemm_dtype);
  // A link step's pairs (the model prices one step; an epoch of `link-batch` steps is as many of them).
  const int64_t pairs = meta.link_train_pairs, batch = o.task.link_batch;
  if (is_link_task(o, meta))
    size.link_pairs = (batch > 0 ? std::min(batch, pairs) : pairs) * (1 + o.task.link_negatives);
  if (is_link_task(o, meta) && o.task.link_decoder == LinkDecoderKind::Mlp) {
    size.link_decoder_layers = o.task.link_decoder_layers;
    size.link_decoder_hidden =
        o.task.link_decoder_hidden > 0 ? o.task.link_decoder_hidden : embedding_width(o);
  }
  return size;
}

// The grid given, or the one --grid auto picks: the fastest that fits the budget (none fits: the fastest,
// which check_memory then refuses with the numbers). `said`: the line that tells the choice.
GridShape resolve_grid(const TrainOptions& o, const GraphMeta& meta, const MemoryBudget& budget,
                       const Communicator& world, std::string& said) {
  if (o.grid.shape) {
    world.check(o.grid.shape->size() == world.size(),
                "`grid` " + o.grid.shape->str() + " has " + std::to_string(o.grid.shape->size()) +
                    " ranks but the job has " + std::to_string(world.size()));
    return *o.grid.shape;
  }
  if (!o.grid.automatic)
    return GridShape{};  // one rank (run_training makes several ranks without --grid auto)
  std::string problem;
  GridCost best;
  try {
    const MachineProfile machine = machine_of(o);
    const std::vector<GridCost> grids = plan_grids(run_problem(o, meta), world.size(), machine);
    best = grids.front();
    for (const GridCost& c : grids)
      if (fits(c.memory_bytes, budget)) {
        best = c;
        break;
      }
    char line[256];
    std::snprintf(line, sizeof(line), "grid auto: %s (predicted %.4f s per epoch on machine %s)",
                  best.shape.str().c_str(), best.total_s, machine.name.c_str());
    said = line;
  } catch (const Error& e) {
    problem = e.what();
  }
  world.check(problem.empty(), problem);
  return best.shape;
}

}  // namespace

GridShape choose_full_grid(TrainOptions& o, const GraphMeta& meta, const Communicator& world) {
  const MemoryBudget budget = memory_budget(o, world);
  std::string said;
  GridShape shape = resolve_grid(o, meta, budget, world, said);
  std::string problem;
  MachineProfile machine;
  try {
    machine = machine_of(o);
  } catch (const Error& e) {
    problem = e.what();
  }
  world.check(problem.empty(), problem);
  // Every rank computes the same predictions from the same numbers: the same decision everywhere.
  if (o.grid.memory_policy == MemoryPolicy::Auto && !o.compute.recompute_aggregation &&
      !fits(predict_memory(run_problem(o, meta), shape, machine).peak, budget)) {
    TrainOptions recompute = o;
    recompute.compute.recompute_aggregation = true;
    std::string said_again;
    const GridShape again =
        o.grid.automatic ? resolve_grid(recompute, meta, budget, world, said_again) : shape;
    const double peak = predict_memory(run_problem(recompute, meta), again, machine).peak;
    if (fits(peak, budget)) {
      o.compute.recompute_aggregation = true;
      shape = again;
      said = said_again;
      said +=
          (said.empty() ? "" : "\n") +
          ("memory policy auto: `recompute-aggregation` on grid " + shape.str() + " (predicted peak " +
           gib(peak) + " of " + gib(double(budget.bytes)) + " per rank; without it the run would not fit)");
    }
  }
  if (!said.empty() && !o.outputs.quiet) log_line(said);
  check_memory(run_problem(o, meta), shape, machine, budget, o, world);
  return shape;
}

}  // namespace tessera
