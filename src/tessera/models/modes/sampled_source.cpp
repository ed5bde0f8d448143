// SPDX-License-Identifier: BSD-3-Clause
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/threads.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/models/modes/minibatch.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/modes/sampled_state.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/models/training/node_outputs.hpp"
#include "tessera/prefetch/remote_features.hpp"
#include "tessera/sampling/pipeline.hpp"

namespace tessera {

namespace {
// Evaluation and the final outputs draw their own neighbourhoods, apart from every training step's keys.
constexpr int64_t kEvalKeyOffset = int64_t(1) << 40;
constexpr int64_t kOutputKeyOffset = int64_t(1) << 41;

// Per-step counters summed over ranks in one small all-reduce.
enum Counter {
  kSeeds,
  kRemote,
  kHits,
  kFetchedRows,
  kFetchedBytes,
  kEvictions,
  kFetchS,
  kSampleS,
  kGatherS,
  kUploadS,
  kEvicting,
  kCounters
};

// After the counters: per graph layer (input layer first) its block's destination rows, source rows and
// nonzeros, the work a step's floor is computed from (scripts/sampled_floor.py).
constexpr int kShapeCounters = 3;

}  // namespace

PreparedStep SampledSource::State::prepare(const NeighborSampler& s, const RemoteFeatures& f,
                                           const std::vector<int64_t>& seeds, int64_t epoch, int64_t step,
                                           bool training) {
  PreparedStep p;
  Stopwatch watch;
  p.seeds = seeds;
  // A link step's seeds include other ranks' nodes: no label (the link loss reads none).
  for (int64_t v : seeds) p.labels.push_back(g.owns(v) ? g.labels[size_t(v - g.first)] : -1);
  const size_t tasks = g.multi_label ? size_t(g.num_classes) : 0;
  for (int64_t v : seeds)
    if (g.owns(v))
      p.targets.insert(p.targets.end(), g.targets.begin() + long(size_t(v - g.first) * tasks),
                       g.targets.begin() + long(size_t(v - g.first + 1) * tasks));
    else
      p.targets.insert(p.targets.end(), tasks, int8_t(-1));
  p.blocks = s.sample(seeds, epoch, step);
  for (size_t l = 0; l < p.blocks.size(); ++l) {
    const SampledBlock& b = p.blocks[l];
    p.shapes.push_back({b.num_dst, int64_t(b.src.size()), int64_t(b.col.size())});
    p.forward.push_back(block_operator(b, normalization));
    // Evaluation runs forward only; training's input layer usually needs no transpose either (most of
    // the step's nonzeros).
    const bool transposed = training && needs.transposed(int(l));
    p.transposed.push_back(transposed);
    p.transpose.push_back(transposed ? transpose(p.forward.back()) : HostCsr());
  }
  p.sample_s = watch.seconds();
  FeatureCache* c = training ? cache.get() : nullptr;
  const int64_t global_step = epoch * steps + step;
  p.evicted = c && controller->evict(global_step);
  Stopwatch gather_watch;
  if (training) {
    const std::lock_guard<std::mutex> lock(spare_mutex);
    p.features = std::move(spare_features);
  }
  f.gather(p.blocks.front().src, c, p.evicted, p.fetch, p.features);
  p.gather_s = gather_watch.seconds();
  if (training && controller) {
    controller->observe(StepObservation{global_step, p.fetch.remote_rows, p.fetch.hits, p.fetch.fetched_rows,
                                        p.fetch.evictions});
    p.controller = controller->state();
  }
  return p;
}

PreparedStep SampledSource::State::prepare_training(int64_t epoch, int64_t step) {
  if (links) return prepare_link(epoch, step);
  return prepare(*sampler, *fetch, training_seeds.seeds(epoch, step, steps), epoch, step, true);
}

const Batch& SampledSource::State::device_batch(int64_t epoch, int64_t step) {
  PreparedStep p;
  p.seeds = training_seeds.seeds(epoch, step, steps);
  const Batch& built = device->build(p.seeds, epoch, step);
  p.sample_s = device->sample_seconds();
  p.gather_s = device->gather_seconds();
  p.shapes = device->shapes();
  const int64_t global_step = epoch * steps + step;
  if (controller) {
    p.evicted = controller->evict(global_step);
    controller->observe(StepObservation{global_step, 0, 0, 0, 0});
    p.controller = controller->state();
  }
  current = std::move(p);
  upload_s = 0;
  return built;
}

void SampledSource::State::upload(const PreparedStep& p) {
  views = GraphBatch();  // the step before's views go first: their buffers are written again below
  uploads.restart();
  for (size_t l = 0; l < p.blocks.size(); ++l) {
    const SampledBlock& b = p.blocks[l];
    auto block = std::make_unique<AdjacencyBlock>();
    const bool transposed = p.transposed[l];
    block->forward = uploads.spmm(uploads.csr(p.forward[l]));
    if (transposed) block->transpose = uploads.spmm(uploads.csr(p.transpose[l]));
    block->has_transpose = transposed;
    block->nnz = int64_t(p.forward[l].col_idx.size());
    views.blocks.push_back(std::move(block));
    const AdjacencyBlock* adjacency = views.blocks.back().get();
    const AdjacencyBlock* self = nullptr;
    if (needs.self_blocks) {
      auto identity = std::make_unique<AdjacencyBlock>();
      const int64_t sources = int64_t(b.src.size());
      identity->forward = uploads.spmm(uploads.leading_identity(b.num_dst, sources));
      if (transposed) identity->transpose = uploads.spmm(uploads.leading_identity(sources, b.num_dst));
      identity->has_transpose = transposed;
      views.blocks.push_back(std::move(identity));
      self = views.blocks.back().get();
    }
    views.layers.push_back(LayerGraph{adjacency, self, uploads.ids(b.src.data(), size_t(b.num_dst)),
                                      b.num_dst, b.num_dst, false});
  }
  const std::vector<int64_t>& inputs = p.blocks.front().src;
  const auto rows = inputs.size(), width = size_t(g.num_features), seeds = p.labels.size();
  views.input =
      LayerGraph{nullptr, nullptr, uploads.ids(inputs.data(), rows), int64_t(rows), int64_t(rows), false};
  const Matrix<const float> x = upload_features(p, rows, width);
  views.scratch_input = x.data();  // p's rows (or their device copy) serve this step only
  if (labels_capacity.extent(0) < seeds) {
    labels_capacity =
        Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("step.labels"), seeds + seeds / 4);
    ones_capacity = Vector<uint8_t>("step.mask", seeds + seeds / 4);
    Kokkos::deep_copy(ones_capacity, uint8_t(1));
  }
  const Vector<int64_t> labels = Kokkos::subview(labels_capacity, std::make_pair(size_t(0), seeds));
  Kokkos::deep_copy(labels, HostVector<const int64_t>(p.labels.data(), seeds));
  Matrix<int8_t> targets;
  if (g.multi_label) {
    if (targets_capacity.extent(0) < seeds)
      targets_capacity = Matrix<int8_t>(Kokkos::ViewAllocateWithoutInitializing("step.targets"),
                                        seeds + seeds / 4, size_t(g.num_classes));
    targets = Kokkos::subview(targets_capacity, std::make_pair(size_t(0), seeds), Kokkos::ALL());
    Kokkos::deep_copy(targets, HostMatrix<const int8_t>(p.targets.data(), seeds, size_t(g.num_classes)));
  }
  batch = Batch{&views, x, labels, Kokkos::subview(ones_capacity, std::make_pair(size_t(0), seeds)), targets};
  batch.pairs = p.pairs.size() > 0 ? &p.pairs : nullptr;
}

