// SPDX-License-Identifier: BSD-3-Clause
// Partition-parallel neighbour-sampled training (docs/architecture.md §6, DistDGL / MassiveGNN / Rudder) as a
// batch source: one model replica per rank (the grid P x 1 x 1 x 1) on its partition's training nodes; per
// step the rank samples message-flow blocks (remote frontier nodes sampled by their owners), fetches the
// input rows it does not own through the feature cache in one all-to-all, and the Trainer sums the gradients
// over ranks, each rank's loss weighted so the mean is over every rank's seeds. A worker thread prepares
// step t + 1 (sampling, cache lookup, fetch, eviction) on its own communicator while step t computes; it
// touches only plain host memory, and the main thread uploads what it prepared.
// Block weights: the aggregate term of row v (a destination) with d_v its full in-degree and k_v the
// neighbours kept:
//   Symmetric (GCN): self 1/(d_v + 1); neighbour u (d_v/k_v)/sqrt((d_v + 1)(d_u + 1)) — an unbiased
//                    estimate of A_hat's row, exact when every neighbour is kept;
//   Mean (SAGE):     1/k_v per kept neighbour; the root term uses v's own row (the self block);
//   Sum:             1 per kept neighbour.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/simulated_network.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/enum_names.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/models/nn/link_loss.hpp"
#include "tessera/models/training/batch_source.hpp"
#include "tessera/prefetch/controller.hpp"
#include "tessera/sampling/induced.hpp"
#include "tessera/sampling/neighbor.hpp"
#include "tessera/sampling/neighbor_device.hpp"

namespace tessera {

/// The weight of a sampled block's edge from a source of in-degree `src_degree` into a destination of
/// in-degree `dst_degree` of whose in-edges `kept` were drawn uniformly, such that the block's product is an
/// unbiased estimate of the full aggregation: GCN's symmetric weight (degree_scale, graph/normalize.hpp, of
/// d_v + 1 and d_u + 1) scaled by d_v / kept, the mean over the kept edges, or one (Sum). The one formula of
/// the host and device samplers.
KOKKOS_INLINE_FUNCTION float sampled_edge_weight(Normalization normalization, double dst_degree,
                                                 double src_degree, double kept) {
  return normalization == Normalization::Symmetric
             ? float(dst_degree / kept * degree_scale(normalization, dst_degree + 1.0) *
                     degree_scale(normalization, src_degree + 1.0))
         : normalization == Normalization::Mean ? float(degree_scale(normalization, kept))
                                                : 1.0f;
}
/// The weight of a destination's own entry in a GCN block: 1 / (d_v + 1), its loop's symmetric weight.
KOKKOS_INLINE_FUNCTION float sampled_self_weight(double dst_degree) {
  return float(degree_scale(Normalization::Mean, dst_degree + 1.0));
}

/// A sampled block's aggregation weights (plain host memory: the worker thread builds it), from the
/// in-degrees of its src nodes (block.src_degree, which NeighborSampler fills).
HostCsr block_operator(const SampledBlock& block, Normalization normalization);

/// The self block of a message-flow block (`dst` rows, `src` columns): destination i is source i.
HostCsr leading_identity(int64_t dst, int64_t src);

/// block_operator in kernels, for a block DeviceNeighborSampler built: the same entries, order and bits.
CsrMatrix<float, DeviceSpace, SpmmColumn> device_block_operator(const DeviceSampledBlock& block,
                                                                Normalization normalization);
/// The transpose in kernels, each row's columns increasing (the order transpose(HostCsr) gives); a pattern
/// stays a pattern.
CsrMatrix<float, DeviceSpace, SpmmColumn> device_transpose(
    const CsrMatrix<float, DeviceSpace, SpmmColumn>& a);
/// leading_identity in the execution space's memory (a pattern).
CsrMatrix<float, DeviceSpace, SpmmColumn> device_leading_identity(int64_t dst, int64_t src);
/// The `rows` x `cols` pattern with a one at (i, i) for every i below both, written in a kernel into
/// row_ptr (rows + 1 offsets) and col_idx (min(rows, cols) columns): leading_identity(dst, src) with rows =
/// dst, cols = src, and its transpose with the two swapped.
void write_leading_identity(int64_t rows, int64_t cols, const Vector<int64_t>& row_ptr,
                            const Vector<SpmmColumn>& col_idx);

/// The labeled training nodes a rank trains on in step `step` of `steps`: its owned ones (`train`, with
/// labels[v - first] >= 0) shuffled by (seed, epoch), cut into `steps` nearly equal consecutive pieces.
std::vector<int64_t> step_seeds(const std::vector<int64_t>& train, const std::vector<int64_t>& labels,
                                int64_t first, uint64_t seed, int64_t epoch, int64_t step, int64_t steps);

/// step_seeds for every step of an epoch, shuffling once per epoch (a sort of the training nodes) instead
/// of once per step. Not thread-safe: one caller (the thread that builds batches).
class EpochSeeds {
 public:
  /// As step_seeds takes them; `train` and `labels` must outlive this.
  EpochSeeds(const std::vector<int64_t>& train, const std::vector<int64_t>& labels, int64_t first,
             uint64_t seed)
      : train_(train), labels_(labels), first_(first), seed_(seed) {}
  /// What step_seeds(train, labels, first, seed, epoch, step, steps) returns.
  std::vector<int64_t> seeds(int64_t epoch, int64_t step, int64_t steps);

