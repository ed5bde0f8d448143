// SPDX-License-Identifier: BSD-3-Clause
// Partition-parallel neighbour-sampled training (DESIGN §6, DistDGL / MassiveGNN / Rudder): one model replica
// per rank on its partition's training nodes; per step the rank samples message-flow blocks (remote frontier
// nodes sampled by their owners), fetches the input rows it does not own through the feature cache in one
// all-to-all, trains, and all-reduces the gradients. A worker thread prepares step t + 1 (sampling, cache
// lookup, fetch, eviction) on its own communicator while step t computes; it touches only plain host
// memory, and the main thread uploads what it prepared.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/kernels/loss.hpp"
#include "tessera/models/sampled.hpp"
#include "tessera/prefetch/remote_features.hpp"
#include "tessera/sampling/pipeline.hpp"
#include "trainer_common.hpp"

namespace tessera {
namespace {

// Evaluation draws its own neighbourhoods, apart from every training step's keys.
constexpr int64_t kEvalKeyOffset = int64_t(1) << 40;

// Everything a step needs from the sampler and the fetch, in plain host memory.
struct PreparedStep {
  std::vector<int64_t> seeds, labels;
  std::vector<HostCsr> forward, transposed;  // per layer
  std::vector<float> features;               // blocks[0].src.size() x F
  int64_t input_rows = 0;
  FetchStats fetch;
  bool evicted = false;
  std::string controller;
  double sample_s = 0;
};

// Per-step counters summed over ranks in one small all-reduce.
enum StepCounter {
  kLossSum,
  kSeeds,
  kCorrect,
  kRemote,
  kHits,
  kFetchedRows,
  kFetchedBytes,
  kEvictions,
  kFetchSeconds,
  kSampleSeconds,
  kEvictingRanks,
  kCounters
};

std::vector<int> resolve_fanouts(const SampledOptions& s, int layers) {
  std::vector<int> f = s.fanouts.empty() ? std::vector<int>(size_t(layers), 10) : parse_fanouts(s.fanouts);
  require(int(f.size()) == layers, "--fanouts lists ", f.size(), " layers but the model has ", layers,
          " (one fanout per layer, input layer first)");
  return f;
}

void check_sampled_options(const TrainOptions& o, const Communicator& world) {
  std::string invalid;
  try {
    const SampledOptions& s = o.sampling;
    resolve_fanouts(s, o.model.layers);
    require(s.batch_size >= 1, "--batch-size must be at least 1 seed per rank, not ", s.batch_size);
    require(s.fraction >= 0 && s.fraction <= 1, "--prefetch-fraction must be in [0, 1], not ", s.fraction);
    require(s.alpha > 0 && s.alpha < 1, "--prefetch-alpha must be in (0, 1), not ", s.alpha);
    require(s.interval >= 1, "--prefetch-interval must be at least 1, not ", s.interval);
    require(s.policy == PrefetchPolicy::External || s.agent.empty(),
            "--prefetch-agent needs --prefetch-policy external");
    require(s.policy != PrefetchPolicy::External || !s.agent.empty(),
            "--prefetch-policy external needs --prefetch-agent CMD");
    require(o.checkpoint_dir.empty() && !o.resume, "--mode sampled does not write or resume checkpoints");
    require(o.predictions_path.empty(), "--mode sampled does not write --save-predictions");
    require(o.grid.empty(),
            "--grid is for --mode full / minibatch; --mode sampled runs one replica per rank");
    SimulatedNetwork::parse(s.simulate_network);
  } catch (const Error& e) {
    invalid = e.what();
  }
  world.check(invalid.empty(), invalid);
  int provided = 0;
  MPI_Query_thread(&provided);
  world.check(!o.sampling.thread || provided == MPI_THREAD_MULTIPLE,
              "--mode sampled prepares each next step on a worker thread that communicates, which needs "
              "MPI_THREAD_MULTIPLE; this MPI library provides only level " +
                  std::to_string(provided) + ". Rerun with --no-prefetch-thread");
}

class SampledTrainer {
 public:
  SampledTrainer(const TrainOptions& options, const Communicator& world)
      : o_(options), world_(world), worker_(world.dup(false)) {}
  TrainResult run();