Matrix<const float> SampledSource::State::upload_features(const PreparedStep& p, size_t rows, size_t width) {
  const Kokkos::View<const float**, Kokkos::LayoutRight, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
      prepared(p.features.data(), rows, width);
  // A host build reads the prepared rows where they are: a copy held every step's input twice (44 MiB per
  // rank for 1024 seeds and fanouts 10,10 on a 2^21-node graph). The batch is used only while p lives: p is
  // the current training step, replaced only by the next upload, or an evaluation's step, used within it.
  if constexpr (std::is_same<DeviceSpace, HostSpace>::value) {
    return prepared;
  } else {
    if (x_capacity.extent(0) < rows)
      x_capacity =
          Matrix<float>(Kokkos::ViewAllocateWithoutInitializing("step.features"), rows + rows / 4, width);
    const Matrix<float> x(Kokkos::subview(x_capacity, std::make_pair(size_t(0), rows), Kokkos::ALL()));
    Kokkos::deep_copy(x, prepared);
    return x;
  }
}

LogitsLayout SampledSource::State::logits_layout(const Model& model) const {
  const ActivationLayout& out = model.output_layout();
  return LogitsLayout{&grid.axis(out.rows_axis), &grid.axis(out.cols_axis), out.col_begin, out.width};
}

// An evaluation forward on a prepared step's seeds (this rank's).
LossSum SampledSource::State::score_on(Model& model, Loss& loss, Metric& metric, const PreparedStep& p,
                                       int64_t epoch) {
  upload(p);
  const Matrix<const float> logits = model.forward(batch.input, views, PassInfo{false, seed, epoch});
  const LossInput rows{logits_layout(model), logits, batch.labels, batch.mask, batch.targets};
  metric.add(rows);
  if (eval_grad.extent(0) < logits.extent(0) || eval_grad.extent(1) != logits.extent(1))
    eval_grad = Matrix<float>(Kokkos::ViewAllocateWithoutInitializing("eval.grad"), logits.extent(0),
                              logits.extent(1));
  const auto grad =
      Kokkos::subview(eval_grad, std::make_pair(size_t(0), size_t(logits.extent(0))), Kokkos::ALL());
  return loss.sum_and_gradient(rows, grad);
}