 private:
  const std::vector<int64_t>& train_;
  const std::vector<int64_t>& labels_;
  int64_t first_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<int64_t> order_;  // the epoch's shuffle
};

/// Where a sampled run prepares each next training step (sample, cache lookup, fetch).
enum class StepThread {
  Auto,  ///< On, except where each rank runs one thread and the ranks fill the node's CPUs
  On,    ///< a worker thread prepares step t + 1 while step t trains (needs MPI_THREAD_MULTIPLE)
  Off    ///< each step is prepared when it is needed, on the rank's own thread
};
/// The names --prefetch-thread takes.
inline constexpr EnumName<StepThread> kStepThreadNames[] = {
    {StepThread::Auto, "auto"}, {StepThread::On, "on"}, {StepThread::Off, "off"}};
/// auto, on or off: the name of a value.
inline const char* step_thread_name(StepThread t) {
  return name_of(kStepThreadNames, t);
}

/// Whether a sampled run uses its worker thread: On and Off as asked; Auto off only where each of the
/// node's `node_ranks` ranks runs one compute thread (`node_threads` in all) and the node's `node_cpus`
/// leave none free for the workers: there the worker shares its rank's one core and the step was measured
/// slower with it. `reason` (may be null) gets why.
bool uses_step_thread(StepThread asked, int node_ranks, int node_cpus, int node_threads,
                      std::string* reason = nullptr);

/// The mode's settings.
struct SampledOptions {
  std::vector<int> fanouts;     ///< per layer, input layer first (-1: all); empty: 10 each
  int64_t batch_size = 1024;    ///< seeds per rank per step (a link task: training pairs)
  int64_t steps_per_epoch = 0;  ///< 0: the most training nodes of a rank / batch_size
  /// Which partition the run trains on: /partition/NAME of the graph file (empty: metis-RANKS, or block on
  /// one rank), read from `partition_file` (tessera partition --output) where given.
  std::string partition;
  std::string partition_file;  ///< a partition file of its own instead of the graph file (empty: the graph)
  PrefetchOptions prefetch;    ///< the remote-feature cache and who decides its evictions
  StepThread thread = StepThread::Auto;  ///< where step t + 1 is prepared while step t trains
  /// Every epoch's evaluation exact (layer-wise, every neighbour: layerwise.hpp) instead of on sampled
  /// neighbourhoods of the validation and test nodes.
  bool exact_eval = false;
  /// Node outputs and a final evaluation of the best-validation parameters exact, where the memory allows
  /// it (SampledSource::exact_fits); false: node outputs from sampled neighbourhoods, no final evaluation.
  bool exact_final = true;
  SimulatedNetwork network;  ///< benchmarks only: also wait as long as each exchange would take
  /// Where training steps are sampled: Device builds each step's blocks, weights and input rows in kernels
  /// (one rank only: remote neighbour lists and the feature cache are host memory); Auto is Device on a
  /// device build with one rank. Evaluation and node outputs sample on the host either way.
  SamplePlace sample_on = SamplePlace::Auto;
};

/// Where a sampled run builds its training steps: `asked` (SampledOptions::sample_on) for a run of `ranks`
/// ranks in a device build or not, where steps built on the device keep `resident_bytes` in its memory
/// (DeviceSampledSteps::resident_bytes) and the device has `device_free` bytes free (-1: unknown). Auto is
/// Device on a device build with one rank where those bytes fit in half the free memory (the other half for
/// the steps themselves), else Host. Device on more than one rank, or where they do not fit, throws Error.
SamplePlace sampled_step_place(SamplePlace asked, bool device_build, int ranks, int64_t resident_bytes,
                               int64_t device_free);

/// A training step of a rank that owns the whole graph, built in kernels (SamplePlace::Device): the
/// neighbour sample, each block's weights and, where a backward reads it, transpose (and self block), the
/// input rows gathered from the features held in the execution space's memory and the seeds' labels; only
/// the seeds are uploaded.
class DeviceSampledSteps {
 public:
  /// One block's sizes: destination rows, source rows, sampled edges.
  struct Shape {
    int64_t dst = 0;    ///< destination rows
    int64_t src = 0;    ///< source rows
    int64_t edges = 0;  ///< sampled edges
  };
  /// Keeps the graph's neighbour lists, features and labels where kernels read them (views of the graph's
  /// own arrays on host builds). The graph must outlive it; throws Error unless this rank owns every node.
  DeviceSampledSteps(const PartitionedGraph& graph, const std::vector<int>& fanouts, uint64_t seed,
                     Normalization normalization, const BatchNeeds& needs);
  /// Bytes a device build keeps in the device's memory for `graph` before any step: the features, the
  /// neighbour lists, the labels and a position per node.
  static int64_t resident_bytes(const PartitionedGraph& graph);
  /// The batch of step (epoch, step) on these seeds (global ids), valid until the next call.
  const Batch& build(const std::vector<int64_t>& seeds, int64_t epoch, int64_t step);
  /// Per graph layer (input layer first), the last batch's block sizes.
  const std::vector<Shape>& shapes() const { return shapes_; }
  /// Seconds the last build spent sampling (blocks, their weights and transposes).
  double sample_seconds() const { return sample_s_; }
  /// Seconds the last build spent gathering its input rows and labels.
  double gather_seconds() const { return gather_s_; }