 private:
  PreparedStep prepare(const NeighborSampler& sampler, const RemoteFeatures& fetch,
                       const std::vector<int64_t>& seeds, int64_t epoch, int64_t step, bool train_step);
  PreparedStep prepare_training(int64_t epoch, int64_t step);
  void train_step(const PreparedStep& p, int64_t epoch_step, std::vector<double>& counters,
                  TrainResult* keep);
  double evaluate(const std::vector<int64_t>& nodes, int64_t epoch);
  // A prepared step on the device: leading rows of buffers that grow with headroom, so steps of varying
  // size do not allocate their features, labels and mask every time.
  struct DeviceStep {
    std::vector<const GraphOps<float>*> ops;
    Matrix<float> x;
    Vector<int64_t> labels;
    Vector<uint8_t> mask;  // all ones: every output row is a seed
  };
  DeviceStep upload(const PreparedStep& p);

  const TrainOptions& o_;
  const Communicator& world_;
  Communicator worker_;  // the worker thread's traffic
  ModelConfig config_;
  PartitionedGraph g_;
  SimulatedNetwork network_;
  std::vector<int> fanouts_;
  std::unique_ptr<GnnModel<float>> model_;
  std::unique_ptr<Adam> optimizer_;
  std::unique_ptr<NeighborSampler> sampler_, eval_sampler_;
  std::unique_ptr<RemoteFeatures> fetch_, eval_fetch_;
  std::unique_ptr<FeatureCache> cache_;
  std::unique_ptr<PrefetchController> controller_;
  int64_t steps_ = 0, global_step_ = 0;
  std::vector<GraphOps<float>> ops_;
  Matrix<float> x_capacity_;
  Vector<int64_t> labels_capacity_;
  Vector<uint8_t> ones_capacity_;
  Vector<float> flat_grad_;
  Matrix<float> grad_logits_;
};

PreparedStep SampledTrainer::prepare(const NeighborSampler& sampler, const RemoteFeatures& fetch,
                                     const std::vector<int64_t>& seeds, int64_t epoch, int64_t step,
                                     bool train_step) {
  PreparedStep p;
  Stopwatch watch;
  p.seeds = seeds;
  for (int64_t v : seeds) p.labels.push_back(g_.labels[size_t(v - g_.first)]);
  const std::vector<SampledBlock> blocks = sampler.sample(seeds, epoch, step);
  for (const SampledBlock& b : blocks) {
    p.forward.push_back(block_operator(b, config_.kind, g_.degree));
    p.transposed.push_back(transpose(p.forward.back()));
  }
  p.sample_s = watch.seconds();
  const std::vector<int64_t>& inputs = blocks.front().src;
  p.input_rows = int64_t(inputs.size());
  FeatureCache* cache = train_step ? cache_.get() : nullptr;
  p.evicted = cache && controller_->evict(global_step_);
  p.features = fetch.gather(inputs, cache, p.evicted, p.fetch);
  if (train_step) {
    if (controller_)
      controller_->observe(StepObservation{global_step_, p.fetch.remote_rows, p.fetch.hits,
                                           p.fetch.fetched_rows, p.fetch.evictions});
    p.controller = controller_ ? controller_->state() : "none";
    ++global_step_;
  }
  return p;
}

PreparedStep SampledTrainer::prepare_training(int64_t epoch, int64_t step) {
  const std::vector<int64_t> seeds =
      step_seeds(g_.train, g_.labels, g_.first, config_.seed, epoch, step, steps_);
  return prepare(*sampler_, *fetch_, seeds, epoch, step, true);
}

SampledTrainer::DeviceStep SampledTrainer::upload(const PreparedStep& p) {
  DeviceStep d;
  ops_.clear();
  for (size_t l = 0; l < p.forward.size(); ++l) ops_.push_back(upload_ops(p.forward[l], p.transposed[l]));
  for (const GraphOps<float>& op : ops_) d.ops.push_back(&op);
  const auto rows = size_t(p.input_rows), width = size_t(g_.num_features), seeds = p.labels.size();
  if (x_capacity_.extent(0) < rows)
    x_capacity_ =
        Matrix<float>(Kokkos::ViewAllocateWithoutInitializing("step.features"), rows + rows / 4, width);
  if (labels_capacity_.extent(0) < seeds) {
    labels_capacity_ =
        Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("step.labels"), seeds + seeds / 4);
    ones_capacity_ = Vector<uint8_t>("step.mask", seeds + seeds / 4);
    Kokkos::deep_copy(ones_capacity_, uint8_t(1));
  }
  d.x = Matrix<float>(Kokkos::subview(x_capacity_, std::make_pair(size_t(0), rows), Kokkos::ALL()));
  d.labels = Kokkos::subview(labels_capacity_, std::make_pair(size_t(0), seeds));
  d.mask = Kokkos::subview(ones_capacity_, std::make_pair(size_t(0), seeds));
  Kokkos::deep_copy(
      d.x,
      Kokkos::View<const float**, Kokkos::LayoutRight, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
          p.features.data(), rows, width));
  Kokkos::deep_copy(d.labels, HostVector<const int64_t>(p.labels.data(), seeds));
  return d;
}