namespace {
Normalization aggregation_of(const Model& model) {
  require(model.aggregation().has_value(),
          "sampled training: the model's layers name no weighting of the adjacency (Model::aggregation); "
          "give one to the SampledSource constructor that takes it");
  return *model.aggregation();
}

Normalization checked_aggregation(const Model& model, Normalization normalization) {
  const std::optional<Normalization> wanted = model.aggregation();
  require(!wanted || *wanted == normalization, "sampled training: the model's layers aggregate with ",
          normalization_name(wanted.value_or(normalization)), " weights, not the ",
          normalization_name(normalization), " ones given");
  return normalization;
}
}  // namespace

SampledSource::SampledSource(const PartitionedGraph& graph, const ProcessGrid& grid,
                             const Communicator& world, const SampledOptions& options, const Model& model)
    : SampledSource(graph, grid, world, options, model.batch_needs(), aggregation_of(model), model.seed()) {}

SampledSource::SampledSource(const PartitionedGraph& graph, const ProcessGrid& grid,
                             const Communicator& world, const SampledOptions& options, const Model& model,
                             Normalization normalization)
    : SampledSource(graph, grid, world, options, model.batch_needs(),
                    checked_aggregation(model, normalization), model.seed()) {}

SampledSource::SampledSource(const PartitionedGraph& graph, const ProcessGrid& grid,
                             const Communicator& world, const SampledOptions& options,
                             const BatchNeeds& needs, Normalization normalization, uint64_t seed)
    : graph_(graph), world_(world), normalization_(normalization) {
  const int layers = needs.layers;
  SampledOptions o = options;
  if (o.fanouts.empty()) o.fanouts.assign(size_t(layers), 10);
  std::string invalid;
  const bool device_build = !std::is_same<DeviceSpace, HostSpace>::value;
  SamplePlace place = SamplePlace::Host;
  try {
    require(int(o.fanouts.size()) == layers, "`fanouts` lists ", o.fanouts.size(),
            " layers but the model has ", layers, " (one fanout per layer, input layer first)");
    for (int f : o.fanouts)
      require(f >= 1 || f == -1, "`fanouts`: expected positive integers or -1, not ", f);
    require(o.batch_size >= 1, "`batch-size` must be at least 1 seed per rank, not ", o.batch_size);
    o.prefetch.validate();
    require(grid.shape().size() == grid.shape().d,
            "sampled training runs one replica per rank (grid Px1x1x1)");
    // Steps built on the device gather fp32 rows: bf16 features are gathered (and widened) on the host.
    const bool bf16 = graph.feature_dtype == StorageDtype::Bf16;
    require(!bf16 || o.sample_on != SamplePlace::Device,
            "`sample-on` device gathers fp32 feature rows; `feature-dtype` bf16 runs with `sample-on` host");
    place = bf16 ? SamplePlace::Host
                 : sampled_step_place(o.sample_on, device_build, world.size(),
                                      DeviceSampledSteps::resident_bytes(graph), device_free_bytes());
  } catch (const Error& e) {
    invalid = e.what();
  }
  world.check(invalid.empty(), invalid);
  const bool on_device = place == SamplePlace::Device;
  if (o.sample_on == SamplePlace::Auto && device_build && world.size() == 1 && !on_device &&
      graph.feature_dtype == StorageDtype::F32)
    log_line(
        "sampled steps built on the host: the graph's features and neighbour lists do not fit in half "
        "of the device's free memory");
  if (on_device) o.thread = StepThread::Off;  // nothing left for a worker thread to prepare
  int provided = 0;
  MPI_Query_thread(&provided);
  // Where the choice is not auto's to make: steps built on the device, or an MPI without the thread level.
  const ThreadChoice& threads = thread_choice();
  bool thread = o.thread == StepThread::On;
  if (on_device)
    thread_reason_ = "steps sampled on the device";
  else if (o.thread == StepThread::Auto && provided != MPI_THREAD_MULTIPLE)
    thread_reason_ = "auto: the MPI library provides no MPI_THREAD_MULTIPLE";
  else if (threads.known) {
    thread = uses_step_thread(o.thread, threads.node_ranks, threads.node_cpus, threads.node_threads,
                              &thread_reason_);
  } else {
    thread = o.thread != StepThread::Off;
    thread_reason_ = o.thread == StepThread::Auto ? "auto" : "as asked";
  }
  world.check(!thread || provided == MPI_THREAD_MULTIPLE,
              "`mode` sampled prepares each next step on a worker thread that communicates, which needs "
              "MPI_THREAD_MULTIPLE; this MPI library provides only level " +
                  std::to_string(provided) + ". Rerun with `prefetch-thread` off");
  s_ = std::make_unique<State>(graph, grid, world, o, normalization, needs, seed, thread);
  s_->epoch_sums.assign(kCounters, 0.0);
  thread_ = thread;
  if (on_device)
    s_->device = std::make_unique<DeviceSampledSteps>(graph, o.fanouts, seed, normalization, needs);
  s_->sampler = std::make_unique<NeighborSampler>(s_->worker, graph, o.fanouts, seed, o.network);
  s_->eval_sampler = std::make_unique<NeighborSampler>(world, *s_->sampler);
  s_->fetch = std::make_unique<RemoteFeatures>(s_->worker, graph, o.network);
  s_->eval_fetch = std::make_unique<RemoteFeatures>(world, graph, o.network);
  FetchStats fill;
  const std::vector<int64_t>& halo = graph.halo;
  if (o.prefetch.policy != PrefetchPolicy::None) {
    s_->cache = std::make_unique<FeatureCache>(halo, graph.halo_degree, graph.num_features, o.prefetch,
                                               graph.feature_dtype);
    s_->fetch->fill(*s_->cache, fill);
    s_->controller = make_controller(o.prefetch, world.rank(), s_->cache->capacity());
  }
  int64_t labeled = 0;
  for (int64_t v : graph.train) labeled += graph.labels[size_t(v - graph.first)] >= 0;
  const int64_t most = all_reduce_value(world, labeled, ReduceOp::Max, "load");
  steps_ = o.steps_per_epoch > 0 ? o.steps_per_epoch
                                 : std::max<int64_t>(1, (most + o.batch_size - 1) / o.batch_size);
  s_->steps = steps_;
  s_->halo_total = all_reduce_value(world, int64_t(halo.size()), ReduceOp::Sum, "load");
  s_->fill_bytes = all_reduce_value(world, fill.fetched_bytes, ReduceOp::Sum, "load");
  int64_t cache_sizes[2] = {s_->cache ? s_->cache->capacity() : 0, s_->cache ? s_->cache->held_bytes() : 0};
  all_reduce(world, cache_sizes, 2, ReduceOp::Sum, "load");
  totals_.cache_rows = cache_sizes[0];
  totals_.cache_bytes = cache_sizes[1];
  if (o.network.enabled())
    log_line("SIMULATED NETWORK (benchmark only): every exchange also waits as long as it would take at " +
             o.network.describe());
}

