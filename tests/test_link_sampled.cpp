// SPDX-License-Identifier: BSD-3-Clause
// Link training in the sampled mode against the full-graph mode (itself tested against a dense reference
// in test_link.cpp): with every neighbour kept and one step per epoch, each epoch's loss and scores are
// the full-graph run's on one rank, on every rank count (parts of a few nodes, ranks without pairs); under
// a partition that renumbers the nodes, the scores and the node embeddings written are the full-graph
// run's; a run of many small steps resumes bit for bit. The same with the MLP decoder.
#include <gtest/gtest.h>

#include <tessera/tessera.hpp>

#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "support/link_files.hpp"
#include "tessera/graph/partition.hpp"

namespace tessera {
namespace {

const Communicator& world() {
  static const Communicator w = Communicator::world();
  return w;
}

// Link splits of every kind: valid ranked against its own negatives, test against both (MRR).
const std::string& links_file() {
  static const std::string path = [] {
    const std::vector<std::vector<int64_t>> targets = three_targets_each(8);
    return link_file("sampled-links.h5", {{"/link/train/edges", pair_rows(60, 1)},
                                          {"/link/valid/edges", pair_rows(8, 2)},
                                          {"/link/valid/negative_targets", targets},
                                          {"/link/test/edges", pair_rows(8, 3)},
                                          {"/link/test/negative_targets", targets},
                                          {"/link/test/negatives", pair_rows(12, 4)}});
  }();
  return path;
}

TrainOptions link_options(TrainMode mode) {
  TrainOptions o = link_run_options(links_file(), 4);
  o.mode = mode;
  o.task.link_negatives = 2;
  o.sampled.fanouts = {-1, -1};
  o.sampled.batch_size = 1000;  // every pair of a rank in one step
  o.sampled.partition = "block";
  return o;
}

void expect_same_epochs(const TrainResult& got, const TrainResult& full) {
  ASSERT_EQ(got.history.size(), full.history.size());
  for (size_t e = 0; e < got.history.size(); ++e) {
    SCOPED_TRACE("epoch " + std::to_string(e + 1));
    const EpochRecord &a = got.history[e], &b = full.history[e];
    EXPECT_NEAR(a.loss, b.loss, 1e-5 * b.loss);
    EXPECT_NEAR(a.train_acc, b.train_acc, 1e-6);
    EXPECT_NEAR(a.valid_acc, b.valid_acc, 1e-6);
    EXPECT_NEAR(a.test_acc, b.test_acc, 1e-6);
    EXPECT_NEAR(a.valid_loss, b.valid_loss, 1e-5 * b.valid_loss);
  }
}

}  // namespace

// Every neighbour and one step per epoch: a sampled step is a full-graph step (the pairs split over the
// ranks by their first node, the negatives keyed alike).
// With the MLP decoder too: its gradients, summed over the replicas, weighed as the embeddings'.
TEST(SampledLinks, EveryNeighbourIsTheFullGraphRunOnEveryRankCount) {
  const Communicator self = world().split(world().rank(), 0);
  for (const LinkDecoderKind decoder : {LinkDecoderKind::Dot, LinkDecoderKind::Mlp}) {
    SCOPED_TRACE(name_of(kLinkDecoderKindNames, decoder));
    TrainOptions o = link_options(TrainMode::Full);
    o.task.link_decoder = decoder;
    const fixtures::RunWithWeights full = fixtures::run_training_with_weights(o, self);
    EXPECT_EQ(full.history.at(0).metric, "mrr");
    o.mode = TrainMode::Sampled;
    const fixtures::RunWithWeights sampled = fixtures::run_training_with_weights(o, world());
    expect_same_epochs(sampled, full);
    ASSERT_EQ(sampled.final_weights.size(), full.final_weights.size());
    for (size_t i = 0; i < full.final_weights.size(); ++i)
      EXPECT_NEAR(sampled.final_weights[i], full.final_weights[i], 1e-5) << i;
  }
}

// A random partition renumbers every node: the pairs are renumbered with it, so the validation and test
// scores (learning rate 0) and the embeddings written, in the file's node order, are the full-graph run's.
TEST(SampledLinks, ARenumberingPartitionScoresAndWritesTheSameNodes) {
  const std::string name = "random-" + std::to_string(world().size());
  const std::string& path = links_file();  // collective: made by every rank
  world().run_on(0, [&] {
    const std::vector<int32_t> part = compute_partition(path, world().size(), PartitionMethod::Random, 3);
    write_partition(path, name, part, world().size(), PartitionMethod::Random,
                    evaluate_partition(path, part, world().size()));
  });
  TrainOptions o = link_options(TrainMode::Full);
  o.trainer.optimizer.lr = 0;
  o.trainer.epochs = 1;
  o.outputs.keep_node_outputs = true;
  const Communicator self = world().split(world().rank(), 0);
  const TrainResult full = run_training(o, self);
  o.mode = TrainMode::Sampled;
  o.sampled.partition = name;
  const TrainResult sampled = run_training(o, world());
  ASSERT_EQ(sampled.history.size(), 1u);
  EXPECT_NEAR(sampled.history[0].valid_acc, full.history[0].valid_acc, 1e-6);
  EXPECT_NEAR(sampled.history[0].test_acc, full.history[0].test_acc, 1e-6);
  // (The training pairs' MRR ranks them against targets drawn as node ids: other nodes once renumbered.)
  ASSERT_TRUE(sampled.node_outputs && full.node_outputs);
  const NodeOutputArrays &got = *sampled.node_outputs, &all = *full.node_outputs;
  ASSERT_EQ(got.width, 4);
  ASSERT_EQ(all.width, 4);
  ASSERT_EQ(all.embeddings.size(), size_t(37 * 4));
  for (size_t k = 0; k < got.embeddings.size(); ++k)
    EXPECT_NEAR(got.embeddings[k], all.embeddings[size_t(got.begin * 4) + k], 1e-5) << "entry " << k;
}

// Neighbourhoods of two, steps of a few pairs (some ranks' steps empty): the run resumes bit for bit, the
// MLP decoder's parameters and optimizer state with the model's.
TEST(SampledLinks, ManySmallStepsResumeBitForBit) {
  TrainOptions o = link_options(TrainMode::Sampled);
  o.task.link_decoder = LinkDecoderKind::Mlp;
  o.sampled.fanouts = {2, 2};
  o.sampled.batch_size = 4;
  o.trainer.epochs = 4;
  const fixtures::RunWithWeights straight = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(straight.history.size(), 4u);
  EXPECT_LT(straight.history.back().loss, straight.history.front().loss);
  o.checkpoint.dir = fixtures::scratch_dir();
  o.trainer.epochs = 2;
  run_training(o, world());
  o.trainer.epochs = 4;
  o.checkpoint.resume = true;
  const fixtures::RunWithWeights resumed = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(resumed.history.size(), 2u);
  for (size_t e = 0; e < 2; ++e) EXPECT_EQ(resumed.history[e].loss, straight.history[e + 2].loss);
  EXPECT_EQ(resumed.final_weights, straight.final_weights);
}

// bf16 features in a link task: the run (losses, scores, final weights) is the fp32 run on the file whose
// features were rounded beforehand, bit for bit.
TEST(SampledLinks, Bf16FeaturesTrainAsTheRoundedFile) {
  TrainOptions o = link_options(TrainMode::Sampled);
  o.sampled.fanouts = {3, 2};
  o.sampled.batch_size = 7;
  o.data = fixtures::rounded_features_copy(links_file(), "sampled-links-rounded.h5");
  const fixtures::RunWithWeights reference = fixtures::run_training_with_weights(o, world());
  o.data = links_file();
  o.feature_dtype = StorageDtype::Bf16;
  const fixtures::RunWithWeights r = fixtures::run_training_with_weights(o, world());
  ASSERT_EQ(r.history.size(), reference.history.size());
  for (size_t e = 0; e < r.history.size(); ++e) {
    EXPECT_EQ(r.history[e].loss, reference.history[e].loss);
    EXPECT_EQ(r.history[e].valid_acc, reference.history[e].valid_acc);
  }
  EXPECT_EQ(r.final_weights, reference.final_weights);
}

}  // namespace tessera
