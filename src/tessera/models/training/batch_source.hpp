// SPDX-License-Identifier: BSD-3-Clause
// Where a Trainer's steps come from (docs/architecture.md §9). A batch source knows its mode's data and how
// it is split: the full graph (one step per epoch), uniform vertex mini-batches on the 4D grid
// (docs/architecture.md §5), or partition-parallel neighbour samples with the prefetch cache
// (docs/architecture.md §6). It gives each step's batch, says how this replica's loss counts in the mean the
// gradients follow, evaluates, and writes per-node outputs; the Trainer's epoch loop is the same for all of
// them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/enum_names.hpp"
#include "tessera/models/nn/loss.hpp"
#include "tessera/models/nn/sequential.hpp"
#include "tessera/models/training/node_outputs.hpp"
#include "tessera/parallel3d/loss3d.hpp"

namespace tessera {

/// Where a mode builds its samples (mini-batch and sampled modes).
enum class SamplePlace {
  Auto,   ///< Device on device builds (sampled mode: where it runs on one rank), Host otherwise
  Host,   ///< on the host (a thread builds the next step's sample during the step), uploaded each step
  Device  ///< in kernels on the execution space (a GPU's, or the host's threads), nothing uploaded
};
/// The names of SamplePlace's values (core/enum_names.hpp): what the command line, the bindings and messages
/// use.
inline constexpr EnumName<SamplePlace> kSamplePlaceNames[] = {
    {SamplePlace::Auto, "auto"}, {SamplePlace::Host, "host"}, {SamplePlace::Device, "device"}};
/// auto or host or device: the name of a value.
inline const char* sample_place_name(SamplePlace place) {
  return name_of(kSamplePlaceNames, place);
}

/// One training step's data on this rank.
struct Batch {
  const GraphBatch* graph = nullptr;  ///< the graph views of every graph layer (owned by the source)
  Matrix<const float> input;          ///< the input block (its rows: graph->input)
  Vector<const int64_t> labels;       ///< the label of each logits row (-1: unlabeled or padding)
  Vector<const uint8_t> mask;         ///< the logits rows the loss covers
  Matrix<const int8_t> targets;     ///< multi-label tasks of each logits row (LossInput::targets); else empty
  Vector<const int64_t> nodes{};    ///< the node of each logits row (LossInput::nodes); empty where not given
  const RowPairs* pairs = nullptr;  ///< the step's node pairs (LossInput::pairs); null where not chosen
  /// Bf16: the input block is input_bf16 (bf16 bits; Model::forward_bf16) and `input` is empty.
  StorageDtype input_dtype = StorageDtype::F32;
  Matrix<const uint16_t> input_bf16{};  ///< the input block as bf16 bits (input_dtype Bf16)
};

/// Scores of one evaluation, in the metric of the Trainer's loss (Loss::metric: accuracy by default).
struct Accuracy {
  double train = 0;                 ///< on the training nodes
  double valid = 0;                 ///< on the validation nodes
  double test = 0;                  ///< on the test nodes
  double valid_loss = 0;            ///< the loss's mean on the validation nodes (0 without any)
  std::string metric = "accuracy";  ///< what train, valid and test measure (Metric::name)
};

/// What the feature cache saved over a run, summed over ranks (sampled mode).
struct PrefetchTotals {
  int64_t remote_rows = 0;    ///< remote input rows needed
  int64_t cache_hits = 0;     ///< of them, found in the cache
  int64_t fetched_rows = 0;   ///< rows fetched (misses and refills)
  int64_t fetched_bytes = 0;  ///< their bytes
  int64_t evictions = 0;      ///< slots replaced
  int64_t cache_rows = 0;     ///< the cache's slots over all ranks
  int64_t cache_bytes = 0;    ///< the bytes of their rows (bf16 features: 2 a value)
};

/// What one epoch processes, for its throughput: a count and what it counts.
struct EpochWork {
  double count = 0;  ///< per epoch (0: not known)
  std::string unit;  ///< "edges" (the adjacency's nonzeros, full graph) or "seeds" (sampled vertices)
};

/// A mode's data, as the Trainer sees it.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// One line about the data for the log.
  virtual std::string describe() const = 0;
  /// The mode's name in metrics records ("full", "minibatch", "sampled"; "custom" for an application's).
  virtual std::string mode() const { return "custom"; }
  /// What an epoch processes over every rank (the console's and metrics' throughput).
  virtual EpochWork epoch_work() const { return {}; }
  /// Steps in an epoch.
  virtual int64_t steps_per_epoch() const = 0;
  /// Nodes of the graph.
  virtual int64_t num_nodes() const = 0;
  /// The batch of (epoch, step). Asked in order, from the first epoch of the run on; valid until the next
  /// call (a source may prepare the next batch meanwhile).
  virtual const Batch& batch(int64_t epoch, int64_t step) = 0;
  /// The key of a step's dropout masks (PassInfo::epoch): distinct per step and replica.
  virtual int64_t pass_key(int64_t epoch, int64_t step) const = 0;
  /// Collective over the replicas: the factor on this replica's summed loss, given the rows it covered
  /// (counted over its 3D grid), so that the gradients summed over the replicas are those of the mean the
  /// mode trains on.
  virtual double loss_weight(int64_t count) = 0;
  /// The data-parallel replicas: gradients are summed over it, buffers averaged (one rank: itself).
  virtual const Communicator& replicas() const = 0;
  /// After each training step's forward (sources that score training on the steps, with `loss`'s metric,
  /// do it here).
  virtual void observe(const Matrix<const float>& logits, const Batch& batch, const LogitsLayout& layout,
                       const Loss& loss) {
    (void)logits, (void)batch, (void)layout, (void)loss;
  }
  /// Collective: the model's scores after `epoch` in `loss`'s metric, and its validation loss (evaluation
  /// passes).
  virtual Accuracy evaluate(Model& model, Loss& loss, int64_t epoch) = 0;
  /// Collective: every node's predicted class and last hidden representation, to the paths not empty.
  virtual void write_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) = 0;
  /// Collective: this step's metrics to add to a per-step JSON line (null: the mode writes no step lines).
  virtual nlohmann::json step_metrics() { return nullptr; }
  /// Collective: this epoch's metrics to add to its JSON line, and extra console lines.
  virtual nlohmann::json epoch_metrics(std::vector<std::string>& lines) {
    (void)lines;
    return nlohmann::json::object();
  }
};

}  // namespace tessera