SampledSource::~SampledSource() = default;

std::string SampledSource::describe() const {
  const SampledOptions& o = s_->o;
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "%lld steps per epoch, %lld %s per rank; halo %lld rows over all ranks; prefetch %s, "
      "cache %lld %s rows (%.0f%% of the halo, %.1f MiB; initial fill %lld B); worker thread %s (%s)",
      (long long)steps_, (long long)o.batch_size, s_->links ? "pairs" : "seeds", (long long)s_->halo_total,
      prefetch_policy_name(o.prefetch.policy), (long long)totals_.cache_rows,
      storage_dtype_name(graph_.feature_dtype),
      s_->halo_total > 0 ? 100.0 * double(totals_.cache_rows) / double(s_->halo_total) : 0.0,
      double(totals_.cache_bytes) / 1048576.0, (long long)s_->fill_bytes, thread_ ? "on" : "off",
      thread_reason_.c_str());
  return line;
}

const Batch& SampledSource::batch(int64_t epoch, int64_t step) {
  State& s = *s_;
  if (s.device) return s.device_batch(epoch, step);
  auto request = [&s](int64_t e, int64_t t) {
    s.pipeline.request([&s, e, t] { return s.prepare_training(e, t); });
    s.requested = {e, t};
  };
  if (s.requested != std::make_pair(epoch, step)) {  // the first step of a run (or a resumed one)
    if (s.requested.first >= 0) s.pipeline.take();
    request(epoch, step);
  }
  PreparedStep next = s.pipeline.take();
  {
    const std::lock_guard<std::mutex> lock(s.spare_mutex);
    s.spare_features = std::move(s.current.features);
  }
  s.current = std::move(next);
  request(step + 1 < steps_ ? epoch : epoch + 1, (step + 1) % steps_);
  Stopwatch watch;
  s.upload(s.current);
  s.upload_s = watch.seconds();
  return s.batch;
}

