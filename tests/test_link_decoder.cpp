// SPDX-License-Identifier: BSD-3-Clause
// The MLP link decoder (MlpLinkDecoder) against a plain double-precision MLP on h_u * h_v: the loss, the
// embeddings' gradient, every decoder parameter's gradient and the splits' MRR on embeddings spread over
// every grid of the world's ranks (blocks of one row or none, columns split so that a rank may hold none),
// for pairs the loss draws and pairs a batch names as rows; a full-graph training run with the decoder that
// equals one rank's on every grid; refusals.
#include <gtest/gtest.h>

#include <tessera/tessera.hpp>

#include "support/final_weights.hpp"
#include "support/fixtures.hpp"
#include "support/link_files.hpp"
#include "support/link_reference.hpp"
#include "tessera/models/nn/random_streams.hpp"

namespace tessera {
namespace {

// The decoder in double: dense layers (in x out, row-major) from its gathered global parameters.
struct ReferenceMlp {
  std::vector<std::vector<double>> weight, bias;
  std::vector<int64_t> in, out;

  ReferenceMlp(const std::vector<float>& flat, int64_t width, const LinkDecoderOptions& o) {
    size_t at = 0;
    const int64_t hidden = o.hidden > 0 ? o.hidden : width;
    for (int l = 0; l < o.layers; ++l) {
      in.push_back(l == 0 ? width : hidden), out.push_back(l + 1 == o.layers ? 1 : hidden);
      weight.emplace_back(flat.begin() + int64_t(at), flat.begin() + int64_t(at + size_t(in[l] * out[l])));
      at += size_t(in[l] * out[l]);
      bias.emplace_back(flat.begin() + int64_t(at), flat.begin() + int64_t(at + size_t(out[l])));
      at += size_t(out[l]);
    }
    EXPECT_EQ(at, flat.size());
  }

  // The score of (u, v); with `d_score`, adds d(score)/d(every parameter) x d_score to `grads` (flat, in
  // parameter order) and returns d(score)/d(product) x d_score in `d_product`.
  double score(const Embeddings& h, int64_t u, int64_t v, double d_score = 0,
               std::vector<double>* grads = nullptr, std::vector<double>* d_product = nullptr) const {
    std::vector<std::vector<double>> x(1);
    for (size_t j = 0; j < h[size_t(u)].size(); ++j) x[0].push_back(h[size_t(u)][j] * h[size_t(v)][j]);
    std::vector<std::vector<double>> pre;
    for (size_t l = 0; l < weight.size(); ++l) {
      std::vector<double> a(bias[l]);
      for (int64_t k = 0; k < in[l]; ++k)
        for (int64_t j = 0; j < out[l]; ++j)
          a[size_t(j)] += x[l][size_t(k)] * weight[l][size_t(k * out[l] + j)];
      pre.push_back(a);
      for (double& value : a) value = std::max(value, 0.0);
      x.push_back(a);
    }
    if (grads == nullptr) return pre.back()[0];
    std::vector<size_t> offset;  // of each layer's weight in `grads`
    for (size_t l = 0, at = 0; l < weight.size(); ++l)
      offset.push_back(at), at += weight[l].size() + bias[l].size();
    std::vector<double> d_out{d_score};
    for (size_t l = weight.size(); l-- > 0;) {
      std::vector<double> d_in(size_t(in[l]), 0.0);
      for (int64_t j = 0; j < out[l]; ++j) {
        (*grads)[offset[l] + weight[l].size() + size_t(j)] += d_out[size_t(j)];
        for (int64_t k = 0; k < in[l]; ++k) {
          (*grads)[offset[l] + size_t(k * out[l] + j)] += x[l][size_t(k)] * d_out[size_t(j)];
          d_in[size_t(k)] += d_out[size_t(j)] * weight[l][size_t(k * out[l] + j)];
        }
      }
      if (l > 0)
        for (int64_t k = 0; k < in[l]; ++k) d_in[size_t(k)] *= pre[l - 1][size_t(k)] > 0 ? 1.0 : 0.0;
      d_out = std::move(d_in);
    }
    *d_product = d_out;
    return pre.back()[0];
  }
};

// The loss of labelled pairs under the reference, and its gradients: of the embeddings and of every decoder
// parameter (flat).
struct ReferenceLoss {
  double loss = 0;
  Embeddings grad;
  std::vector<double> parameter_grads;
};
ReferenceLoss reference_loss(const ReferenceMlp& mlp, const Embeddings& h, const NodePairs& pairs,
                             const std::vector<double>& labels, size_t parameter_values) {
  ReferenceLoss r{0, Embeddings(h.size(), std::vector<double>(h[0].size(), 0.0)),
                  std::vector<double>(parameter_values, 0.0)};
  for (int64_t e = 0; e < pairs.size(); ++e) {
    const int64_t u = pairs.source[size_t(e)], v = pairs.target[size_t(e)];
    const double s = mlp.score(h, u, v), y = labels[size_t(e)];
    r.loss += bce(s, y);
    std::vector<double> d_product;
    mlp.score(h, u, v, 1 / (1 + std::exp(-s)) - y, &r.parameter_grads, &d_product);
    for (size_t j = 0; j < d_product.size(); ++j)
      r.grad[size_t(u)][j] += d_product[j] * h[size_t(v)][j],
          r.grad[size_t(v)][j] += d_product[j] * h[size_t(u)][j];
  }
  return r;
}

double largest_difference(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]));
  return worst;
}

