// SPDX-License-Identifier: BSD-3-Clause
// Mini-batches on the 4D grid (docs/architecture.md §5, ScaleGNN): every rank of 3D replica d draws the same
// uniform sample S of B vertices for (seed, epoch, step, d) and cuts, from the static blocks it already
// holds, the rows and columns of each layer that belong to S, scaling off-diagonal entries by 1 / p with p =
// (B - 1) / (N - 1). No message is sent. MinibatchBuilder::build() is plain host code (the sampler thread
// runs it) and upload() turns its result into device blocks and graph views on the main thread;
// DeviceMinibatchBuilder cuts the same batches with kernels, so a GPU build uploads nothing per step.
// MinibatchSource is the Trainer's batch source for this mode: weight gradients summed over D with each
// replica's loss a mean over its own sample (so they average over D), a full-graph forward for evaluation.
#pragma once

#include <memory>
#include <vector>

#include "tessera/kernels/spmm.hpp"
#include "tessera/models/modes/step_uploads.hpp"
#include "tessera/models/training/batch_source.hpp"
#include "tessera/sampling/induced.hpp"
#include "tessera/sampling/pipeline.hpp"
#include "tessera/sampling/uniform.hpp"

namespace tessera {

/// One rank's share of a mini-batch, in host containers.
struct HostBatch {
  std::vector<HostCsr> forward;         ///< per layer: the A_S block
  std::vector<HostCsr> transpose;       ///< per layer: its transpose (0 x 0 where BatchNeeds skips it)
  std::vector<HostCsr> self;            ///< per layer, when asked: the self block of S
  std::vector<HostCsr> self_transpose;  ///< per layer, when asked: its transpose (likewise)
  std::vector<SampledIndex> rows;       ///< per layer: sampled output rows
  std::vector<SampledIndex> cols;       ///< per layer: sampled input columns
};

/// The same on the device, ready for a model's forward.
struct DeviceBatch {
  GraphBatch graph;           ///< per-layer views (and the blocks they point into)
  Matrix<float> input;        ///< layer 0's sampled feature rows
  Vector<int64_t> input_ids;  ///< their vertex ids
  Vector<int64_t> labels;     ///< last layer's sampled output rows
  Vector<uint8_t> train;      ///< same rows: in the training split
  Matrix<int8_t> targets;     ///< same rows: a multi-label graph's task labels (else empty)
};

/// Rows index(0), ..., index(n - 1) of a multi-label graph's task labels (NodeData::targets) into the n
/// rows of `out` (as many tasks as targets; index holds at least n).
void gather_task_rows(const Matrix<const int8_t>& targets, const Vector<const int64_t>& index,
                      const Matrix<int8_t>& out);

/// The factor 1 / p by which a batch of `batch_size` of `num_nodes` vertices scales its off-diagonal
/// entries (pair_inclusion_probability); throws Error naming --batch-size unless 2 <= batch_size <=
/// num_nodes.
float off_diagonal_scale(int64_t num_nodes, int64_t batch_size);

/// Cuts mini-batches out of a Graph3D's static blocks.
class MinibatchBuilder {
 public:
  /// Keeps host copies of the static blocks and ids for a model that needs `needs` (its depth; self
  /// blocks: also cut each layer's self block). Throws Error where the graph does not serve that depth.
  MinibatchBuilder(const ProcessGrid& grid, const Graph3D& graph, int64_t batch_size,
                   const BatchNeeds& needs);
  /// Vertices per sample.
  int64_t batch_size() const { return batch_size_; }
  /// Thread-safe, no MPI, no Kokkos.
  HostBatch build(const SampleKey& key) const;
  /// Main thread: device blocks, views, gathered inputs, labels and masks of `batch`.
  DeviceBatch upload(const HostBatch& batch) const;
  /// The same with the blocks and id lists in `into`'s buffers (restarted by the caller: what it handed out
  /// before is overwritten).
  DeviceBatch upload(const HostBatch& batch, StepUploads& into) const;

 private:
  struct HostBlock {
    int64_t num_cols = 0;
    HostVector<int64_t> row_ptr;
    HostVector<SpmmColumn> col_idx;
    HostVector<float> values;                 // or empty, and the scales (CsrSpmm::scaled)
    HostVector<double> row_scale, col_scale;  // col_scale may be empty: ones
  };
  const Graph3D& graph_;
  int64_t batch_size_;
  BatchNeeds needs_;
  float scale_;
  std::vector<std::pair<int64_t, int64_t>> row_range_, col_range_;  // per layer, positions of my blocks
  std::vector<HostBlock> blocks_;                                   // per layer (by layout l mod 6)
};

/// Cuts the same mini-batches with kernels on the execution space (a GPU on device builds): the sample is
/// marked in a vertex array, each layer's sampled rows and columns are picked by scans over the block's
/// positions, and the induced blocks and their transposes are cut entry by entry from the static blocks and
/// from transposed copies of them made once here. Its batches equal MinibatchBuilder's (build, then upload)
/// bit for bit; per step the host reads a few counts per layer and uploads nothing. Main thread only.
class DeviceMinibatchBuilder {
 public:
  /// Keeps the layers' index maps on the device and a transposed copy of each layer's static block whose
  /// transpose a step builds (`needs.transposes`), for a model that needs `needs` (as MinibatchBuilder).
  DeviceMinibatchBuilder(const ProcessGrid& grid, const Graph3D& graph, int64_t batch_size,
                         const BatchNeeds& needs);
  ~DeviceMinibatchBuilder();
  DeviceMinibatchBuilder(const DeviceMinibatchBuilder&) = delete;
  DeviceMinibatchBuilder& operator=(const DeviceMinibatchBuilder&) = delete;
  /// Vertices per sample.
  int64_t batch_size() const { return batch_size_; }
  /// The batch of `key`: blocks, views, gathered inputs, labels and masks, all on the device, in buffers
  /// the builder keeps: valid until the next build, which writes them again (and allocates nothing where
  /// its batch is no larger than one before).
  DeviceBatch build(const SampleKey& key);
  /// Device bytes kept besides the graph: the transposed blocks, index maps, scratch, vertex marks and the
  /// last batch's buffers.
  int64_t bytes() const;

