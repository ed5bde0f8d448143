// SPDX-License-Identifier: BSD-3-Clause
// The sampled mode's exact passes: evaluation and node outputs by layer-wise inference (layerwise.hpp)
// over the training partition, every neighbour of every node, instead of sampled neighbourhoods.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/models/modes/layerwise.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/modes/sampled_state.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/models/training/node_outputs.hpp"

namespace tessera {

namespace {

// The model as the Sequential layer-wise inference runs stage by stage (null: another Model).
Sequential* stages_of(Model& model) {
  return dynamic_cast<Sequential*>(&model);
}

// The rows of `nodes` (owned new ids) as a mask over every owned row.
Vector<uint8_t> mask_of(const PartitionedGraph& g, const std::vector<int64_t>& nodes) {
  HostVector<uint8_t> mask("exact.mask", size_t(g.count));
  for (int64_t v : nodes) mask(size_t(v - g.first)) = 1;
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), mask);
}

}  // namespace

bool SampledSource::exact_fits(Model& model) {
  Sequential* stages = stages_of(model);
  int ok = stages != nullptr;
  if (ok) {
    const AvailableMemory node = available_memory();
    const int sharing = thread_choice().known ? std::max(1, thread_choice().node_ranks) : 1;
    ok = node.bytes < 0 || layerwise_bytes(graph_, *stages) <= node.bytes / sharing;
  }
  ok = all_reduce_value(world_, ok, ReduceOp::Min, "eval");
  if (!ok && exact_refused_ < 0)
    log_line(stages_of(model) == nullptr
                 ? "exact evaluation needs a Sequential model: evaluating on sampled neighbourhoods"
                 : "exact (layer-wise) evaluation does not fit in the memory of every rank: evaluating on "
                   "sampled neighbourhoods");
  exact_refused_ = !ok;
  return ok;
}

Accuracy SampledSource::evaluate_exact(Model& model, Loss& loss) {
  if (s_->links) return evaluate_links(model, loss);
  Sequential* stages = stages_of(model);
  require(stages != nullptr, "exact evaluation needs a Sequential model");
  LayerwiseOptions options;
  options.progress = false;
  const LayerwiseResult r = layerwise_inference(*stages, graph_, world_, normalization_, options);
  // Every owned node's logits as one batch of this rank's rows; the ranks' rows together are every node.
  const Matrix<float> logits("exact.logits", size_t(graph_.count), size_t(r.classes));
  Kokkos::deep_copy(logits,
                    HostMatrix<const float>(r.logits.data(), size_t(graph_.count), size_t(r.classes)));
  const Vector<int64_t> labels("exact.labels", size_t(graph_.count));
  Kokkos::deep_copy(labels, HostVector<const int64_t>(graph_.labels.data(), size_t(graph_.count)));
  Matrix<const int8_t> targets;
  if (graph_.multi_label)
    targets = kernel_view(graph_.targets, size_t(graph_.count), size_t(graph_.num_classes), "exact.targets");
  const ActivationLayout& out = model.output_layout();
  const LogitsLayout layout{&model.grid().axis(out.rows_axis), &model.grid().axis(out.cols_axis),
                            out.col_begin, out.width};
  const std::unique_ptr<Metric> metric = loss.metric();
  auto score = [&](const std::vector<int64_t>& nodes) {
    metric->add(LossInput{layout, logits, labels, mask_of(graph_, nodes), targets});
    return metric->value(layout, world_);
  };
  Accuracy a;
  a.metric = metric->name();
  a.train = score(graph_.train);
  a.valid = score(graph_.valid);
  a.test = score(graph_.test);
  const Matrix<float> unused("exact.grad", size_t(graph_.count), size_t(r.classes));
  const LossSum valid = loss.sum_and_gradient(
      LossInput{layout, logits, labels, mask_of(graph_, graph_.valid), targets}, unused);
  double sums[2] = {valid.sum, double(valid.count)};
  all_reduce(world_, sums, 2, ReduceOp::Sum, "eval");
  a.valid_loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  return a;
}

void SampledSource::write_exact_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) {
  Sequential& stages = *stages_of(model);  // exact_fits said it is one
  LayerwiseOptions options;
  options.progress = false;
  options.keep_layer = stages.graph_layers() - 1;
  const LayerwiseResult r = layerwise_inference(stages, graph_, world_, normalization_, options);
  NodeClasses classes;
  NodeRowBlock rows;
  // A link task's embeddings are the model's output (what its pairs are scored by).
  rows.cols = paths.link_task ? r.classes : r.kept_width;
  rows.values = paths.link_task ? r.logits : r.kept;
  for (int64_t i = 0; i < graph_.count; ++i) {
    const float* z = r.logits.data() + i * r.classes;
    classes.nodes.push_back(graph_.file_id[size_t(i)]);
    classes.classes.push_back(std::max_element(z, z + r.classes) - z);
    rows.nodes.push_back(graph_.file_id[size_t(i)]);
  }
  const OutputOrder order = read_output_order(world_, paths.graph);
  // A multi-label graph has no class per node to write (train refuses `save-predictions` for one).
  if (paths.want_predictions() && !graph_.multi_label)
    output_predictions(world_, paths, graph_.num_nodes, classes, order);
  if (paths.want_embeddings())
    output_embeddings(world_, paths, graph_.num_nodes, rows.cols, rows, model.describe(), epoch + 1, order);
}

}  // namespace tessera
