// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/modes/full_graph.hpp"

#include "tessera/core/error.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/models/training/node_outputs.hpp"
#include "tessera/parallel3d/layout.hpp"

namespace tessera {

namespace {

LogitsLayout logits_of(const Model& model) {
  const ActivationLayout& out = model.output_layout();
  return LogitsLayout{&model.grid().axis(out.rows_axis), &model.grid().axis(out.cols_axis), out.col_begin,
                      out.width};
}

}  // namespace

Matrix<const float> forward_graph_features(Model& model, const Graph3D& graph, const GraphBatch& batch,
                                           const PassInfo& pass) {
  if (graph.feature_dtype == StorageDtype::Bf16) return model.forward_bf16(graph.features_bf16, batch, pass);
  return model.forward(graph.features, batch, pass);
}

Accuracy evaluate_full_graph(Model& model, Loss& loss, const Graph3D& graph, const GraphBatch& batch,
                             int64_t epoch) {
  const Matrix<const float> logits = forward_graph_features(model, graph, batch, PassInfo{false, 0, epoch});
  const LogitsLayout layout = logits_of(model);
  const NodeData& data = graph.node_data_for(model.graph_layers());
  const LossInput every_node{layout, logits, data.labels, {}, data.targets, batch.layers.back().output_ids};
  if (const std::optional<SplitScores> s = loss.score_splits(every_node))
    return Accuracy{s->train, s->valid, s->test, s->valid_loss, s->metric};
  // Every rank of the replica holds its share of every row: no other rank's batch adds rows.
  const Communicator alone(MPI_COMM_SELF, false, nullptr);
  const std::unique_ptr<Metric> metric = loss.metric();
  // A set the graph has no mask for (an application's own split names) scores no node: 0.
  auto score = [&](const char* set) {
    if (!data.has_mask(set)) return 0.0;
    metric->add(LossInput{layout, logits, data.labels, data.mask(set), data.targets});
    return metric->value(layout, alone);
  };
  Accuracy a{score("train"), score("valid"), score("test")};
  a.metric = metric->name();
  if (data.has_mask("valid")) {
    const Matrix<float> unused("eval.grad", logits.extent(0), logits.extent(1));
    const LossSum s = loss.sum_and_gradient(
        LossInput{layout, logits, data.labels, data.mask("valid"), data.targets}, unused);
    a.valid_loss = s.count > 0 ? s.sum / double(s.count) : 0.0;
  }
  return a;
}

void write_full_graph_outputs(Model& model, const Graph3D& graph, const GraphBatch& batch, int64_t epoch,
                              const NodeOutputPaths& paths, const Communicator& world) {
  const Matrix<const float> logits = forward_graph_features(model, graph, batch, PassInfo{false, 0, epoch});
  const GridCoords& me = model.grid().coords();
  const OutputOrder order = read_output_order(world, paths.graph);
  // A multi-label graph has no class per node to write (train refuses `save-predictions` for one).
  if (paths.want_predictions() && !graph.multi_label) {
    const ActivationLayout& out = model.output_layout();
    const Vector<int64_t> pred = argmax_3d(logits_of(model), logits);  // agreed over the classes' axis
    NodeClasses mine;
    if (me.d == 0 && me.get(out.replica_axis) == 0 && me.get(out.cols_axis) == 0) {
      const LayerGraph& rows = batch.layers.back();
      const auto ids = Kokkos::create_mirror_view_and_copy(HostSpace(), rows.output_ids);
      const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), pred);
      for (int64_t i = 0; i < rows.valid_rows; ++i)
        mine.nodes.push_back(ids(i)), mine.classes.push_back(host(i));
    }
    output_predictions(world, paths, graph.layout.num_nodes(), mine, order);
  }
  if (paths.want_embeddings()) {
    const ActivationLayout& at = paths.link_task ? model.output_layout() : model.embeddings_layout();
    const Matrix<const float> values = paths.link_task ? logits : model.embeddings();
    NodeRowBlock mine;
    mine.col_begin = at.col_begin;
    mine.cols = at.local_cols;
    if (me.d == 0 && me.get(at.replica_axis) == 0) {
      const LayerGraph& rows = rows_at(batch, at);
      const auto ids = Kokkos::create_mirror_view_and_copy(HostSpace(), rows.output_ids);
      const auto x = Kokkos::create_mirror_view_and_copy(HostSpace(), values);
      for (int64_t i = 0; i < rows.valid_rows; ++i) {
        mine.nodes.push_back(ids(i));
        for (int64_t j = 0; j < mine.cols; ++j) mine.values.push_back(x(i, j));
      }
    }
    output_embeddings(world, paths, graph.layout.num_nodes(), at.width, mine, model.describe(), epoch + 1,
                      order);
  }
}

BatchNeeds check_model_fits_graph(const Model& model, const Graph3D& graph) {
  const int depth = model.graph_layers();
  require(graph.serves(depth), "the model has ", depth, " graph layers but the graph serves at most ",
          graph.layers, " (Graph3DOptions::layers; 0 serves any depth)");
  const std::optional<Normalization> wanted = model.aggregation();
  const Normalization normalization = graph.normalization;
  require(!wanted || *wanted == normalization, "the model's layers aggregate with ",
          normalization_name(wanted.value_or(normalization)), " weights but the graph was built with ",
          normalization_name(normalization), " ones (Graph3DOptions::normalization: ",
          wanted == Normalization::Mean ? "Mean for SageConv" : "Symmetric for GcnConv", ")");
  return BatchNeeds{depth, model.needs_self_blocks(), model.backward_transposes()};
}

FullGraphSource::FullGraphSource(const Graph3D& graph, const ProcessGrid& grid, const Communicator& world,
                                 const Model& model, int64_t steps)
    : graph_(graph),
      grid_(grid),
      world_(world),
      views_(full_graph_batch(graph, check_model_fits_graph(model, graph))),
      steps_(steps) {
  require(steps_ >= 1, "FullGraphSource: steps per epoch must be at least 1, not ", steps_);
  const NodeData& data = graph.node_data_for(model.graph_layers());
  // A graph of link splits only has no training nodes: its losses look rows up by node.
  batch_ = Batch{&views_,      graph.features,
                 data.labels,  data.has_mask("train") ? data.mask("train") : Vector<const uint8_t>(),
                 data.targets, views_.layers.back().output_ids};
  batch_.input_dtype = graph.feature_dtype;
  batch_.input_bf16 = graph.features_bf16;
  // Ranks that differ only in layer 0's b axis hold copies of one block: the replica has size / |b| blocks.
  const int copies = grid.axis(roles_for_layer(0).b).size();
  edges_ = graph.mean_nnz * double(grid.replica().size() / copies) * double(steps_);
}

std::string FullGraphSource::describe() const {
  return "full graph on grid " + grid_.shape().str();
}

const Batch& FullGraphSource::batch(int64_t, int64_t) {
  return batch_;
}

Accuracy FullGraphSource::evaluate(Model& model, Loss& loss, int64_t epoch) {
  return evaluate_full_graph(model, loss, graph_, views_, epoch);
}

void FullGraphSource::write_outputs(Model& model, int64_t epoch, const NodeOutputPaths& paths) {
  write_full_graph_outputs(model, graph_, views_, epoch, paths, world_);
}

}  // namespace tessera
