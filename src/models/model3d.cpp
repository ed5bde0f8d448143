// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/model3d.hpp"

#include <cmath>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/random_streams.hpp"

namespace tessera {

namespace {

// Glorot uniform on the global matrix (rows x cols), written into the local block at (row0, col0);
// entries in padding stay zero. Same key and counters as glorot_init on one rank.
void glorot_block(const Parameter<float>& p, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
                  uint64_t seed, uint64_t stream) {
  const float bound = float(std::sqrt(6.0 / double(rows + cols)));
  const CounterRng rng(seed, stream);
  const Matrix<float> w = p.matrix();
  Kokkos::parallel_for(
      "tessera::glorot_block", Kokkos::RangePolicy<ExecSpace>(0, int64_t(w.extent(0))),
      KOKKOS_LAMBDA(int64_t i) {
        for (int64_t j = 0; j < int64_t(w.extent(1)); ++j) {
          const int64_t gi = row0 + i, gj = col0 + j;
          w(i, j) =
              gi < rows && gj < cols ? bound * (2.0f * rng.uniform(uint64_t(gi), uint64_t(gj)) - 1.0f) : 0.0f;
        }
      });
}

}  // namespace

GcnLayer3D::GcnLayer3D(const ProcessGrid& grid, const Graph3D& graph, int index, NormKind norm, float dropout,
                       uint64_t seed, const Model3DOptions& options, PhaseTimers* timers)
    : graph_(graph),
      index_(index),
      last_(index + 1 == graph.layout.layers()),
      dropout_(dropout),
      comms_(layer_comms(grid, index, options.overlap_chunks, timers, options.comm_dtype)),
      transform_first_(graph.layout.transforms_first(index)),
      weight_("layer" + std::to_string(index) + ".weight",
              graph.layout.padded_dim(index) / grid.shape().extent(roles_for_layer(index).b),
              graph.layout.padded_dim(index + 1) /
                  (transform_first_ ? 1 : grid.shape().extent(roles_for_layer(index).a)),
              true),
      bias_("layer" + std::to_string(index) + ".bias", 1,
            graph.layout.padded_dim(index + 1) / grid.shape().extent(roles_for_layer(index).a), false),
      norm_(last_ ? NormKind::None : norm, "layer" + std::to_string(index) + ".norm", bias_.cols) {
  const Layout3D& layout = graph.layout;
  const AxisRoles roles = roles_for_layer(index);
  const GridCoords& me = grid.coords();
  in_begin_ = layout.dim_block(index, roles.b, me.get(roles.b)).first;
  out_begin_ = layout.dim_block(index + 1, roles.a, me.get(roles.a)).first;
  // A transform-first W block is replicated over a as well as c.
  weight_owner_ = me.get(roles.c) == 0 && (!transform_first_ || me.get(roles.a) == 0);
  row_owner_ = me.get(roles.c) == 0 && me.get(roles.b) == 0;
  fuse_ = options.fuse;
  glorot_block(weight_, in_begin_, transform_first_ ? 0 : out_begin_, layout.dim(index),
               layout.dim(index + 1), seed, streams::kWeight + uint64_t(index));
  Kokkos::deep_copy(bias_.value, 0.0f);
  const size_t rows_c = size_t(layout.padded_nodes() / grid.shape().extent(roles.c));
  const size_t rows_a = size_t(layout.padded_nodes() / grid.shape().extent(roles.a));
  const size_t in_b = size_t(weight_.rows), out_a = size_t(bias_.cols), out = size_t(weight_.cols);
  out_ = Matrix<float>("out", rows_c, out_a);
  grad_in_ = Matrix<float>("grad_in", rows_a, in_b);
  if (transform_first_) {
    transformed_ = Matrix<float>("transformed", rows_a, out);
    if (comms_.a->size() > 1) {  // with one rank along a the output block is all of A T
      full_out_ = Matrix<float>("full_out", rows_c, out);
      gathered_ = Vector<float>("gathered", rows_c * out);
    }
  } else {
    agg_ = Matrix<float>("agg", rows_c, in_b);
    grad_agg_ = Matrix<float>("grad_agg", rows_c, in_b);
  }
}

std::vector<Parameter<float>*> GcnLayer3D::parameters() {
  std::vector<Parameter<float>*> out = {&weight_};
  if (norm_.kind() != NormKind::Batch) out.push_back(&bias_);  // BatchNorm's shift replaces the bias
  if (norm_.kind() != NormKind::None) out.insert(out.end(), {&norm_.gamma(), &norm_.beta()});
  return out;
}

BlockPlacement GcnLayer3D::row_placement() const {
  return BlockPlacement{0, out_begin_, 1, graph_.layout.dim(index_ + 1), row_owner_};
}

std::vector<BlockPlacement> GcnLayer3D::placements() const {
  const int64_t in = graph_.layout.dim(index_), out = graph_.layout.dim(index_ + 1);
  const BlockPlacement row = row_placement();
  const int64_t weight_col = transform_first_ ? 0 : out_begin_;
  std::vector<BlockPlacement> p = {BlockPlacement{in_begin_, weight_col, in, out, weight_owner_}};
  if (norm_.kind() != NormKind::Batch) p.push_back(row);
  if (norm_.kind() != NormKind::None) p.insert(p.end(), {row, row});
  return p;
}

Dropout GcnLayer3D::output_dropout(const PassInfo& pass) const {
  if (last_ || !pass.training) return Dropout();
  return Dropout(dropout_, pass.seed, streams::dropout(pass.epoch, index_), 0, out_begin_)
      .with_row_ids(view_.output_ids);
}

namespace {
Matrix<float> leading_rows(const Matrix<float>& m, int64_t rows) {
  return Kokkos::subview(m, std::make_pair(int64_t(0), rows), Kokkos::ALL());
}
}  // namespace

Matrix<float> GcnLayer3D::full_out_rows(int64_t rows) const {
  return full_out_.extent(0) > 0 ? leading_rows(full_out_, rows) : Matrix<float>();
}

Matrix<float> GcnLayer3D::forward(const Matrix<const float>& in, const LayerGraph& view,
                                  const PassInfo& pass) {
  view_ = view;
  input_ = in;
  const AdjacencyBlock& a = *view.adjacency;
  const int64_t rows_out = a.forward.matrix().num_rows;
  const Matrix<float> out = leading_rows(out_, rows_out);
  if (transform_first_) {
    pmm_forward_transform_first(a, comms_, in, weight_.matrix(),
                                leading_rows(transformed_, int64_t(in.extent(0))), full_out_rows(rows_out),
                                out);
  } else {
    // A static input (layer 0 without input dropout) on the static graph is aggregated once.
    const bool cacheable = static_input_ && view.is_static;
    const bool agg_ready = cacheable && aggregated_input_ == in.data();
    pmm_forward(a, comms_, in, weight_.matrix(), leading_rows(agg_, rows_out), out, agg_ready);
    aggregated_input_ = cacheable ? in.data() : nullptr;
  }
  const Dropout dropout = output_dropout(pass);
  const Vector<const float> bias = bias_.value;
  if (norm_.kind() != NormKind::None) {
    const NormEpilogue<float> epilogue{norm_.kind() == NormKind::Rms ? bias : Vector<const float>(), !last_,
                                       dropout};
    if (norm_.kind() == NormKind::Rms && !fuse_)
      bias_relu_dropout_forward<float>(out, bias, false, Dropout());
    const auto rows = leading_rows(out, view.valid_rows);
    const LayerComms c = comms_;
    norm_.forward(
        rows, pass.training, view.num_nodes, graph_.layout.dim(index_ + 1),
        [c](const Vector<float>& v) { sum_over(*c.c, v.data(), int64_t(v.extent(0)), "norm allreduce c"); },
        [c](const Vector<float>& v) { sum_over(*c.a, v.data(), int64_t(v.extent(0)), "norm allreduce a"); },
        fuse_ ? &epilogue : nullptr);
    if (!fuse_) bias_relu_dropout_forward<float>(out, Vector<const float>(), !last_, dropout);
  } else {
    bias_relu_dropout_forward<float>(out, bias, !last_, dropout);
  }
  return out;
}

Matrix<float> GcnLayer3D::backward(const Matrix<float>& grad_out, bool want_input_grad,
                                   const PassInfo& pass) {
  const AdjacencyBlock& a = *view_.adjacency;
  const Matrix<float> out = leading_rows(out_, a.forward.matrix().num_rows);
  const bool fused = fuse_ && norm_.kind() != NormKind::None;
  const NormEpilogue<float> epilogue{Vector<const float>(), !last_, output_dropout(pass)};
  if (!fused) bias_relu_dropout_backward<float>(grad_out, out, !last_, epilogue.dropout);
  if (norm_.kind() != NormKind::None) {
    const auto rows = leading_rows(grad_out, view_.valid_rows);
    const LayerComms c = comms_;
    norm_.backward(
        rows, view_.num_nodes, graph_.layout.dim(index_ + 1),
        [c](const Vector<float>& v) { sum_over(*c.c, v.data(), int64_t(v.extent(0)), "norm allreduce c"); },
        [c](const Vector<float>& v) { sum_over(*c.a, v.data(), int64_t(v.extent(0)), "norm allreduce a"); },
        fused ? &epilogue : nullptr, leading_rows(out, view_.valid_rows));
  }
  if (norm_.kind() != NormKind::Batch) {
    column_sums<float>(grad_out, bias_.grad, Vector<float>());
    sum_over(*comms_.c, bias_.grad.data(), bias_.size(), "backward allreduce c (weights)");
  }
  const int64_t rows_in = a.transpose.matrix().num_rows, rows_out = a.forward.matrix().num_rows;
  const Matrix<float> grad_in = leading_rows(grad_in_, rows_in);
  if (transform_first_) {
    pmm_backward_transform_first(a, comms_, input_, weight_.matrix(), grad_out, gathered_,
                                 full_out_rows(rows_out), leading_rows(transformed_, rows_in),
                                 weight_.grad_matrix(), want_input_grad ? grad_in : Matrix<float>());
  } else {
    pmm_backward(a, comms_, leading_rows(agg_, rows_out), weight_.matrix(), grad_out, weight_.grad_matrix(),
                 want_input_grad ? leading_rows(grad_agg_, rows_out) : Matrix<float>(),
                 want_input_grad ? grad_in : Matrix<float>());
  }
  return grad_in;
}

GcnModel3D::GcnModel3D(const ProcessGrid& grid, const Graph3D& graph, const ModelConfig& config,
                       const Model3DOptions& options)
    : graph_(graph), config_(config) {
  require(config.kind == ModelKind::Gcn,
          "the 3D trainer supports --model gcn only (GraphSAGE runs on one rank)");
  for (int l = 0; l < graph.layout.layers(); ++l)
    layers_.push_back(std::make_unique<GcnLayer3D>(grid, graph, l, config.norm, config.dropout, config.seed,
                                                   options, &timers_));
  layers_.front()->set_static_input(config.input_dropout == 0);
  full_views_ = full_graph_views(graph);
}

Matrix<float> GcnModel3D::forward(const PassInfo& pass) {
  return forward(graph_.features, graph_.input_ids, full_views_, pass);
}

Matrix<float> GcnModel3D::forward(const Matrix<const float>& input, const Vector<const int64_t>& input_ids,
                                  const std::vector<LayerGraph>& views, const PassInfo& pass) {
  Matrix<const float> h = input;
  if (pass.training && config_.input_dropout > 0) {
    if (dropped_input_.extent(0) < input.extent(0) || dropped_input_.extent(1) != input.extent(1))
      dropped_input_ = Matrix<float>("input_dropout", graph_.features.extent(0), graph_.features.extent(1));
    const Matrix<float> dropped = leading_rows(dropped_input_, int64_t(input.extent(0)));
    Kokkos::deep_copy(dropped, input);
    bias_relu_dropout_forward<float>(
        dropped, Vector<const float>(), false,
        Dropout(config_.input_dropout, pass.seed, streams::input_dropout(pass.epoch), 0,
                layers_.front()->in_col_begin())
            .with_row_ids(input_ids));
    h = dropped;
  }
  Matrix<float> out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    out = layers_[l]->forward(h, views[l], pass);
    h = out;
  }
  return out;
}