// The decoder on `grid` over `b`'s block: its first layer's rows split as the columns are, written by the
// first rank of the other axes.
std::shared_ptr<MlpLinkDecoder> decoder_on(const ProcessGrid& grid, const Block& b, int64_t width,
                                           const LinkDecoderOptions& o) {
  const LogitsLayout layout{&grid.axis(Axis::X), &grid.axis(Axis::Y), b.col_begin, width};
  const bool owner = grid.axis(Axis::X).rank() == 0 && grid.axis(Axis::Z).rank() == 0;
  return std::make_shared<MlpLinkDecoder>(layout, int64_t(b.logits.extent(1)), owner, o, 9);
}

const LinkDecoderOptions kShapes[] = {{3, 4}, {1, 0}};

}  // namespace

// Pairs the loss draws (rows gathered over the rows' axis): loss, gradients and MRR against the reference on
// every grid (13 nodes: on 8 ranks, blocks of one row or none; 5 columns over 4 ranks: one rank holds none).
TEST(MlpLinkDecoder, LossGradientsAndScoresEqualTheReferenceOnEveryGrid) {
  const Communicator world = Communicator::world();
  const int64_t n = 13, width = 5, step_key = 3, k = 2;
  const Embeddings h = random_embeddings(n, width, 31);
  const std::shared_ptr<LinkTask> task = random_task(n, 12);
  NodePairs pairs = task->train;
  std::vector<double> labels(size_t(pairs.size()), 1.0);
  const CounterRng rng(7, streams::kLinkNegatives);
  for (int64_t i = 0; i < task->train.size(); ++i)
    for (int64_t d = 0; d < k; ++d)
      pairs.source.push_back(task->train.source[size_t(i)]),
          pairs.target.push_back(int64_t(rng.below(step_key, uint64_t(i * k + d), uint64_t(n)))),
          labels.push_back(0);
  for (const LinkDecoderOptions& shape : kShapes) {
    std::vector<float> first_weights;
    for (const GridShape& grid_shape : ProcessGrid::factorizations(world.size(), false)) {
      SCOPED_TRACE(std::to_string(shape.layers) + " layers on " + grid_shape.str());
      const ProcessGrid grid(world, grid_shape);
      const Block b = block_of(h, grid);
      const std::shared_ptr<MlpLinkDecoder> decoder = decoder_on(grid, b, width, shape);
      const std::vector<float> weights = gather_global(decoder->parameters(), world, false);
      if (first_weights.empty()) first_weights = weights;
      EXPECT_EQ(weights, first_weights);  // every grid draws the same global matrices
      const ReferenceMlp mlp(weights, width, shape);
      const ReferenceLoss want = reference_loss(mlp, h, pairs, labels, weights.size());
      HostVector<int64_t> nodes("nodes", b.nodes.size());
      std::copy(b.nodes.begin(), b.nodes.end(), nodes.data());
      const LogitsLayout layout{&grid.axis(Axis::X), &grid.axis(Axis::Y), b.col_begin, width};
      const LossInput in{
          layout, b.logits, {}, {}, {}, Kokkos::create_mirror_view_and_copy(DeviceSpace(), nodes), step_key};
      LinkLoss link(task, LinkLossOptions{7, k, MetricKind::Auto});
      link.set_decoder(decoder);
      EXPECT_EQ(link.parameters().size(), size_t(2 * shape.layers));
      const Matrix<float> g("grad", b.logits.extent(0), b.logits.extent(1));
      const LossSum s = link.sum_and_gradient(in, g);
      EXPECT_EQ(s.count, pairs.size());
      EXPECT_NEAR(s.sum, want.loss, 1e-9 * want.loss);
      EXPECT_LT(gradient_error(b, g, want.grad), 1e-5);
      EXPECT_LT(largest_difference(gather_global(decoder->parameters(), world, true), want.parameter_grads),
                1e-5);
      // MRR of each split against its own negatives, from the reference's scores.
      const SplitScores scores = *link.score_splits(in);
      for (const auto& [split, got] :
           {std::make_pair(&task->valid, scores.valid), std::make_pair(&task->test, scores.test)}) {
        std::vector<double> pos, own;
        for (int64_t e = 0; e < split->positives.size(); ++e) {
          const int64_t u = split->positives.source[size_t(e)];
          pos.push_back(mlp.score(h, u, split->positives.target[size_t(e)]));
          for (int64_t j = 0; j < split->negatives_per_edge; ++j)
            own.push_back(
                mlp.score(h, u, split->negative_targets[size_t(e * split->negatives_per_edge + j)]));
        }
        EXPECT_NEAR(got, mrr(pos, own, size_t(split->negatives_per_edge)), 1e-12);
      }
      const std::vector<double> scored = score_node_pairs(in, task->test.positives, decoder.get());
      for (int64_t e = 0; e < task->test.positives.size(); ++e)
        EXPECT_NEAR(
            scored[size_t(e)],
            mlp.score(h, task->test.positives.source[size_t(e)], task->test.positives.target[size_t(e)]),
            1e-9);
    }
  }
}

