// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/modes/minibatch.hpp"

#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/flat_id_map.hpp"
#include "tessera/models/modes/full_graph.hpp"

namespace tessera {

namespace {

// Rows `index` of a device vector, in order, into `out` (as long as index).
template <class T>
void gather(const Vector<T>& v, const Vector<const int64_t>& index, const Vector<T>& out) {
  Kokkos::parallel_for(
      "tessera::gather_rows", Kokkos::RangePolicy<ExecSpace>(0, int64_t(index.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { out(i) = v(index(i)); });
}

// Rows `index` of the features (floats or bf16 bits) as floats: the step's input block, every entry of
// `input` written.
template <class T>
void gather_rows_widened(const Matrix<const T>& features, const Vector<const int64_t>& index,
                         const Matrix<float>& input) {
  Kokkos::parallel_for(
      "tessera::gather_features", Kokkos::RangePolicy<ExecSpace>(0, int64_t(index.extent(0))),
      KOKKOS_LAMBDA(int64_t i) {
        for (size_t j = 0; j < input.extent(1); ++j) input(i, j) = widened(features(index(i), j));
      });
}

}  // namespace

void gather_task_rows(const Matrix<const int8_t>& targets, const Vector<const int64_t>& index,
                      const Matrix<int8_t>& out) {
  require(out.extent(1) == targets.extent(1) && out.extent(0) <= index.extent(0),
          "gather_task_rows: ", out.extent(0), " x ", out.extent(1), " rows from ", index.extent(0),
          " indices of ", targets.extent(1), " tasks");
  const int64_t tasks = int64_t(targets.extent(1));
  Kokkos::parallel_for(
      "tessera::gather_task_rows", Kokkos::RangePolicy<ExecSpace>(0, int64_t(out.extent(0)) * tasks),
      KOKKOS_LAMBDA(int64_t e) { out(e / tasks, e % tasks) = targets(index(e / tasks), e % tasks); });
}

namespace {

// A host array's pointer, or null where it is empty: an empty Kokkos View may still hold a non-null pointer
// (its allocation header), and the sampler reads a weight array wherever its pointer is set.
template <class T>
const T* data_or_null(const HostVector<T>& v) {
  return v.extent(0) > 0 ? v.data() : nullptr;
}

// The self block of a sample: row r, column c where both are the same vertex (a pattern).
HostCsr self_of(const SampledIndex& rows, const SampledIndex& cols) {
  FlatIdMap col_of(cols.ids.size());
  for (size_t c = 0; c < cols.ids.size(); ++c) col_of.try_emplace(cols.ids[c], int64_t(c));
  HostCsr a;
  a.num_rows = int64_t(rows.ids.size());
  a.num_cols = int64_t(cols.ids.size());
  for (int64_t v : rows.ids) {
    const int64_t c = col_of.find(v);
    if (c >= 0) a.col_idx.push_back(c);
    a.row_ptr.push_back(int64_t(a.col_idx.size()));
  }
  return a;
}

// The transpose only where `has_transpose` (BatchNeeds::transposes).
std::unique_ptr<AdjacencyBlock> upload_block(const HostCsr& forward, const HostCsr& transposed,
                                             bool has_transpose, StepUploads& into) {
  auto block = std::make_unique<AdjacencyBlock>();
  block->forward = into.spmm(into.csr(forward));
  block->has_transpose = has_transpose;
  if (has_transpose) block->transpose = into.spmm(into.csr(transposed));
  block->nnz = int64_t(forward.col_idx.size());
  return block;
}

}  // namespace

CsrMatrix<float, DeviceSpace> upload_csr(const HostCsr& a) {
  CsrMatrix<float, DeviceSpace> m;
  m.num_rows = a.num_rows;
  m.num_cols = a.num_cols;
  m.row_ptr = upload_vector(a.row_ptr, "sample_row_ptr");
  m.col_idx = upload_vector(a.col_idx, "sample_col_idx");
  m.values = upload_vector(a.values, "sample_values");
  return m;
}

float off_diagonal_scale(int64_t num_nodes, int64_t batch_size) {
  require(batch_size >= 2 && batch_size <= num_nodes, "`batch-size` ", batch_size,
          " must be between 2 and the ", num_nodes, " nodes");
  return float(1.0 / pair_inclusion_probability(num_nodes, batch_size));
}

MinibatchBuilder::MinibatchBuilder(const ProcessGrid& grid, const Graph3D& graph, int64_t batch_size,
                                   const BatchNeeds& needs)
    : graph_(graph), batch_size_(batch_size), needs_(needs) {
  const NodeLayout& layout = graph.layout;
  (void)graph.node_data_for(needs.layers);  // throws where the graph does not serve the depth
  scale_ = off_diagonal_scale(layout.num_nodes(), batch_size);
  for (int l = 0; l < needs.layers; ++l) {
    const AxisRoles r = roles_for_layer(l);
    row_range_.push_back(layout.node_block(r.c, grid.coords().get(r.c)));
    col_range_.push_back(layout.node_block(r.a, grid.coords().get(r.a)));
    const CsrSpmm<float>& block = graph.adjacency[size_t(l % 6)].forward;
    const auto& a = block.matrix();
    blocks_.push_back({std::max(a.num_cols, col_range_.back().second - col_range_.back().first),
                       Kokkos::create_mirror_view_and_copy(HostSpace(), a.row_ptr),
                       Kokkos::create_mirror_view_and_copy(HostSpace(), a.col_idx),
                       Kokkos::create_mirror_view_and_copy(HostSpace(), a.values),
                       Kokkos::create_mirror_view_and_copy(HostSpace(), block.row_scale()),
                       Kokkos::create_mirror_view_and_copy(HostSpace(), block.col_scale())});
    require(!a.is_pattern() || block.scaled(), "mini-batch sampling needs a weighted adjacency block");
  }
}

HostBatch MinibatchBuilder::build(const SampleKey& key) const {
  const NodeLayout& layout = graph_.layout;
  HostBatch b;
  const std::vector<int64_t> sample = uniform_vertex_sample(layout.num_nodes(), batch_size_, key);
  // Every layer orders its rows and columns by p1 or p2: each sample vertex's two positions are computed,
  // and each ordering sorted, once; every layer's rows and columns are then slices of them.
  std::vector<int64_t> in_p1(sample.size()), in_p2(sample.size());
  for (size_t k = 0; k < sample.size(); ++k) {
    in_p1[k] = layout.p1().inverse(sample[k]);
    in_p2[k] = layout.p2().inverse(sample[k]);
  }
  const SampleOrder by_p1 = order_sample(sample, in_p1), by_p2 = order_sample(sample, in_p2);
  for (int l = 0; l < needs_.layers; ++l) {
    // Layer l's rows are in row_order(l) = p1 on even layers, p2 on odd ones; its columns in the other.
    const SampleOrder& row_order = l % 2 == 0 ? by_p1 : by_p2;
    const SampleOrder& col_order = l % 2 == 0 ? by_p2 : by_p1;
    const auto [r0, r1] = row_range_[size_t(l)];
    const auto [c0, c1] = col_range_[size_t(l)];
    b.rows.push_back(sampled_positions(row_order, r0, r1));
    b.cols.push_back(sampled_positions(col_order, c0, c1));
    const HostBlock& a = blocks_[size_t(l)];
    const BlockWeights weights{data_or_null(a.values), data_or_null(a.row_scale), data_or_null(a.col_scale)};
    b.forward.push_back(induced_block(a.row_ptr.data(), a.col_idx.data(), weights, a.num_cols, b.rows.back(),
                                      b.cols.back(), scale_));
    const bool transposed = needs_.transposed(l);
    b.transpose.push_back(transposed ? transpose(b.forward.back()) : HostCsr());
    if (needs_.self_blocks) {
      b.self.push_back(self_of(b.rows.back(), b.cols.back()));
      b.self_transpose.push_back(transposed ? transpose(b.self.back()) : HostCsr());
    }
  }
  return b;
}

DeviceBatch MinibatchBuilder::upload(const HostBatch& b) const {
  StepUploads fresh;  // the batch's views keep its buffers
  return upload(b, fresh);
}

DeviceBatch MinibatchBuilder::upload(const HostBatch& b, StepUploads& into) const {
  const auto ids = [&](const std::vector<int64_t>& v) { return into.ids(v.data(), v.size()); };
  DeviceBatch d;
  const int layers = needs_.layers;
  for (int l = 0; l < layers; ++l) {
    d.graph.blocks.push_back(
        upload_block(b.forward[size_t(l)], b.transpose[size_t(l)], needs_.transposed(l), into));
    const AdjacencyBlock* adjacency = d.graph.blocks.back().get();
    const AdjacencyBlock* self = nullptr;
    if (needs_.self_blocks) {
      d.graph.blocks.push_back(
          upload_block(b.self[size_t(l)], b.self_transpose[size_t(l)], needs_.transposed(l), into));
      self = d.graph.blocks.back().get();
    }
    const int64_t rows = int64_t(b.rows[size_t(l)].local.size());
    d.graph.layers.push_back(
        LayerGraph{adjacency, self, ids(b.rows[size_t(l)].ids), rows, batch_size_, false});
  }
  const Vector<const int64_t> in_rows = ids(b.cols[0].local);
  const bool bf16 = graph_.feature_dtype == StorageDtype::Bf16;
  d.input = into.rows(int64_t(in_rows.extent(0)),
                      int64_t(bf16 ? graph_.features_bf16.extent(1) : graph_.features.extent(1)));
  if (bf16)
    gather_rows_widened(Matrix<const uint16_t>(graph_.features_bf16), in_rows, d.input);
  else
    gather_rows_widened(Matrix<const float>(graph_.features), in_rows, d.input);
  d.input_ids = ids(b.cols[0].ids);
  d.graph.input = LayerGraph{nullptr, nullptr, d.input_ids, int64_t(in_rows.extent(0)), batch_size_, false};
  d.graph.scratch_input = d.input.data();  // gathered for this step only
  const Vector<const int64_t> out_rows = ids(b.rows[size_t(layers - 1)].local);
  const NodeData& data = graph_.node_data_for(layers);
  const size_t outputs = out_rows.extent(0);
  d.labels = into.labels(outputs);
  gather(data.labels, out_rows, d.labels);
  d.train = into.mask(outputs);
  gather(data.mask("train"), out_rows, d.train);
  if (data.targets.extent(1) > 0) {
    d.targets = into.task_rows(int64_t(outputs), int64_t(data.targets.extent(1)));
    gather_task_rows(data.targets, out_rows, d.targets);
  }
  Kokkos::fence();
  return d;
}

MinibatchSource::MinibatchSource(const Graph3D& graph, const ProcessGrid& grid, const Communicator& world,
                                 const MinibatchOptions& options, const Model& model)
    : MinibatchSource(graph, grid, world, options, check_model_fits_graph(model, graph), model.seed()) {}

MinibatchSource::MinibatchSource(const Graph3D& graph, const ProcessGrid& grid, const Communicator& world,
                                 const MinibatchOptions& options, const BatchNeeds& needs, uint64_t seed)
    : graph_(graph),
      grid_(grid),
      world_(world),
      options_(options),
      seed_(seed),
      pipeline_(options.sampler_thread),
      full_(full_graph_batch(graph, needs)) {
  const int64_t n = graph.layout.num_nodes();
  std::string problem;
  int64_t b = options.batch_size;
  if (b == 0) b = std::max<int64_t>(2, int64_t(options.batch_fraction * double(n)));
  try {
    require(options.batch_size > 0 || (options.batch_fraction > 0 && options.batch_fraction <= 1),
            "`batch-size`: give a count of vertices or a fraction of the nodes in (0, 1]");
    require(b >= 2 && b <= n, "`batch-size` ", b, " gives ", b,
            " nodes; it must be between 2 and the graph's ", n);
    batch_size_ = b;
    // A device build cuts on the device (no upload per step); a host build where its sampler thread can
    // build the next batch while the step trains.
    const bool device = options.sample_on == SamplePlace::Device ||
                        (options.sample_on == SamplePlace::Auto && !std::is_same_v<DeviceSpace, HostSpace>);
    if (device)
      device_builder_ = std::make_unique<DeviceMinibatchBuilder>(grid, graph, b, needs);
    else
      builder_ = std::make_unique<MinibatchBuilder>(grid, graph, b, needs);
  } catch (const Error& e) {
    problem = e.what();
  }
  world.check(problem.empty(), problem);
  const int64_t per_step = b * grid.shape().d;
  steps_ = options.steps_per_epoch > 0 ? options.steps_per_epoch
                                       : std::max<int64_t>(1, (n + per_step - 1) / per_step);
}

std::string MinibatchSource::describe() const {
  char line[256];
  const GridShape& s = grid_.shape();
  std::snprintf(
      line, sizeof(line),
      "mini-batches of %lld of %lld vertices (p = %.4f) on grid %dx%s, %lld steps per epoch; sampler %s",
      (long long)batch_size(), (long long)num_nodes(), pair_inclusion_probability(num_nodes(), batch_size()),
      s.d, GridShape{1, s.x, s.y, s.z}.str().c_str(), (long long)steps_,
      device_builder_           ? "on the device"
      : options_.sampler_thread ? "thread"
                                : "inline");
  return line;
}

void MinibatchSource::request(int64_t epoch, int64_t step) {
  const SampleKey key{seed_, epoch, step, grid_.coords().d};
  pipeline_.request([builder = builder_.get(), key] { return builder->build(key); });
  requested_ = {epoch, step};
}

const Batch& MinibatchSource::batch(int64_t epoch, int64_t step) {
  if (device_builder_) {
    Stopwatch watch;
    current_ = DeviceBatch();  // the step before's arrays are written again by the build
    current_ = device_builder_->build(SampleKey{seed_, epoch, step, grid_.coords().d});
    device_build_s_ += watch.seconds();
    batch_ = Batch{&current_.graph, current_.input, current_.labels, current_.train, current_.targets};
    return batch_;
  }
  if (requested_ != std::make_pair(epoch, step)) {  // the first step of a run (or a resumed one)
    if (requested_.first >= 0) pipeline_.take();
    request(epoch, step);
  }
  const HostBatch host = pipeline_.take();
  // Ask for the next batch before training on this one: the sampler thread works meanwhile.
  request(step + 1 < steps_ ? epoch : epoch + 1, (step + 1) % steps_);
  current_ = DeviceBatch();  // the step before's blocks go first: their buffers are written again
  uploads_.restart();
  current_ = builder_->upload(host, uploads_);
  batch_ = Batch{&current_.graph, current_.input, current_.labels, current_.train, current_.targets};
  return batch_;
}

int64_t MinibatchSource::pass_key(int64_t epoch, int64_t step) const {
  return (epoch * steps_ + step) * grid_.shape().d + grid_.coords().d;
}

double MinibatchSource::loss_weight(int64_t count) {
  // Each replica's loss is the mean over its sample's labeled training vertices; the replicas average.
  return count > 0 ? 1.0 / (double(count) * double(grid_.shape().d)) : 0.0;
}

Accuracy MinibatchSource::evaluate(Model& model, Loss& loss, int64_t epoch) {
  return evaluate_full_graph(model, loss, graph_, full_, epoch);
}

void MinibatchSource::write_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) {
  write_full_graph_outputs(model, graph_, full_, epoch, paths, world_);
}

double MinibatchSource::sampling_seconds() const {
  return pipeline_.build_seconds() + device_build_s_;
}

double MinibatchSource::waiting_seconds() const {  // the device cut runs in the trainer's stead
  return pipeline_.waited_seconds() + device_build_s_;
}

nlohmann::json MinibatchSource::epoch_metrics(std::vector<std::string>& lines) {
  nlohmann::json j;
  j["steps"] = steps_;
  j["sample_s"] = all_reduce_value(world_, sampling_seconds() - build_before_, ReduceOp::Max, "report");
  j["sample_wait_s"] = all_reduce_value(world_, waiting_seconds() - wait_before_, ReduceOp::Max, "report");
  build_before_ = sampling_seconds();
  wait_before_ = waiting_seconds();
  char line[200];
  std::snprintf(line, sizeof(line), "      sampling %.1f ms per epoch, trainer waited %.1f ms for it",
                1e3 * j["sample_s"].get<double>(), 1e3 * j["sample_wait_s"].get<double>());
  lines.push_back(line);
  return j;
}

}  // namespace tessera