void GcnModel3D::backward(const Matrix<float>& grad_logits, const PassInfo& pass) {
  Matrix<float> grad = grad_logits;
  for (int l = int(layers_.size()) - 1; l >= 0; --l) grad = layers_[size_t(l)]->backward(grad, l > 0, pass);
}

std::vector<Parameter<float>*> GcnModel3D::parameters() {
  std::vector<Parameter<float>*> out;
  for (auto& layer : layers_)
    for (Parameter<float>* p : layer->parameters()) out.push_back(p);
  return out;
}

std::vector<BlockPlacement> GcnModel3D::placements() const {
  std::vector<BlockPlacement> out;
  for (const auto& layer : layers_)
    for (const BlockPlacement& p : layer->placements()) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Vector<float>*>> GcnModel3D::buffers() {
  std::vector<std::pair<std::string, Vector<float>*>> out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    FeatureNorm<float>& norm = layers_[l]->norm();
    if (norm.kind() != NormKind::Batch) continue;
    const std::string name = "layer" + std::to_string(l) + ".norm";
    out.push_back({name + ".running_mean", &norm.running_mean()});
    out.push_back({name + ".running_var", &norm.running_var()});
  }
  return out;
}

std::vector<BlockPlacement> GcnModel3D::buffer_placements() const {
  std::vector<BlockPlacement> out;
  for (const auto& layer : layers_)
    if (const_cast<GcnLayer3D&>(*layer).norm().kind() == NormKind::Batch)
      out.insert(out.end(), {layer->row_placement(), layer->row_placement()});
  return out;
}