double SampledSource::loss_weight(int64_t count) {
  // The loss is the mean over every rank's seeds.
  const int64_t total = all_reduce_value(world_, count, ReduceOp::Sum, "step counters");
  return total > 0 ? 1.0 / double(total) : 0.0;
}

void SampledSource::observe(const Matrix<const float>& logits, const Batch& batch, const LogitsLayout& layout,
                            const Loss& loss) {
  if (s_->links) return;  // a link task's training score is its evaluation's (score_splits)
  if (!s_->train_metric) s_->train_metric = loss.metric();
  s_->train_metric->add(LossInput{layout, logits, batch.labels, batch.mask, batch.targets});
}

nlohmann::json SampledSource::step_metrics() {
  const PreparedStep& p = s_->current;
  std::vector<double> c(kCounters + kShapeCounters * p.shapes.size(), 0.0);
  c[kSeeds] = double(p.seeds.size());
  c[kRemote] = double(p.fetch.remote_rows);
  c[kHits] = double(p.fetch.hits);
  c[kFetchedRows] = double(p.fetch.fetched_rows);
  c[kFetchedBytes] = double(p.fetch.fetched_bytes);
  c[kEvictions] = double(p.fetch.evictions);
  c[kFetchS] = p.fetch.seconds;
  c[kSampleS] = p.sample_s;
  c[kGatherS] = p.gather_s;
  c[kUploadS] = s_->upload_s;
  c[kEvicting] = p.evicted ? 1.0 : 0.0;
  for (size_t l = 0; l < p.shapes.size(); ++l) {
    double* shape = c.data() + kCounters + kShapeCounters * l;
    shape[0] = double(p.shapes[l].dst);
    shape[1] = double(p.shapes[l].src);
    shape[2] = double(p.shapes[l].edges);
  }
  all_reduce(world_, c.data(), int64_t(c.size()), ReduceOp::Sum, "step counters");
  const SimulatedNetwork& network = s_->o.network;
  network.delay(network.all_reduce_seconds(gradient_bytes_, world_.size()));
  std::vector<double>& sums = s_->epoch_sums;
  if (sums.size() < c.size()) sums.resize(c.size(), 0.0);
  for (size_t k = 0; k < c.size(); ++k) sums[k] += c[k];
  totals_.remote_rows += int64_t(c[kRemote]);
  totals_.cache_hits += int64_t(c[kHits]);
  totals_.fetched_rows += int64_t(c[kFetchedRows]);
  totals_.fetched_bytes += int64_t(c[kFetchedBytes]);
  totals_.evictions += int64_t(c[kEvictions]);
  return {{"seeds", int64_t(c[kSeeds])},
          {"remote_rows", int64_t(c[kRemote])},
          {"hits", int64_t(c[kHits])},
          {"hit_rate", c[kRemote] > 0 ? c[kHits] / c[kRemote] : 0.0},
          {"fetched_rows", int64_t(c[kFetchedRows])},
          {"fetched_bytes", int64_t(c[kFetchedBytes])},
          {"fetch_s", c[kFetchS] / world_.size()},
          {"sample_s", c[kSampleS] / world_.size()},
          {"evictions", int64_t(c[kEvictions])},
          {"evicting_ranks", int64_t(c[kEvicting])},
          {"controller", p.controller}};
}