 private:
  struct Layer;
  struct Scratch;
  const Graph3D& graph_;
  int64_t batch_size_;
  BatchNeeds needs_;
  float scale_;
  std::vector<Layer> layers_;
  std::unique_ptr<Scratch> scratch_;  // the cuts' working arrays, kept between steps
  Vector<uint32_t> mark_;             // mark_(v) == generation_: v is in the current sample
  uint32_t generation_ = 0;
  StepUploads step_buffers_;  // a batch's arrays, written again by the next build
};

/// Device copy of a host CSR built off the main thread (values kept; none: a pattern).
CsrMatrix<float, DeviceSpace> upload_csr(const HostCsr& a);

/// Device copy of a host vector (node ids of a sampled block's rows).
template <class T>
Vector<T> upload_vector(const std::vector<T>& v, const char* name) {
  Vector<T> out(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), v.size());  // all copied
  Kokkos::deep_copy(out, HostVector<const T>(v.data(), v.size()));
  return out;
}

/// The mode's settings.
struct MinibatchOptions {
  int64_t batch_size = 0;       ///< vertices per sample (or 0 and batch_fraction)
  double batch_fraction = 0;    ///< a fraction of the nodes, when batch_size is 0
  int64_t steps_per_epoch = 0;  ///< 0: N / (B * D) rounded up, so an epoch sees about N vertices
  bool sampler_thread = true;   ///< build step t + 1's batch while step t trains (host cut only)
  SamplePlace sample_on = SamplePlace::Auto;  ///< where batches are cut
};

/// Uniform vertex mini-batches, one per replica and step.
class MinibatchSource : public BatchSource {
 public:
  /// Collective (checks the batch size on every rank): batches for `model`, whose needs and seed (which keys
  /// the samples) are asked of it and which must fit the graph (check_model_fits_graph). The graph and grid
  /// must outlive it.
  MinibatchSource(const Graph3D& graph, const ProcessGrid& grid, const Communicator& world,
                  const MinibatchOptions& options, const Model& model);

  std::string describe() const override;
  std::string mode() const override { return "minibatch"; }
  /// The sampled vertices of every replica's steps.
  EpochWork epoch_work() const override {
    return {double(batch_size()) * double(grid_.axis(Axis::D).size()) * double(steps_), "seeds"};
  }
  int64_t steps_per_epoch() const override { return steps_; }
  int64_t num_nodes() const override { return graph_.layout.num_nodes(); }
  const Batch& batch(int64_t epoch, int64_t step) override;
  int64_t pass_key(int64_t epoch, int64_t step) const override;
  double loss_weight(int64_t count) override;
  const Communicator& replicas() const override { return grid_.axis(Axis::D); }
  Accuracy evaluate(Model& model, Loss& loss, int64_t epoch) override;
  void write_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) override;
  nlohmann::json epoch_metrics(std::vector<std::string>& lines) override;
  /// Vertices per sample.
  int64_t batch_size() const { return batch_size_; }

 private:
  MinibatchSource(const Graph3D& graph, const ProcessGrid& grid, const Communicator& world,
                  const MinibatchOptions& options, const BatchNeeds& needs, uint64_t seed);
  void request(int64_t epoch, int64_t step);
  double sampling_seconds() const;
  double waiting_seconds() const;
  const Graph3D& graph_;
  const ProcessGrid& grid_;
  const Communicator& world_;
  MinibatchOptions options_;
  uint64_t seed_;
  int64_t batch_size_ = 0;
  std::unique_ptr<MinibatchBuilder> builder_;               // SamplePlace::Host
  std::unique_ptr<DeviceMinibatchBuilder> device_builder_;  // SamplePlace::Device
  double device_build_s_ = 0;                               // device cuts' time (the trainer waits for it)
  int64_t steps_ = 0;
  BatchPipeline<HostBatch> pipeline_;
  std::pair<int64_t, int64_t> requested_{-1, -1};
  DeviceBatch current_;
  StepUploads uploads_;  // current_'s blocks and ids (host cut), in buffers kept between steps
  Batch batch_;
  GraphBatch full_;  // evaluation
  double build_before_ = 0, wait_before_ = 0;
};

}  // namespace tessera
