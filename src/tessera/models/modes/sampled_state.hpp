// SPDX-License-Identifier: BSD-3-Clause
// The sampled mode's state between steps (private to models/modes): a prepared step in plain host memory
// and what the batch source keeps across steps. Shared by the source's files (sampled_source.cpp, the
// exact passes, link training).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/modes/step_uploads.hpp"
#include "tessera/models/nn/link_loss.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/prefetch/remote_features.hpp"
#include "tessera/sampling/pipeline.hpp"

namespace tessera {

// Everything a step needs from the sampler and the fetch, in plain host memory.
struct PreparedStep {
  std::vector<int64_t> seeds, labels;
  std::vector<int8_t> targets;  // a multi-label graph's seeds' tasks, seeds x num_classes
  std::vector<SampledBlock> blocks;
  std::vector<DeviceSampledSteps::Shape> shapes;  // per layer, also where the blocks were built on the device
  std::vector<HostCsr> forward, transpose;        // per layer (transpose: 0 x 0 where not built)
  std::vector<bool> transposed;  // per layer: its transposes built (a training step's BatchNeeds::transposes)
  std::vector<float> features;   // blocks[0].src.size() x F
  FetchStats fetch;
  bool evicted = false;
  std::string controller = "none";
  double sample_s = 0;
  double gather_s = 0;  // every input row: local copies, cache hits and the fetch (fetch.seconds)
  RowPairs pairs;       // a link step's pairs as rows of its seeds (empty: a node step)
};

struct SampledSource::State {
  const PartitionedGraph& g;
  const ProcessGrid& grid;
  const Communicator& world;
  SampledOptions o;
  Normalization normalization;
  BatchNeeds needs;  // self blocks, and which layers' transposes training steps build
  uint64_t seed;
  EpochSeeds training_seeds;  // used by the thread that builds training steps only
  Communicator worker;        // the worker thread's traffic
  std::unique_ptr<NeighborSampler> sampler, eval_sampler;
  std::unique_ptr<RemoteFeatures> fetch, eval_fetch;
  std::unique_ptr<FeatureCache> cache;
  std::unique_ptr<PrefetchController> controller;
  std::unique_ptr<DeviceSampledSteps> device;  // training steps built in kernels (SamplePlace::Device)
  // A link task (SampledSource::train_links): its pairs in the partition's ids, the negatives per pair,
  // this rank's pairs (indices of those whose first node it owns) and the epoch's order of them (used by
  // the thread that builds training steps only). The worker thread reads them: declared before the
  // pipeline, whose destructor waits for it.
  std::shared_ptr<const LinkTask> links;
  int64_t link_negatives = 1;
  std::vector<int64_t> own_pairs;
  int64_t pairs_epoch = -1;
  std::vector<int64_t> pairs_order;
  // The features of the step before the current one, for the next training step's gather to reuse: a fresh
  // buffer each step had every page zeroed by the kernel on first touch. The worker thread takes it, so it
  // is declared before the pipeline, whose destructor waits for the worker.
  std::mutex spare_mutex;
  std::vector<float> spare_features;
  BatchPipeline<PreparedStep> pipeline;
  std::pair<int64_t, int64_t> requested{-1, -1};
  int64_t steps = 0, halo_total = 0, fill_bytes = 0;
  // The step on the device: views over uploaded blocks, features in buffers that grow with headroom.
  PreparedStep current;
  GraphBatch views;
  StepUploads uploads;  // the blocks and id lists of `views`, in buffers kept between steps
  Matrix<float> x_capacity;
  Vector<int64_t> labels_capacity;
  Matrix<int8_t> targets_capacity;
  Vector<uint8_t> ones_capacity;
  Batch batch;
  std::unique_ptr<Metric> train_metric;  // the epoch's training steps, in the loss's metric (observe)
  Matrix<float> eval_grad;               // the loss's gradient in evaluation, unused; kept between rounds
  // The counters, then kShapeCounters per graph layer (from the first step on).
  std::vector<double> epoch_sums;  // sized by the source's constructor
  double waited_before = 0, upload_s = 0;

  State(const PartitionedGraph& graph, const ProcessGrid& grid, const Communicator& world,
        const SampledOptions& options, Normalization normalization, const BatchNeeds& needs, uint64_t seed,
        bool thread)
      : g(graph),
        grid(grid),
        world(world),
        o(options),
        normalization(normalization),
        needs(needs),
        seed(seed),
        training_seeds(graph.train, graph.labels, graph.first, seed),
        worker(world.dup(false)),
        pipeline(thread) {}

  PreparedStep prepare(const NeighborSampler& s, const RemoteFeatures& f, const std::vector<int64_t>& seeds,
                       int64_t epoch, int64_t step, bool training);
  PreparedStep prepare_training(int64_t epoch, int64_t step);
  /// A link task's training step: this rank's pairs of the step, their negatives, their endpoints sampled.
  PreparedStep prepare_link(int64_t epoch, int64_t step);
  /// A training step built in kernels; the controller sees it as a step without remote rows.
  const Batch& device_batch(int64_t epoch, int64_t step);
  void upload(const PreparedStep& p);
  Matrix<const float> upload_features(const PreparedStep& p, size_t rows, size_t width);
  /// An evaluation forward on the step's seeds: added to `metric`, and the loss summed over them.
  LossSum score_on(Model& model, Loss& loss, Metric& metric, const PreparedStep& p, int64_t epoch);
  /// Where the model's logits sit on this mode's grid.
  LogitsLayout logits_layout(const Model& model) const;
};

}  // namespace tessera
