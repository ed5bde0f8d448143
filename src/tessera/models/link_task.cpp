// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/link_task.hpp"

#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/models/train.hpp"

namespace tessera {

std::unique_ptr<LinkLoss> link_loss_of(const TrainOptions& o, const GraphFileReader& reader,
                                       const Communicator& world) {
  auto task = std::make_shared<const LinkTask>(read_link_task(reader, world));
  std::unique_ptr<LinkLoss> loss;
  world.run_agreed([&] {
    loss = std::make_unique<LinkLoss>(
        task, LinkLossOptions{o.model.seed, o.task.link_negatives, o.task.metric, o.task.link_batch});
  });
  return loss;
}

std::vector<std::vector<int64_t>*> link_task_ids(LinkTask& task) {
  std::vector<std::vector<int64_t>*> ids = {&task.train.source, &task.train.target};
  for (LinkEvaluationSplit* s : {&task.valid, &task.test})
    ids.insert(ids.end(), {&s->positives.source, &s->positives.target, &s->shared_negatives.source,
                           &s->shared_negatives.target, &s->negative_targets});
  return ids;
}

void attach_link_decoder(const TrainOptions& o, Sequential& model, LinkLoss& loss) {
  if (o.task.link_decoder != LinkDecoderKind::Mlp) return;
  const auto decoder =
      make_link_decoder(model, LinkDecoderOptions{o.task.link_decoder_layers, o.task.link_decoder_hidden});
  model.attach(decoder);
  loss.set_decoder(decoder);
}

bool is_link_task(const TrainOptions& o, const GraphMeta& meta) {
  if (o.task.kind == TaskKind::Auto) return meta.link_splits && meta.num_classes == 0;
  return o.task.kind == TaskKind::Link;
}

int64_t embedding_width(const TrainOptions& o) {
  return o.task.embedding_dim > 0 ? o.task.embedding_dim : o.model.hidden;
}

void check_link_task(const TrainOptions& o, const GraphMeta& meta) {
  require(meta.link_splits, "`task` link: ", o.data, " has no link splits (/link; tessera.convert ",
          "--link-split makes them)");
  require(o.mode != TrainMode::Minibatch, "`task` link trains in `mode` full or sampled (mini-batch link ",
          "training is not built yet)");
  require(o.mode == TrainMode::Full || o.task.link_batch == 0, "`link-batch` is for `mode` full; ",
          "`mode` sampled steps through `batch-size` pairs per rank");
  require(o.task.positive_weight.empty(),
          "`pos-weight` weighs a multi-label graph's labels, not a link task");
  require(o.outputs.predictions.empty(), "`save-predictions` writes a class per node; a link task has none");
  LinkDecoderOptions{o.task.link_decoder_layers, o.task.link_decoder_hidden}.validate();
  require(
      o.task.link_decoder == LinkDecoderKind::Mlp ||
          (o.task.link_decoder_layers == 2 && o.task.link_decoder_hidden == 0),
      "`link-decoder-layers` and `link-decoder-hidden` shape `link-decoder` mlp; this run scores pairs by ",
      "the dot product");
}

}  // namespace tessera