// A free function: nvcc's extended lambdas may not sit in private member functions.
void scale_into(const Vector<const float>& from, const Vector<float>& to, float scale) {
  Kokkos::parallel_for(
      "scale_gradient", Kokkos::RangePolicy<ExecSpace>(0, int64_t(to.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { to(i) = from(i) * scale; });
}

void SampledTrainer::train_step(const PreparedStep& p, int64_t epoch_step, std::vector<double>& counters,
                                TrainResult* keep) {
  const std::vector<Parameter<float>*> params = model_->parameters();
  Kokkos::deep_copy(flat_grad_, 0.0f);
  std::fill(counters.begin(), counters.end(), 0.0);
  if (!p.seeds.empty()) {  // a rank without seeds this step contributes zero gradients
    const DeviceStep d = upload(p);
    const PassInfo pass{true, config_.seed, epoch_step};
    const Matrix<float> logits = model_->forward(d.ops, d.x, pass);
    const int64_t rows = int64_t(logits.extent(0));
    if (int64_t(grad_logits_.extent(0)) < rows)
      grad_logits_ = Matrix<float>("grad_logits", size_t(rows + rows / 4), size_t(config_.out));
    const Matrix<float> grad(Kokkos::subview(grad_logits_, std::make_pair(int64_t(0), rows), Kokkos::ALL()));
    const auto [loss, count] = masked_softmax_cross_entropy<float>(logits, d.labels, d.mask, 1.0f, grad);
    counters[kLossSum] = loss;
    counters[kSeeds] = double(count);
    counters[kCorrect] = double(count_correct<float>(logits, d.labels, d.mask).first);
    model_->backward(d.ops, grad, pass);
    int64_t at = 0;
    for (Parameter<float>* q : params) {
      const int64_t n = int64_t(q->grad.extent(0));
      Kokkos::deep_copy(Kokkos::subview(flat_grad_, std::make_pair(at, at + n)), q->grad);
      at += n;
    }
  }
  counters[kRemote] = double(p.fetch.remote_rows);
  counters[kHits] = double(p.fetch.hits);
  counters[kFetchedRows] = double(p.fetch.fetched_rows);
  counters[kFetchedBytes] = double(p.fetch.fetched_bytes);
  counters[kEvictions] = double(p.fetch.evictions);
  counters[kFetchSeconds] = p.fetch.seconds;
  counters[kSampleSeconds] = p.sample_s;
  counters[kEvictingRanks] = p.evicted ? 1.0 : 0.0;
  all_reduce(world_, counters.data(), int64_t(counters.size()), ReduceOp::Sum, "step counters");
  Kokkos::fence();
  all_reduce(world_, flat_grad_.data(), int64_t(flat_grad_.extent(0)), ReduceOp::Sum, "gradient allreduce");
  network_.delay(network_.all_reduce_seconds(int64_t(flat_grad_.extent(0) * sizeof(float)), world_.size()));
  // The loss is the mean over every rank's seeds: gradients were sums.
  const float scale = counters[kSeeds] > 0 ? float(1.0 / counters[kSeeds]) : 0.0f;
  int64_t at = 0;
  for (Parameter<float>* q : params) {
    const int64_t n = int64_t(q->grad.extent(0));
    scale_into(Kokkos::subview(flat_grad_, std::make_pair(at, at + n)), q->grad, scale);
    at += n;
  }
  if (keep) {  // the step's gradients in global layout (every replica holds the same)
    const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), flat_grad_);
    keep->last_gradients.assign(host.data(), host.data() + host.extent(0));
    for (float& v : keep->last_gradients) v *= scale;
  }
  optimizer_->step();
}

double SampledTrainer::evaluate(const std::vector<int64_t>& nodes, int64_t epoch) {
  const int64_t batch = o_.sampling.batch_size;
  const int64_t rounds =
      all_reduce_value(world_, (int64_t(nodes.size()) + batch - 1) / batch, ReduceOp::Max, "eval");
  int64_t counts[2] = {0, 0};  // correct, labeled
  for (int64_t r = 0; r < rounds; ++r) {
    const int64_t begin = std::min<int64_t>(int64_t(nodes.size()), r * batch);
    const int64_t end = std::min<int64_t>(int64_t(nodes.size()), begin + batch);
    const std::vector<int64_t> chunk(nodes.begin() + begin, nodes.begin() + end);
    const PreparedStep p = prepare(*eval_sampler_, *eval_fetch_, chunk, kEvalKeyOffset + epoch, r, false);
    if (chunk.empty()) continue;
    const DeviceStep d = upload(p);
    const Matrix<float> logits = model_->forward(d.ops, d.x, PassInfo{false, config_.seed, epoch});
    const auto [correct, count] = count_correct<float>(logits, d.labels, d.mask);
    counts[0] += correct;
    counts[1] += count;
  }
  all_reduce(world_, counts, 2, ReduceOp::Sum, "eval");
  return counts[1] > 0 ? double(counts[0]) / double(counts[1]) : 0.0;
}

