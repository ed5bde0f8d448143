// SPDX-License-Identifier: BSD-3-Clause
// The full graph as a batch source (docs/architecture.md §4): one step per epoch over every node of a
// Graph3D, on one rank (the 1x1x1 grid) or any 3D grid. Its evaluation and per-node outputs (a full-graph
// forward) serve the mini-batch mode too.
#pragma once

#include "tessera/models/training/batch_source.hpp"

namespace tessera {

/// The model's forward on the graph's input block, as the graph holds it (Model::forward, or forward_bf16
/// for bf16 features).
Matrix<const float> forward_graph_features(Model& model, const Graph3D& graph, const GraphBatch& batch,
                                           const PassInfo& pass);

/// Collective over the grid's replica: train, valid and test scores of an evaluation forward in `loss`'s
/// metric, and the loss's mean on the validation nodes.
Accuracy evaluate_full_graph(Model& model, Loss& loss, const Graph3D& graph, const GraphBatch& batch,
                             int64_t epoch);

/// Collective over `world` (every replica): predictions and embeddings of every node from an evaluation
/// forward; replica 0 writes.
void write_full_graph_outputs(Model& model, const Graph3D& graph, const GraphBatch& batch, int64_t epoch,
                              const NodeOutputPaths& paths, const Communicator& world);

/// What `model`'s batches need of `graph` (its depth, self blocks); throws Error on every rank where it
/// cannot run there: a depth the graph does not serve (Graph3DOptions::layers), or layers that aggregate
/// with other weights than the graph's (Model::aggregation), naming both.
BatchNeeds check_model_fits_graph(const Model& model, const Graph3D& graph);

/// Every node, every step: one step per epoch, or `steps` (a link task's pair batches, each step a full
/// forward scored on its share of the pairs: LinkLossOptions::batch).
class FullGraphSource : public BatchSource {
 public:
  /// For `model`: what its batches need is asked of it, and a graph it cannot run on (a depth it does not
  /// serve, another weighting than its layers aggregate with) is refused (check_model_fits_graph). The
  /// graph and grid must outlive it.
  FullGraphSource(const Graph3D& graph, const ProcessGrid& grid, const Communicator& world,
                  const Model& model, int64_t steps = 1);

  std::string describe() const override;
  std::string mode() const override { return "full"; }
  /// The adjacency's nonzeros: every edge (and self loop) once per epoch.
  EpochWork epoch_work() const override { return {edges_, "edges"}; }
  int64_t steps_per_epoch() const override { return steps_; }
  int64_t num_nodes() const override { return graph_.layout.num_nodes(); }
  const Batch& batch(int64_t epoch, int64_t step) override;
  int64_t pass_key(int64_t epoch, int64_t step) const override { return epoch * steps_ + step; }
  double loss_weight(int64_t count) override { return count > 0 ? 1.0 / double(count) : 0.0; }
  const Communicator& replicas() const override { return grid_.axis(Axis::D); }
  Accuracy evaluate(Model& model, Loss& loss, int64_t epoch) override;
  void write_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) override;

 private:
  const Graph3D& graph_;
  const ProcessGrid& grid_;
  const Communicator& world_;
  GraphBatch views_;
  Batch batch_;
  double edges_ = 0;
  int64_t steps_ = 1;
};

}  // namespace tessera
