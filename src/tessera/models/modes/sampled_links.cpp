// SPDX-License-Identifier: BSD-3-Clause
// Link training in the sampled mode (the DistDGL way): each rank steps through the training pairs whose
// first node it owns, draws their negatives as the full-graph loss does, samples the neighbourhoods of
// every endpoint (any rank's nodes) and names each pair by its endpoints' rows among the step's seeds.
// Evaluation scores every split on exact (layer-wise) embeddings of every node.
#include <algorithm>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/models/modes/layerwise.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/modes/sampled_state.hpp"

namespace tessera {

void SampledSource::train_links(std::shared_ptr<const LinkTask> task, int64_t negatives) {
  require(task != nullptr, "train_links: no task");
  require(negatives >= 1, "`link-negatives` must be at least 1, not ", negatives);
  State& s = *s_;
  s.links = std::move(task);
  s.link_negatives = negatives;
  s.own_pairs.clear();
  const NodePairs& train = s.links->train;
  for (int64_t i = 0; i < train.size(); ++i)
    if (graph_.owns(train.source[size_t(i)])) s.own_pairs.push_back(i);
  const int64_t most = all_reduce_value(world_, int64_t(s.own_pairs.size()), ReduceOp::Max, "load");
  const int64_t batch = s.o.batch_size;
  steps_ = s.o.steps_per_epoch > 0 ? s.o.steps_per_epoch : std::max<int64_t>(1, (most + batch - 1) / batch);
  s.steps = steps_;
  if (s.device) {  // the device builder samples owned seeds only
    s.device.reset();
    thread_reason_ = "link steps are built on the host";
  }
}

PreparedStep SampledSource::State::prepare_link(int64_t epoch, int64_t step) {
  if (pairs_epoch != epoch) {  // the epoch's shuffle of this rank's pairs
    pairs_order = shuffled_pairs(seed, epoch, own_pairs);
    pairs_epoch = epoch;
  }
  const int64_t n = int64_t(pairs_order.size());
  const std::vector<int64_t> chosen(pairs_order.begin() + n * step / steps,
                                    pairs_order.begin() + n * (step + 1) / steps);
  // Positives, then each one's negatives, keyed as the full-graph loss keys them (its pass key).
  const NodePairs& train = links->train;
  NodePairs pairs;
  for (int64_t i : chosen)
    pairs.source.push_back(train.source[size_t(i)]), pairs.target.push_back(train.target[size_t(i)]);
  const int64_t key = epoch * steps + step;
  for (int64_t i : chosen)
    for (int64_t d = 0; d < link_negatives; ++d) {
      pairs.source.push_back(train.source[size_t(i)]);
      pairs.target.push_back(link_negative_target(seed, key, i, link_negatives, d, links->num_nodes));
    }
  std::vector<int64_t> seeds(pairs.source);
  seeds.insert(seeds.end(), pairs.target.begin(), pairs.target.end());
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
  PreparedStep p = prepare(*sampler, *fetch, seeds, epoch, step, true);
  const auto row = [&seeds](int64_t v) {
    return int64_t(std::lower_bound(seeds.begin(), seeds.end(), v) - seeds.begin());
  };
  for (int64_t e = 0; e < pairs.size(); ++e) {
    p.pairs.source.push_back(row(pairs.source[size_t(e)]));
    p.pairs.target.push_back(row(pairs.target[size_t(e)]));
    p.pairs.label.push_back(e < int64_t(chosen.size()) ? 1 : 0);
  }
  return p;
}

Accuracy SampledSource::evaluate_links(Model& model, Loss& loss) {
  world_.check(exact_fits(model),
               "a link task in `mode` sampled is evaluated on exact (layer-wise) "
               "embeddings of every node, which do not fit in the memory of every rank");
  LayerwiseOptions options;
  options.progress = false;
  const LayerwiseResult r =
      layerwise_inference(*dynamic_cast<Sequential*>(&model), graph_, world_, normalization_, options);
  // Every owned node's embedding, rows over the ranks (each rank its own), columns whole.
  const Matrix<float> logits("links.embeddings", size_t(graph_.count), size_t(r.classes));
  Kokkos::deep_copy(logits,
                    HostMatrix<const float>(r.logits.data(), size_t(graph_.count), size_t(r.classes)));
  const Vector<int64_t> nodes("links.nodes", size_t(graph_.count));
  const auto host_nodes = Kokkos::create_mirror_view(HostSpace(), nodes);
  for (int64_t i = 0; i < graph_.count; ++i) host_nodes(size_t(i)) = graph_.first + i;
  Kokkos::deep_copy(nodes, host_nodes);
  const ActivationLayout& out = model.output_layout();
  const LogitsLayout layout{&world_, &model.grid().axis(out.cols_axis), out.col_begin, out.width};
  const std::optional<SplitScores> s = loss.score_splits(LossInput{layout, logits, {}, {}, {}, nodes});
  require(s.has_value(), "a link task trains with a link loss (LinkLoss)");
  return Accuracy{s->train, s->valid, s->test, s->valid_loss, s->metric};
}

}  // namespace tessera