TrainResult SampledTrainer::run() {
  const SampledOptions& s = o_.sampling;
  Stopwatch load_watch;
  const std::string partition = !s.partition.empty() ? s.partition
                                : world_.size() == 1 ? "block"
                                                     : "metis-" + std::to_string(world_.size());
  g_ = load_partitioned(world_, o_.data, partition);
  if (o_.normalize_features)
    normalize_feature_rows(HostMatrix<float>(g_.features.data(), size_t(g_.count), size_t(g_.num_features)));
  config_ = o_.model;
  config_.in = g_.num_features;
  config_.out = g_.num_classes;
  fanouts_ = resolve_fanouts(s, config_.layers);
  network_ = SimulatedNetwork::parse(s.simulate_network);
  model_ = std::make_unique<GnnModel<float>>(config_);
  optimizer_ = std::make_unique<Adam>(model_->parameters(), o_.optimizer);
  int64_t total = 0;
  for (Parameter<float>* p : model_->parameters()) total += int64_t(p->grad.extent(0));
  flat_grad_ = Vector<float>("sampled.gradients", size_t(total));
  sampler_ = std::make_unique<NeighborSampler>(worker_, g_, fanouts_, config_.seed, network_);
  eval_sampler_ = std::make_unique<NeighborSampler>(world_, g_, fanouts_, config_.seed, network_);
  fetch_ = std::make_unique<RemoteFeatures>(worker_, g_, network_);
  eval_fetch_ = std::make_unique<RemoteFeatures>(world_, g_, network_);

  FetchStats fill;
  const std::vector<int64_t> halo = g_.halo();
  if (s.policy != PrefetchPolicy::None) {
    std::vector<int64_t> degree;
    for (int64_t v : halo) degree.push_back(g_.degree[size_t(v)]);
    cache_ = std::make_unique<FeatureCache>(halo, degree, g_.num_features,
                                            FeatureCacheOptions{s.fraction, s.alpha, s.interval});
    fetch_->fill(*cache_, fill);
    controller_ = make_controller(ControllerOptions{s.policy, s.interval, s.agent, s.agent_timeout_s,
                                                    world_.rank(), cache_->capacity()});
  }
  int64_t labeled = 0;
  for (int64_t v : g_.train) labeled += g_.labels[size_t(v - g_.first)] >= 0;
  const int64_t most = all_reduce_value(world_, labeled, ReduceOp::Max, "load");
  steps_ = o_.steps_per_epoch > 0 ? o_.steps_per_epoch
                                  : std::max<int64_t>(1, (most + s.batch_size - 1) / s.batch_size);
  const int64_t halo_total = all_reduce_value(world_, int64_t(halo.size()), ReduceOp::Sum, "load");
  const int64_t fill_bytes = all_reduce_value(world_, fill.fetched_bytes, ReduceOp::Sum, "load");
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "loaded %s (partition %s) in %.2f s; model %s; %lld steps per epoch, %lld seeds per rank; halo %lld "
      "rows over all ranks; prefetch %s, cache %.0f%% of the halo (initial fill %s); worker thread %s",
      o_.data.c_str(), partition.c_str(), load_watch.seconds(), config_.describe().c_str(), (long long)steps_,
      (long long)s.batch_size, (long long)halo_total, prefetch_policy_name(s.policy),
      s.policy == PrefetchPolicy::None ? 0.0 : 100 * s.fraction,
      std::to_string(fill_bytes).append(" B").c_str(), s.thread ? "on" : "off");
  log_line(line);
  if (network_.enabled())
    log_line("SIMULATED NETWORK (benchmark only): every exchange also waits as long as it would take at " +
             network_.describe());

  TrainingProgress progress;
  std::ofstream metrics = open_metrics(o_, progress, world_);
  TrainResult result;
  std::vector<double> counters(kCounters);
  BatchPipeline<PreparedStep> pipeline(s.thread);
  pipeline.request([this] { return prepare_training(0, 0); });
  for (int64_t epoch = 0; epoch < o_.epochs; ++epoch) {
    EpochRecord r;
    r.epoch = epoch + 1;
    Stopwatch epoch_watch;
    std::vector<double> sums(kCounters, 0.0);
    const double waited_before = pipeline.waited_seconds();
    for (int64_t step = 0; step < steps_; ++step) {
      PreparedStep p = pipeline.take();
      const bool last = epoch + 1 == o_.epochs && step + 1 == steps_;
      if (!last) {
        const int64_t next_epoch = step + 1 == steps_ ? epoch + 1 : epoch, next_step = (step + 1) % steps_;
        pipeline.request([this, next_epoch, next_step] { return prepare_training(next_epoch, next_step); });
      }
      train_step(p, epoch * steps_ + step, counters, last && o_.keep_last_step ? &result : nullptr);
      for (int k = 0; k < kCounters; ++k) sums[size_t(k)] += counters[size_t(k)];
      if (metrics.is_open()) {
        const nlohmann::json j = {
            {"kind", "step"},
            {"epoch", epoch + 1},
            {"step", step + 1},
            {"loss", counters[kSeeds] > 0 ? counters[kLossSum] / counters[kSeeds] : 0.0},
            {"seeds", int64_t(counters[kSeeds])},
            {"remote_rows", int64_t(counters[kRemote])},
            {"hits", int64_t(counters[kHits])},
            {"hit_rate", counters[kRemote] > 0 ? counters[kHits] / counters[kRemote] : 0.0},
            {"fetched_rows", int64_t(counters[kFetchedRows])},
            {"fetched_bytes", int64_t(counters[kFetchedBytes])},
            {"fetch_s", counters[kFetchSeconds] / world_.size()},
            {"sample_s", counters[kSampleSeconds] / world_.size()},
            {"evictions", int64_t(counters[kEvictions])},
            {"evicting_ranks", int64_t(counters[kEvictingRanks])},
            {"controller", p.controller}};
        metrics << j.dump() << '\n';
      }
    }
    r.loss = sums[kSeeds] > 0 ? sums[kLossSum] / sums[kSeeds] : 0.0;
    r.seconds = epoch_watch.seconds();
    r.evaluated = o_.eval_every > 0 && ((epoch + 1) % o_.eval_every == 0 || epoch + 1 == o_.epochs);
    Stopwatch eval_watch;
    if (r.evaluated) {
      r.train_acc =
          sums[kSeeds] > 0 ? sums[kCorrect] / sums[kSeeds] : 0.0;  // on the steps' seeds, with dropout
      r.valid_acc = evaluate(g_.valid, epoch);
      r.test_acc = evaluate(g_.test, epoch);
      record_if_best(progress, r);
    }
    r.eval_s = eval_watch.seconds();
    progress.epochs_done = epoch + 1;
    result.history.push_back(r);
    result.remote_rows += int64_t(sums[kRemote]);
    result.cache_hits += int64_t(sums[kHits]);
    result.fetched_rows += int64_t(sums[kFetchedRows]);
    result.fetched_bytes += int64_t(sums[kFetchedBytes]);
    result.evictions += int64_t(sums[kEvictions]);
    const nlohmann::json extra = {{"mode", "sampled"},
                                  {"policy", prefetch_policy_name(s.policy)},
                                  {"remote_rows", int64_t(sums[kRemote])},
                                  {"hit_rate", sums[kRemote] > 0 ? sums[kHits] / sums[kRemote] : 0.0},
                                  {"fetched_rows", int64_t(sums[kFetchedRows])},
                                  {"fetched_bytes", int64_t(sums[kFetchedBytes])},
                                  {"evictions", int64_t(sums[kEvictions])},
                                  {"fetch_s", sums[kFetchSeconds] / world_.size()},
                                  {"sample_s", sums[kSampleSeconds] / world_.size()},
                                  {"waited_s", pipeline.waited_seconds() - waited_before},
                                  {"simulated_network", network_.describe()}};
    report_epoch(r, o_, metrics, extra);
    if (!o_.quiet) {
      std::snprintf(
          line, sizeof(line),
          "           remote rows %lld, cache hit rate %.3f, fetched %lld rows (%.1f MB), %lld evictions",
          (long long)sums[kRemote], sums[kRemote] > 0 ? sums[kHits] / sums[kRemote] : 0.0,
          (long long)sums[kFetchedRows], sums[kFetchedBytes] * 1e-6, (long long)sums[kEvictions]);
      log_line(line);
    }
  }
  finish_result(result, progress, *model_);
  return result;
}

}  // namespace

TrainResult train_sampled(const TrainOptions& options, const Communicator& world) {
  check_train_options(options, world);
  check_sampled_options(options, world);
  SampledTrainer trainer(options, world);
  return trainer.run();
}

}  // namespace tessera
