// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/training/trainer_report.hpp"

#include <cstdio>

#include "tessera/comm/collectives.hpp"
#include "tessera/parallel3d/pmm.hpp"

namespace tessera {

nlohmann::json comm_report(const Communicator& world, const CommStats& before) {
  const CommStats& now = world.stats();
  nlohmann::json j;
  int64_t bytes = 0;
  double seconds = 0;
  for (int k = 0; k < int(Collective::Count); ++k) {
    const Collective kind = Collective(k);
    const int64_t delta = now.total(kind).bytes - before.total(kind).bytes;
    if (delta > 0) j[std::string("bytes_") + collective_name(kind)] = delta;
    bytes += delta;
    seconds += now.total(kind).seconds - before.total(kind).seconds;
  }
  j["comm_s"] = seconds;
  // The busiest rank's communication, so the line describes the whole grid.
  j["bytes_max_rank"] = all_reduce_value(world, bytes, ReduceOp::Max, "report");
  return j;
}

nlohmann::json phase_report(const Communicator& world, const PhaseTimers* now, const PhaseTimers& before,
                            double loss_seconds, const CommStats& comm_before,
                            std::vector<std::string>& lines) {
  std::vector<std::string> names = {"spmm", "gemm", "loss"};
  std::vector<double> seconds = {now ? now->get("spmm") - before.get("spmm") : 0.0,
                                 now ? now->get("gemm") - before.get("gemm") : 0.0, loss_seconds};
  // The schedule's collectives (pmm.hpp), the norms' and the loss's: every rank knows the same names; a
  // rank that ran none of a phase reports 0.
  static const std::pair<const char*, Collective> comm_phases[] = {
      {phase::kForwardA, Collective::AllReduce},         {phase::kForwardB, Collective::AllReduce},
      {phase::kBackwardWeightsC, Collective::AllReduce}, {phase::kBackwardA, Collective::AllReduce},
      {phase::kBackwardInputsC, Collective::AllReduce},  {phase::kBackwardGatherA, Collective::AllGather},
      {phase::kBackwardWeightsA, Collective::AllReduce}, {"norm allreduce c", Collective::AllReduce},
      {"norm allreduce a", Collective::AllReduce},       {"loss allreduce a", Collective::AllReduce},
      {"loss allreduce c", Collective::AllReduce}};
  const CommStats& comm = world.stats();
  for (const auto& [name, kind] : comm_phases) {
    names.push_back(name);
    seconds.push_back(comm.get(name, kind).seconds - comm_before.get(name, kind).seconds);
  }
  std::vector<double> max = seconds, sum = seconds;
  all_reduce(world, max.data(), int64_t(max.size()), ReduceOp::Max, "report");
  all_reduce(world, sum.data(), int64_t(sum.size()), ReduceOp::Sum, "report");
  nlohmann::json j;
  double comm_max = 0, comm_mean = 0;
  for (size_t k = 0; k < names.size(); ++k) {
    const double mean = sum[k] / world.size();
    if (max[k] <= 0) continue;
    j[names[k]] = {{"max_s", max[k]}, {"mean_s", mean}, {"max_over_mean", mean > 0 ? max[k] / mean : 1.0}};
    if (k >= 3) comm_max += max[k], comm_mean += mean;
  }
  char text[256];
  auto ms = [&](size_t k) { return std::make_pair(1e3 * max[k], 1e3 * sum[k] / world.size()); };
  std::snprintf(
      text, sizeof(text),
      "      phases max/mean ms: spmm %.1f/%.1f  gemm %.1f/%.1f  loss %.1f/%.1f  collectives %.1f/%.1f",
      ms(0).first, ms(0).second, ms(1).first, ms(1).second, ms(2).first, ms(2).second, 1e3 * comm_max,
      1e3 * comm_mean);
  lines.push_back(text);
  return j;
}

std::vector<float> gather_logits(Model& model, const Matrix<const float>& logits, const Batch& batch,
                                 int64_t num_nodes) {
  const ActivationLayout& out = model.output_layout();
  const ProcessGrid& grid = model.grid();
  std::vector<float> all(size_t(num_nodes * out.width), 0.0f);
  // The block is replicated over one axis: its first replica contributes.
  if (grid.coords().get(out.replica_axis) == 0) {
    const auto x = Kokkos::create_mirror_view_and_copy(HostSpace(), logits);
    const LayerGraph& rows = batch.graph->layers.back();
    const auto ids = Kokkos::create_mirror_view_and_copy(HostSpace(), rows.output_ids);
    for (int64_t i = 0; i < rows.valid_rows; ++i)
      for (int64_t j = 0; j < int64_t(x.extent(1)) && out.col_begin + j < out.width; ++j)
        all[size_t(ids(i) * out.width + out.col_begin + j)] = x(i, size_t(j));
  }
  all_reduce(grid.replica(), all.data(), int64_t(all.size()), ReduceOp::Sum, "gather logits");
  return all;
}

}  // namespace tessera