 private:
  const PartitionedGraph& graph_;
  DeviceNeighborSampler sampler_;
  Normalization normalization_;
  BatchNeeds needs_;
  Matrix<const float> features_;
  Vector<const int64_t> labels_;
  Matrix<const int8_t> targets_;  // a multi-label graph's tasks per owned node (else empty)
  Vector<int64_t> seeds_;
  Matrix<float> x_;
  Vector<int64_t> batch_labels_;
  Matrix<int8_t> batch_targets_;
  Vector<uint8_t> ones_;
  GraphBatch views_;
  Batch batch_;
  std::vector<Shape> shapes_;
  double sample_s_ = 0, gather_s_ = 0;
};

struct PreparedStep;  // sampled.cpp

/// Neighbour samples of each rank's own training nodes, remote rows through the prefetch cache.
class SampledSource : public BatchSource {
 public:
  /// Collective over `world`; `grid` is P x 1 x 1 x 1 on it. Checks the options on every rank (and the MPI
  /// thread level the worker thread needs). The graph and grid must outlive it.
  /// For `model`: its depth, the weighting its layers aggregate with (each sampled block is weighted so),
  /// what its batches need and its seed (which keys the samples) are asked of it; a model whose layers name
  /// no weighting is refused.
  SampledSource(const PartitionedGraph& graph, const ProcessGrid& grid, const Communicator& world,
                const SampledOptions& options, const Model& model);
  /// The same for a model whose layers name no weighting (a layer of one's own): each sampled block is
  /// weighted by `normalization`; a model whose layers name another one is refused.
  SampledSource(const PartitionedGraph& graph, const ProcessGrid& grid, const Communicator& world,
                const SampledOptions& options, const Model& model, Normalization normalization);
  ~SampledSource() override;

