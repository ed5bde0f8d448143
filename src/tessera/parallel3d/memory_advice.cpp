// SPDX-License-Identifier: BSD-3-Clause
// What a run the memory model refuses can change to fit: the message lists each with its prediction, and
// `--memory-policy auto` takes the one that keeps the run on its grid and ranks.
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera {

namespace {

// The fastest grid of `ranks` that fits, if any.
bool fastest_fitting(const ProblemSize& problem, int ranks, const MachineProfile& machine, double budget,
                     GridCost& found) {
  for (const GridCost& c : plan_grids(problem, ranks, machine))
    if (c.memory_bytes <= budget) {
      found = c;
      return true;
    }
  return false;
}

}  // namespace

std::vector<MemoryWayOut> memory_ways_out(const ProblemSize& problem, const GridShape& shape,
                                          const MachineProfile& machine, double budget_bytes) {
  std::vector<MemoryWayOut> out;
  const int ranks = shape.size();
  int listed = 0;
  for (const GridCost& c : plan_grids(problem, ranks, machine))
    if (!(c.shape == shape) && c.memory_bytes <= budget_bytes && listed++ < 3)
      out.push_back({"`grid` " + c.shape.str(), c.shape, ranks, problem.recompute, c.memory_bytes,
                     problem.activation_bytes, problem.gemm_operand_bytes});
  if (!problem.recompute) {
    ProblemSize recompute = problem;
    recompute.recompute = true;
    const double here = predict_memory(recompute, shape, machine).peak;
    GridCost other;
    if (here <= budget_bytes)
      out.push_back({"`recompute-aggregation`", shape, ranks, true, here, problem.activation_bytes,
                     problem.gemm_operand_bytes});
    else if (fastest_fitting(recompute, ranks, machine, budget_bytes, other))
      out.push_back({"`recompute-aggregation` `grid` " + other.shape.str(), other.shape, ranks, true,
                     other.memory_bytes, problem.activation_bytes, problem.gemm_operand_bytes});
  }
  // bf16 activations change the weight gradients' rounding (not the forward), so they are a way out to
  // name, never one --memory-policy auto takes; GAT keeps no aggregation they apply to.
  if (!problem.recompute && problem.heads == 0 && problem.activation_bytes > 2) {
    ProblemSize bf16 = problem;
    bf16.activation_bytes = 2;
    const double here = predict_memory(bf16, shape, machine).peak;
    if (here <= budget_bytes)
      out.push_back({"`activation-dtype` bf16", shape, ranks, false, here, 2, problem.gemm_operand_bytes});
  }
  // bf16 GEMMs keep bf16 copies of their largest operands (host builds): fp32 GEMMs keep none.
  if (problem.gemm_operand_bytes == 2) {
    ProblemSize f32 = problem;
    f32.gemm_operand_bytes = 4;
    const double here = predict_memory(f32, shape, machine).peak;
    if (here <= budget_bytes)
      out.push_back({"`gemm-dtype` f32", shape, ranks, problem.recompute, here, problem.activation_bytes, 4});
  }
  // More ranks, each with the same memory (on more nodes): the first rank count where a grid fits.
  for (int more = 2 * ranks; more <= 64 * ranks; more *= 2) {
    GridCost c;
    if (!fastest_fitting(problem, more, machine, budget_bytes, c)) continue;
    out.push_back({std::to_string(more) + " ranks with `grid` " + c.shape.str(), c.shape, more,
                   problem.recompute, c.memory_bytes, problem.activation_bytes, problem.gemm_operand_bytes});
    break;
  }
  return out;
}

}  // namespace tessera
