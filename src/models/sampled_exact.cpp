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
#include "tessera/models/layerwise.hpp"
#include "tessera/models/node_outputs.hpp"
#include "tessera/models/sampled.hpp"

namespace tessera {

namespace {

// The model as the Sequential layer-wise inference runs stage by stage (null: another Model).
Sequential* stages_of(Model& model) {
  return dynamic_cast<Sequential*>(&model);
}

// Correct predictions, labeled nodes and summed cross-entropy of `nodes` (owned new ids).
void count_on(const PartitionedGraph& g, const LayerwiseResult& r, const std::vector<int64_t>& nodes,
              double* counts) {
  const int64_t c = r.classes;
  for (int64_t v : nodes) {
    const size_t i = size_t(v - g.first);
    const int64_t label = g.labels[i];
    if (label < 0) continue;
    const float* z = r.logits.data() + i * size_t(c);
    const float* top = std::max_element(z, z + c);
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(double(z[j]) - double(*top));
    counts[0] += (top - z) == label;
    counts[1] += 1;
    counts[2] += std::log(sum) - (double(z[label]) - double(*top));
  }
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

Accuracy SampledSource::evaluate_exact(Model& model) {
  Sequential* stages = stages_of(model);
  require(stages != nullptr, "exact evaluation needs a Sequential model");
  LayerwiseOptions options;
  options.progress = false;
  const LayerwiseResult r = layerwise_inference(*stages, graph_, world_, normalization_, options);
  double counts[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};  // correct, labeled, loss for train, valid, test
  count_on(graph_, r, graph_.train, counts);
  count_on(graph_, r, graph_.valid, counts + 3);
  count_on(graph_, r, graph_.test, counts + 6);
  all_reduce(world_, counts, 9, ReduceOp::Sum, "eval");
  const auto share = [](double part, double whole) { return whole > 0 ? part / whole : 0.0; };
  Accuracy a;
  a.train = share(counts[0], counts[1]);
  a.valid = share(counts[3], counts[4]);
  a.test = share(counts[6], counts[7]);
  a.valid_loss = share(counts[5], counts[4]);
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
  rows.cols = r.kept_width;
  rows.values = r.kept;
  for (int64_t i = 0; i < graph_.count; ++i) {
    const float* z = r.logits.data() + i * r.classes;
    classes.nodes.push_back(graph_.file_id[size_t(i)]);
    classes.classes.push_back(std::max_element(z, z + r.classes) - z);
    rows.nodes.push_back(graph_.file_id[size_t(i)]);
  }
  const OutputOrder order = read_output_order(world_, paths.graph);
  if (!paths.predictions.empty())
    write_predictions(world_, paths.predictions, graph_.num_nodes, classes, order);
  if (!paths.embeddings.empty())
    write_embeddings(world_, paths.embeddings, graph_.num_nodes, r.kept_width, rows, model.describe(),
                     epoch + 1, order);
}

}  // namespace tessera
