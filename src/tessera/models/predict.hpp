// SPDX-License-Identifier: BSD-3-Clause
// `tessera predict` as a library call: a trained model's outputs for every node (or one split) of a graph,
// from a checkpoint of any training mode, on any number of ranks, without re-entering training. The model
// is rebuilt from the checkpoint's description and given the best-validation parameters where the
// checkpoint holds them (the final ones otherwise), then one of two exact engines runs it
// (docs/guide/inference.md): a full-graph forward on a 3D grid, or layer-wise inference over partitions
// (layerwise.hpp). Nothing is sampled: both give the full-graph forward of the same weights, up to float
// summation order. Predictions, class probabilities (a multi-label graph's: each task's) and the
// representation after any graph layer go to one HDF5 file in node order (and a CSV of predictions), with
// the run's metric on the file's splits.
#pragma once

#include <optional>
#include <string>

#include "tessera/comm/grid_shape.hpp"
#include "tessera/core/enum_names.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/models/nn/model.hpp"
#include "tessera/models/training/batch_source.hpp"

namespace tessera {

/// Which of a checkpoint's parameters an inference uses.
enum class CheckpointParameters {
  Auto,  ///< the best-validation epoch's where the checkpoint holds them, else the last epoch's
  Best,  ///< the best-validation epoch's (refused where the checkpoint has none)
  Final  ///< the last epoch's
};

/// The names of CheckpointParameters' values (core/enum_names.hpp).
inline constexpr EnumName<CheckpointParameters> kCheckpointParametersNames[] = {
    {CheckpointParameters::Auto, "auto"},
    {CheckpointParameters::Best, "best"},
    {CheckpointParameters::Final, "final"}};

/// How an inference runs; both are exact.
enum class InferenceEngine {
  Auto,      ///< layer-wise for a sampled-mode checkpoint, full for the others
  Full,      ///< one full-graph forward on a 3D grid (memory as a full-graph training step's forward)
  Layerwise  ///< graph layer by graph layer over partitions, O((owned + halo) x width) per rank
};

/// The names of InferenceEngine's values (core/enum_names.hpp).
inline constexpr EnumName<InferenceEngine> kInferenceEngineNames[] = {
    {InferenceEngine::Auto, "auto"},
    {InferenceEngine::Full, "full"},
    {InferenceEngine::Layerwise, "layerwise"}};

/// What tessera predict does.
struct PredictOptions {
  std::string checkpoint;     ///< a checkpoint file, or the directory of --checkpoint DIR (DIR/checkpoint.h5)
  std::string data;           ///< the graph file (the training graph or another with the same features)
  std::string output;         ///< HDF5: /nodes, /predictions, /probabilities, /embeddings (empty: none)
  std::string csv;            ///< "node,prediction" lines of the same nodes (empty: none)
  /// A link-prediction checkpoint: a text file of node pairs to score (read_node_pairs); output and csv
  /// then hold their scores (write_link_predictions).
  std::string edges;
  std::string nodes = "all";  ///< all, or one split of the file: train, valid or test
  bool probabilities = false;  ///< write /probabilities (softmax of the logits; multi-label: sigmoids)
  bool embeddings = false;     ///< write /embeddings: the representation after embeddings_layer layers
  int embeddings_layer = -1;   ///< graph layers before it, 0 (input) to the model's depth; -1: depth - 1
  /// What the splits are scored by; Auto: the training run's `metric`, else the task's own (make_metric).
  MetricKind metric = MetricKind::Auto;
  CheckpointParameters parameters = CheckpointParameters::Auto;  ///< which parameters
  InferenceEngine engine = InferenceEngine::Auto;                ///< how it runs
  std::optional<GridShape> grid;  ///< full engine: XxYxZ (default: the performance model's on several ranks)
  std::string
      partition;  ///< layerwise: /partition/NAME (default metis-RANKS where the file has it, else block)
  KernelPath kernels = KernelPath::Auto;  ///< which kernels run
  bool quiet = false;                     ///< no log lines but the first and the accuracy
};

/// What an inference did (every rank).
struct PredictResult {
  std::string parameters;  ///< "best" or "final"
  int64_t epoch = 0;       ///< the epoch those parameters are from
  std::string engine;      ///< "full" or "layerwise"
  Accuracy accuracy;       ///< the metric on the file's train, valid and test splits (0 where one is absent)
  int64_t rows = 0;        ///< nodes written
  double seconds = 0;      ///< the forward (engine) alone
  int64_t peak_bytes = 0;  ///< largest peak resident memory over the ranks at the end
};

/// The configuration a ModelConfig::describe() text was made from ("gcn 2x16 (in 1433, out 7, norm
/// none)", "gat 2x8 (in 1433, out 7, norm none, heads 8, output heads 1)"); dropout is not in it (inference
/// does not use it). Throws Error on any other text.
ModelConfig model_config_from(const std::string& description);

/// The fewest weights a model of `config` holds (every layer's input width times its output width, a GAT's
/// times its heads), from
/// its description alone: a checkpoint that stores fewer parameter values does not hold that model.
double minimum_weight_count(const ModelConfig& config);

/// Collective over `world`: the inference the options describe. Throws CollectiveError (or Error) naming
/// the file or option on bad input, before any expensive work where it can be known then.
PredictResult run_prediction(const PredictOptions& options, const Communicator& world);

}  // namespace tessera