std::vector<float> GcnModel3D::gather_parameters(const Communicator& comm) {
  return gather(comm, false);
}

std::vector<float> GcnModel3D::gather_gradients(const Communicator& comm) {
  return gather(comm, true);
}

std::vector<float> GcnModel3D::gather(const Communicator& comm, bool gradients) {
  const std::vector<Parameter<float>*> params = parameters();
  const std::vector<BlockPlacement> places = placements();
  std::vector<float> all;
  for (size_t i = 0; i < params.size(); ++i) {
    const BlockPlacement& b = places[i];
    std::vector<float> global(static_cast<size_t>(b.rows * b.cols), 0.0f);
    if (b.owner) {
      const auto local =
          Kokkos::create_mirror_view_and_copy(HostSpace(), gradients ? params[i]->grad : params[i]->value);
      for (int64_t r = 0; r < params[i]->rows; ++r)
        for (int64_t c = 0; c < params[i]->cols; ++c) {
          const int64_t gr = b.row_begin + r, gc = b.col_begin + c;
          if (gr < b.rows && gc < b.cols) global[size_t(gr * b.cols + gc)] = local(r * params[i]->cols + c);
        }
    }
    all_reduce(comm, global.data(), int64_t(global.size()), ReduceOp::Sum,
               gradients ? "gather gradients" : "gather parameters");
    all.insert(all.end(), global.begin(), global.end());
  }
  return all;
}

}  // namespace tessera