// Pairs a batch names as rows (the sampled mode's steps), on every grid whose rows axis is one rank.
TEST(MlpLinkDecoder, PairsNamedAsRowsEqualTheReference) {
  const Communicator world = Communicator::world();
  const int64_t n = 13, width = 5;
  const Embeddings h = random_embeddings(n, width, 41);
  std::mt19937_64 gen(6);
  const NodePairs named = random_pairs(30, n, gen);
  std::vector<double> labels;
  for (int64_t e = 0; e < named.size(); ++e) labels.push_back(e % 3 == 0 ? 1 : 0);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    const ProcessGrid grid(world, shape);
    if (grid.axis(Axis::X).size() > 1) continue;
    SCOPED_TRACE(shape.str());
    const Block b = block_of(h, grid);
    const RowPairs pairs = pairs_as_rows(b, named, labels);
    const std::shared_ptr<MlpLinkDecoder> decoder = decoder_on(grid, b, width, kShapes[0]);
    const std::vector<float> weights = gather_global(decoder->parameters(), world, false);
    const ReferenceLoss want =
        reference_loss(ReferenceMlp(weights, width, kShapes[0]), h, named, labels, weights.size());
    LossInput in{
        LogitsLayout{&grid.axis(Axis::X), &grid.axis(Axis::Y), b.col_begin, width}, b.logits, {}, {}, {}};
    in.pairs = &pairs;
    LinkLoss link(random_task(n, 1), LinkLossOptions{});
    link.set_decoder(decoder);
    const Matrix<float> g("grad", b.logits.extent(0), b.logits.extent(1));
    const LossSum s = link.sum_and_gradient(in, g);
    EXPECT_NEAR(s.sum, want.loss, 1e-9 * want.loss);
    EXPECT_LT(gradient_error(b, g, want.grad), 1e-5);
    EXPECT_LT(largest_difference(gather_global(decoder->parameters(), world, true), want.parameter_grads),
              1e-5);
  }
}