  std::string describe() const override;
  std::string mode() const override { return "sampled"; }
  /// The training seeds of every rank's steps so far this epoch (asked after the steps).
  EpochWork epoch_work() const override;
  int64_t steps_per_epoch() const override { return steps_; }
  int64_t num_nodes() const override { return graph_.num_nodes; }
  const Batch& batch(int64_t epoch, int64_t step) override;
  int64_t pass_key(int64_t epoch, int64_t step) const override { return epoch * steps_ + step; }
  double loss_weight(int64_t count) override;
  const Communicator& replicas() const override { return world_; }
  void observe(const Matrix<const float>& logits, const Batch& batch, const LogitsLayout& layout,
               const Loss& loss) override;
  Accuracy evaluate(Model& model, Loss& loss, int64_t epoch) override;
  void write_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) override;
  nlohmann::json step_metrics() override;
  nlohmann::json epoch_metrics(std::vector<std::string>& lines) override;

  /// Collective: whether an exact (layer-wise) pass fits in the memory each rank has (the node's available
  /// memory shared by its ranks), agreed over the ranks; a refusal is said in the log once.
  bool exact_fits(Model& model);
  /// Collective: train, valid and test accuracy (and validation loss) of `model` on every owned node of
  /// every rank, by exact layer-wise inference. The model must be a Sequential.
  Accuracy evaluate_exact(Model& model, Loss& loss);

  /// Collective, before the first batch: train a link task instead of the graph's labeled nodes. Each
  /// rank's steps are the training pairs whose first node it owns (shuffled each epoch, cut into the
  /// steps: `batch_size` pairs per rank per step, steps_per_epoch from the rank with the most), each with
  /// `negatives` targets drawn as LinkLoss draws them (link_negative_target); the step's seeds are the
  /// pairs' endpoints, any rank's nodes, their neighbourhoods sampled and their rows fetched as a node
  /// step's. The loss must be a LinkLoss over the same `task` (in this partition's ids). Evaluation and
  /// node outputs are exact (layer-wise): a model whose pass does not fit in memory is refused when
  /// evaluated. Steps are built on the host.
  void train_links(std::shared_ptr<const LinkTask> task, int64_t negatives);

  /// Bytes of the gradients summed each step (the simulated network charges their all-reduce).
  void set_gradient_bytes(int64_t bytes) { gradient_bytes_ = bytes; }
  /// The cache's counters over the run.
  const PrefetchTotals& totals() const { return totals_; }

 private:
  SampledSource(const PartitionedGraph& graph, const ProcessGrid& grid, const Communicator& world,
                const SampledOptions& options, const BatchNeeds& needs, Normalization normalization,
                uint64_t seed);
  struct State;
  Accuracy evaluate_sampled(Model& model, Loss& loss, int64_t epoch);
  Accuracy evaluate_links(Model& model, Loss& loss);
  void write_sampled_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths);
  void write_exact_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths);
  std::unique_ptr<State> s_;
  const PartitionedGraph& graph_;
  const Communicator& world_;
  Normalization normalization_;
  int exact_refused_ = -1;  // -1: not asked yet
  int64_t steps_ = 0, gradient_bytes_ = 0;
  bool thread_ = false;        // whether a worker thread prepares the steps
  std::string thread_reason_;  // and why, for the console
  PrefetchTotals totals_;
};

}  // namespace tessera