nlohmann::json SampledSource::epoch_metrics(std::vector<std::string>& lines) {
  std::vector<double>& sums = s_->epoch_sums;
  s_->train_metric.reset();  // the next epoch's steps score afresh
  const double waited = s_->pipeline.waited_seconds() - s_->waited_before;
  s_->waited_before = s_->pipeline.waited_seconds();
  nlohmann::json j = {{"mode", "sampled"},
                      {"policy", prefetch_policy_name(s_->o.prefetch.policy)},
                      {"remote_rows", int64_t(sums[kRemote])},
                      {"hit_rate", sums[kRemote] > 0 ? sums[kHits] / sums[kRemote] : 0.0},
                      {"fetched_rows", int64_t(sums[kFetchedRows])},
                      {"fetched_bytes", int64_t(sums[kFetchedBytes])},
                      {"evictions", int64_t(sums[kEvictions])},
                      {"fetch_s", sums[kFetchS] / world_.size()},
                      {"sample_s", sums[kSampleS] / world_.size()},
                      {"gather_s", sums[kGatherS] / world_.size()},
                      {"upload_s", sums[kUploadS] / world_.size()},
                      {"waited_s", waited},
                      {"simulated_network", s_->o.network.describe()}};
  // Each graph layer's block, per step and rank (means): what the step's floor is computed from.
  nlohmann::json blocks = nlohmann::json::array();
  const double per_step = 1.0 / (double(steps_) * world_.size());
  for (size_t at = kCounters; at + kShapeCounters <= sums.size(); at += kShapeCounters)
    blocks.push_back(
        {{"dst", sums[at] * per_step}, {"src", sums[at + 1] * per_step}, {"nnz", sums[at + 2] * per_step}});
  j["blocks"] = blocks;
  char line[256];
  std::snprintf(
      line, sizeof(line),
      "           remote rows %lld, cache hit rate %.3f, fetched %lld rows (%.1f MB), %lld evictions",
      (long long)sums[kRemote], sums[kRemote] > 0 ? sums[kHits] / sums[kRemote] : 0.0,
      (long long)sums[kFetchedRows], sums[kFetchedBytes] * 1e-6, (long long)sums[kEvictions]);
  lines.push_back(line);
  std::fill(sums.begin(), sums.end(), 0.0);
  return j;
}

EpochWork SampledSource::epoch_work() const {
  return {s_->epoch_sums[kSeeds], "seeds"};
}

Accuracy SampledSource::evaluate(Model& model, Loss& loss, int64_t epoch) {
  if (s_->links) return evaluate_links(model, loss);
  Accuracy a = !s_->o.exact_eval || !exact_fits(model) ? evaluate_sampled(model, loss, epoch)
                                                       : evaluate_exact(model, loss);
  // "Train" is the epoch's training steps' own score, with dropout, in either case.
  a.train = 0;
  if (s_->train_metric) a.train = s_->train_metric->value(s_->logits_layout(model), world_);
  return a;
}