// Training with the decoder (its parameters in the optimizer, checkpoints and the best state through the
// model): three epochs on every grid equal one rank's, the decoder's final weights included.
TEST(MlpLinkDecoder, FullGraphTrainingIsTheSameOnEveryGrid) {
  const Communicator world = Communicator::world();
  const std::vector<std::vector<int64_t>> targets = three_targets_each(8);
  TrainOptions o = link_run_options(link_file("decoder-links.h5", {{"/link/train/edges", pair_rows(60, 1)},
                                                                   {"/link/valid/edges", pair_rows(8, 2)},
                                                                   {"/link/valid/negative_targets", targets},
                                                                   {"/link/test/edges", pair_rows(8, 3)},
                                                                   {"/link/test/negative_targets", targets}}),
                                    5);
  o.task.link_decoder = LinkDecoderKind::Mlp;
  o.task.link_decoder_layers = 3;
  const Communicator self = world.split(world.rank(), 0);
  const fixtures::RunWithWeights one = fixtures::run_training_with_weights(o, self);
  ASSERT_EQ(one.history.size(), 3u);
  EXPECT_LT(one.history.back().loss, one.history.front().loss);
  for (const GridShape& shape : ProcessGrid::factorizations(world.size(), false)) {
    SCOPED_TRACE(shape.str());
    o.grid.shape = shape;
    const fixtures::RunWithWeights got = fixtures::run_training_with_weights(o, world);
    ASSERT_EQ(got.history.size(), 3u);
    for (size_t e = 0; e < 3; ++e) {
      EXPECT_NEAR(got.history[e].loss, one.history[e].loss, 1e-5 * one.history[e].loss);
      EXPECT_NEAR(got.history[e].valid_acc, one.history[e].valid_acc, 1e-6);
    }
    ASSERT_EQ(got.final_weights.size(), one.final_weights.size());
    for (size_t i = 0; i < got.final_weights.size(); ++i)
      EXPECT_NEAR(got.final_weights[i], one.final_weights[i], 1e-5) << i;
  }
}

// What cannot be built is refused in one line.
TEST(MlpLinkDecoder, RefusesWhatItCannotBuild) {
  EXPECT_THROW((LinkDecoderOptions{0, 4}.validate()), Error);
  EXPECT_THROW((LinkDecoderOptions{2, -1}.validate()), Error);
  EXPECT_THROW(link_decoder_options_from("mlp decoder 2x"), Error);
  EXPECT_THROW(link_decoder_options_from("mlp decoder 0x16"), Error);
  const LinkDecoderOptions read = link_decoder_options_from("mlp decoder 3x16");
  EXPECT_EQ(read.layers, 3);
  EXPECT_EQ(read.hidden, 16);
  const Communicator self = Communicator::world().split(Communicator::world().rank(), 0);
  const ProcessGrid grid(self, GridShape{});
  Sequential model(grid, 4);
  model.add<GcnConv>(3);
  const auto decoder = make_link_decoder(model, LinkDecoderOptions{});
  model.attach(decoder);
  EXPECT_EQ(model.describe(), "gcn 4 -> 3 + mlp decoder 2x3");
  EXPECT_THROW(model.attach(decoder), Error);  // its parameters' names again
}

}  // namespace tessera
