// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/layer.hpp"

#include "tessera/comm/device_collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/parallel3d/layout.hpp"

namespace tessera {

ActivationLayout activation_layout(const GridShape& shape, const GridCoords& me, int after_layer,
                                   int64_t width) {
  ActivationLayout l;
  l.after_layer = after_layer;
  l.width = width;
  if (after_layer < 0) {
    const AxisRoles first = roles_for_layer(0);
    l.rows_axis = first.a, l.cols_axis = first.b, l.replica_axis = first.c;
  } else {
    const AxisRoles r = roles_for_layer(after_layer);
    l.rows_axis = r.c, l.cols_axis = r.a, l.replica_axis = r.b;
  }
  const auto [begin, end] = width_block(width, shape, l.cols_axis, me.get(l.cols_axis));
  l.col_begin = begin;
  l.local_cols = end - begin;
  l.row_owner = me.get(l.rows_axis) == 0 && me.get(l.replica_axis) == 0 && me.d == 0;
  return l;
}

LayerSlot::LayerSlot(const ProcessGrid& grid, const RunOptions& run, uint64_t seed, int64_t input_width,
                     PhaseTimers* timers)
    : grid_(&grid),
      run_(run),
      seed_(seed),
      timers_(timers),
      layout_(activation_layout(grid.shape(), grid.coords(), -1, input_width)) {
  require(input_width >= 1, "a model needs at least one input feature, not ", input_width);
}

int LayerSlot::take_graph_layer(int64_t out_width) {
  require(out_width >= 1, "graph layer ", graph_layers_, ": the output width must be at least 1, not ",
          out_width);
  layout_ = activation_layout(grid_->shape(), grid_->coords(), graph_layers_, out_width);
  return graph_layers_++;
}

Matrix<const float> Layer::forward_bf16(const Matrix<const uint16_t>&, const GraphBatch&, const PassInfo&) {
  fail("model: ", describe(),
       " takes fp32 input, not bf16 bits (widen them first: Sequential::forward_bf16)");
}

void LayerSlot::require_aggregation(Normalization normalization, const std::string& layer) {
  const std::string here = layer + " (graph layer " + std::to_string(graph_layers_ - 1) + ")";
  require(!aggregation_ || *aggregation_ == normalization, "model: ", here, " aggregates with ",
          normalization_name(normalization), " weights but ", aggregation_layer_, " with ",
          normalization_name(aggregation_ ? *aggregation_ : normalization),
          ": one graph carries one weighting of its adjacency, so a model's layers must agree");
  if (!aggregation_) aggregation_layer_ = here;
  aggregation_ = normalization;
}

std::string LayerSlot::name(const std::string& what) const {
  return "layer" + std::to_string(layout_.after_layer < 0 ? 0 : layout_.after_layer) + "." + what;
}

RowParameter::RowParameter(const LayerSlot& slot, const std::string& name, float value)
    : param_(slot.name(name), 1, slot.layout().local_cols, false),
      at_{0, slot.layout().col_begin, 1, slot.layout().width, slot.layout().row_owner},
      rows_(&slot.grid().axis(slot.layout().rows_axis)) {
  Kokkos::deep_copy(param_.value, value);
}

void RowParameter::gradient_from(const Matrix<const float>& g, KernelPath path, const char* phase) {
  column_sums<float>(g, param_.grad, Vector<float>(), path);
  sum_gradient(phase);
}

void RowParameter::sum_gradient(const char* phase) {
  if (rows_->size() == 1) return;
  device_all_reduce(*rows_, param_.grad.data(), param_.size(), ReduceOp::Sum, phase);
}

const LayerGraph& rows_at(const GraphBatch& batch, const ActivationLayout& layout) {
  if (layout.after_layer < 0) return batch.input;
  require(size_t(layout.after_layer) < batch.layers.size(), "the batch has ", batch.layers.size(),
          " graph layers, the model ", layout.after_layer + 1, " or more");
  return batch.layers[size_t(layout.after_layer)];
}

}  // namespace tessera