Accuracy SampledSource::evaluate_sampled(Model& model, Loss& loss, int64_t epoch) {
  State& s = *s_;
  Accuracy a;
  const std::unique_ptr<Metric> metric = loss.metric();
  a.metric = metric->name();
  // The metric on `nodes` (and the loss's mean over them to `mean_loss`, where not null).
  auto on = [&](const std::vector<int64_t>& nodes, double* mean_loss) {
    const int64_t batch = s.o.batch_size;
    const int64_t rounds =
        all_reduce_value(world_, (int64_t(nodes.size()) + batch - 1) / batch, ReduceOp::Max, "eval");
    double counts[2] = {0, 0};  // summed loss, covered seeds
    for (int64_t r = 0; r < rounds; ++r) {
      const int64_t begin = std::min<int64_t>(int64_t(nodes.size()), r * batch);
      const int64_t end = std::min<int64_t>(int64_t(nodes.size()), begin + batch);
      const std::vector<int64_t> chunk(nodes.begin() + begin, nodes.begin() + end);
      // Every rank samples and fetches (collectives) even with no nodes of its own left.
      const PreparedStep p =
          s.prepare(*s.eval_sampler, *s.eval_fetch, chunk, kEvalKeyOffset + epoch, r, false);
      if (chunk.empty()) continue;  // the model on one rank runs no collective
      const LossSum summed = s.score_on(model, loss, *metric, p, epoch);
      counts[0] += summed.sum;
      counts[1] += double(summed.count);
    }
    all_reduce(world_, counts, 2, ReduceOp::Sum, "eval");
    if (mean_loss) *mean_loss = counts[1] > 0 ? counts[0] / counts[1] : 0.0;
    return metric->value(s.logits_layout(model), world_);
  };
  a.valid = on(graph_.valid, &a.valid_loss);
  a.test = on(graph_.test, nullptr);
  return a;
}

void SampledSource::write_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) {
  if ((s_->o.exact_final || s_->links) && exact_fits(model))
    write_exact_outputs(model, epoch, paths);
  else
    write_sampled_outputs(model, epoch, paths);
}

void SampledSource::write_sampled_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) {
  State& s = *s_;
  NodeClasses classes;
  NodeRowBlock rows;
  // A link task's embeddings are the model's output (what its pairs are scored by).
  const ActivationLayout& at = paths.link_task ? model.output_layout() : model.embeddings_layout();
  rows.cols = at.local_cols;
  const int64_t batch = s.o.batch_size;
  const int64_t rounds =
      all_reduce_value(world_, (graph_.count + batch - 1) / batch, ReduceOp::Max, "outputs");
  for (int64_t r = 0; r < rounds; ++r) {
    std::vector<int64_t> chunk;
    for (int64_t v = graph_.first + r * batch;
         v < std::min(graph_.first + graph_.count, graph_.first + (r + 1) * batch); ++v)
      chunk.push_back(v);
    const PreparedStep p =
        s.prepare(*s.eval_sampler, *s.eval_fetch, chunk, kOutputKeyOffset + epoch, r, false);
    if (chunk.empty()) continue;
    s.upload(p);
    const Matrix<const float> logits = model.forward(s.batch.input, s.views, PassInfo{false, s.seed, epoch});
    const ActivationLayout& out = model.output_layout();
    const LogitsLayout layout{&s.grid.axis(out.rows_axis), &s.grid.axis(out.cols_axis), out.col_begin,
                              out.width};
    const auto pred = Kokkos::create_mirror_view_and_copy(HostSpace(), argmax_3d(layout, logits));
    const auto x =
        Kokkos::create_mirror_view_and_copy(HostSpace(), paths.link_task ? logits : model.embeddings());
    for (size_t i = 0; i < chunk.size(); ++i) {
      const int64_t file_id = graph_.file_id[size_t(chunk[i] - graph_.first)];
      classes.nodes.push_back(file_id);
      classes.classes.push_back(pred(i));
      rows.nodes.push_back(file_id);  // the seeds are the leading rows of the last layer's input
      for (int64_t j = 0; j < rows.cols; ++j) rows.values.push_back(x(i, size_t(j)));
    }
  }
  const OutputOrder order = read_output_order(world_, paths.graph);
  // A multi-label graph has no class per node to write (train refuses `save-predictions` for one).
  if (paths.want_predictions() && !graph_.multi_label)
    output_predictions(world_, paths, graph_.num_nodes, classes, order);
  if (paths.want_embeddings())
    output_embeddings(world_, paths, graph_.num_nodes, at.width, rows, model.describe(), epoch + 1, order);
}

}  // namespace tessera
