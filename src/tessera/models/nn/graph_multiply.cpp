// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/graph_multiply.hpp"

#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/gemm.hpp"
#include "tessera/models/nn/random_streams.hpp"

namespace tessera {

namespace {

// The leading `rows` rows of `capacity`, which grows (see grown_capacity) when it is too small. Returns
// whether it was reallocated.
template <class Scalar>
bool fit(Matrix<Scalar>& capacity, Matrix<Scalar>& view, const char* name, int64_t rows, int64_t cols) {
  bool grown = false;
  if (int64_t(capacity.extent(0)) < rows || int64_t(capacity.extent(1)) != cols) {
    capacity = Matrix<Scalar>(std::string(name), size_t(grown_capacity(int64_t(capacity.extent(0)), rows)),
                              size_t(cols));
    grown = true;
  }
  view = Kokkos::subview(capacity, std::make_pair(int64_t(0), rows), Kokkos::ALL());
  return grown;
}

std::vector<std::string> default_names(const std::vector<Term>& terms) {
  if (terms.size() == 1) return {"weight"};
  std::vector<std::string> out;
  for (Term t : terms) out.push_back(t == Term::Aggregate ? "neighbour_weight" : "root_weight");
  return out;
}

}  // namespace

GraphMultiply::GraphMultiply(LayerSlot& slot, int64_t out_width, MultiplyOptions options)
    : options_(std::move(options)), in_(slot.layout()), workspace_(slot.workspace()) {
  require(!options_.terms.empty() && options_.terms.size() <= 2 &&
              (options_.terms.size() == 1 || options_.terms[0] != options_.terms[1]),
          "a graph layer has one or two distinct terms");
  if (options_.weight_names.empty()) options_.weight_names = default_names(options_.terms);
  require(options_.weight_names.size() == options_.terms.size(), "one weight name per term");
  const GridShape& shape = slot.grid().shape();
  const GridCoords& me = slot.grid().coords();
  layer_ = slot.take_graph_layer(out_width);
  for (Term t : options_.terms)
    if (t == Term::Self) slot.request_self_blocks();
  out_ = slot.layout();
  const AxisRoles roles = roles_for_layer(layer_);
  const RunOptions& run = slot.run();
  comms_ = layer_comms(slot.grid(), layer_, run.overlap_chunks, slot.timers(), run.comm_dtype, run.kernels);
  // Only layer 0 can be fed a cached input (its features), whatever the caller says.
  options_.cached_input = options_.cached_input && layer_ == 0;
  bf16_input_ = layer_ == 0 && run.feature_dtype == StorageDtype::Bf16;
  // bf16 features are read once, by the SpMM: a transform-first GEMM would need them widened.
  transform_first_ =
      !bf16_input_ && transforms_first(layer_, in_.width, out_width, shape, options_.cached_input);
  // A cached aggregation is kept by definition, and so is one of bf16 features (agg is what backward reads).
  recompute_ = run.recompute_aggregation && !transform_first_ && !options_.cached_input && !bf16_input_;
  bf16_agg_ = run.activation_dtype == StorageDtype::Bf16 && !transform_first_ && !recompute_;
  in_b_ = padded_width(in_.width, shape) / shape.extent(roles.b);
  // A transform-first W block holds every output column (replicated over a as well as c).
  w_cols_ = transform_first_ ? padded_width(out_width, shape) : out_.local_cols;
  const int64_t block = in_b_ * w_cols_, terms = int64_t(options_.terms.size());
  values_ = Vector<float>("layer" + std::to_string(layer_) + ".weights", size_t(terms * block));
  grads_ = Vector<float>("layer" + std::to_string(layer_) + ".weight_grads", size_t(terms * block));
  const bool owner = me.get(roles.c) == 0 && me.d == 0 && (!transform_first_ || me.get(roles.a) == 0);
  const BlockPlacement at{in_.col_begin, transform_first_ ? 0 : out_.col_begin, in_.width, out_width, owner};
  for (int64_t t = 0; t < terms; ++t) {
    const auto range = std::make_pair(t * block, (t + 1) * block);
    weights_.emplace_back("layer" + std::to_string(layer_) + "." + options_.weight_names[size_t(t)], in_b_,
                          w_cols_, true, Kokkos::subview(values_, range), Kokkos::subview(grads_, range));
    placements_.push_back(at);
    const uint64_t stream =
        (options_.terms[size_t(t)] == Term::Aggregate ? streams::kWeight : streams::kRootWeight) +
        uint64_t(layer_);
    glorot_init(weights_.back(), at, slot.seed(), stream);
  }
}

std::vector<ParameterRef> GraphMultiply::parameters() {
  std::vector<ParameterRef> out;
  for (size_t t = 0; t < weights_.size(); ++t) out.push_back({&weights_[t], placements_[t]});
  return out;
}

Matrix<const float> GraphMultiply::weights() const {
  return Matrix<const float>(values_.data(), weights_.size() * size_t(in_b_), size_t(w_cols_));
}

Matrix<float> GraphMultiply::weight_grads() const {
  return Matrix<float>(grads_.data(), weights_.size() * size_t(in_b_), size_t(w_cols_));
}

LayerOperators GraphMultiply::operators(const LayerGraph& graph) const {
  LayerOperators ops;
  for (Term t : options_.terms) {
    const AdjacencyBlock* block = t == Term::Aggregate ? graph.adjacency : graph.self;
    require(
        block != nullptr, "graph layer ", layer_, ": the batch has no ",
        t == Term::Aggregate ? "adjacency block" : "self block (build it with the model's self blocks on)");
    (t == Term::Aggregate ? ops.aggregate : ops.self) = block;
  }
  return ops;
}

const LayerGraph& GraphMultiply::begin_forward(int64_t in_rows, int64_t in_cols, const GraphBatch& batch) {
  require(size_t(layer_) < batch.layers.size(), "graph layer ", layer_, ": the batch has only ",
          batch.layers.size(), " graph layers");
  const LayerGraph& graph = batch.layers[size_t(layer_)];
  ops_ = operators(graph);
  const auto& a = ops_.terms().front()->forward.matrix();
  require(in_rows == a.num_cols && in_cols == in_b_, "graph layer ", layer_, ": the input block is ", in_rows,
          "x", in_cols, ", expected ", a.num_cols, "x", in_b_);
  rows_in_ = a.num_cols;
  rows_out_ = a.num_rows;
  // Layers after the first compute an input gradient in a model's backward (Sequential's rule).
  if (layer_ > 0) workspace_->reserve_input_gradient(rows_in_ * in_b_);
  return graph;
}

template <class In>
Matrix<float> GraphMultiply::forward_kept(const Matrix<const In>& in, const LayerGraph& graph,
                                          const PassInfo& pass) {
  const int64_t terms = int64_t(options_.terms.size());
  Matrix<float> out, agg;
  fit(out_buffer_, out, "multiply.out", rows_out_, out_.local_cols);
  // A cached input on the static graph is aggregated once (and kept in fp32: the next forward reuses it).
  const bool cacheable = options_.cached_input && graph.is_static;
  if (bf16_agg_ && !cacheable) {
    // The fp32 sums are a temporary; a training pass keeps their bf16 rounding for backward.
    const int64_t floats = terms * rows_out_ * in_b_;
    const Matrix<float> sums(workspace_->scratch({floats})[0], size_t(terms * rows_out_), size_t(in_b_));
    kept_ = pass.training ? Kept::Bf16 : Kept::Nothing;
    cached_for_ = nullptr;
    if (!pass.training) {
      pmm_forward(ops_, comms_, in, weights(), sums, out, false);
      return out;
    }
    Matrix<uint16_t> bits;
    fit(agg_bits_, bits, "multiply.agg_bf16", terms * rows_out_, in_b_);
    if (gemm_reads_bf16_bits(comms_.kernels)) {  // the GEMM rounds agg itself: once, into the kept bits
      pmm_aggregate(ops_, comms_, in, sums, phase::kForwardA);
      round_to_bf16(sums, bits);
      pmm_transform(ops_, comms_, weights(), bits, out);
    } else {
      pmm_forward(ops_, comms_, in, weights(), sums, out, false);
      round_to_bf16(sums, bits);
    }
    return out;
  }
  kept_ = Kept::Fp32;
  const bool grown = fit(agg_, agg, "multiply.agg", terms * rows_out_, in_b_);
  // A reallocated buffer lost a cached aggregation.
  const bool ready = cacheable && !grown && cached_for_ == in.data();
  pmm_forward(ops_, comms_, in, weights(), agg, out, ready);
  cached_for_ = cacheable ? in.data() : nullptr;
  return out;
}

Matrix<float> GraphMultiply::forward_bf16(const Matrix<const uint16_t>& in, const GraphBatch& batch,
                                          const PassInfo& pass) {
  require(bf16_input_, "graph layer ", layer_,
          ": bf16 input is for graph layer 0 of a model built for bf16 features");
  const LayerGraph& graph = begin_forward(int64_t(in.extent(0)), int64_t(in.extent(1)), batch);
  input_ = Matrix<const float>();  // backward reads the kept aggregation only (no input gradient at 0)
  return forward_kept(in, graph, pass);
}

Matrix<float> GraphMultiply::forward(const Matrix<const float>& in, const GraphBatch& batch,
                                     const PassInfo& pass) {
  const LayerGraph& graph = begin_forward(int64_t(in.extent(0)), int64_t(in.extent(1)), batch);
  input_ = in;
  const int64_t terms = int64_t(options_.terms.size());
  if (transform_first_) {
    Matrix<float> out;
    fit(out_buffer_, out, "multiply.out", rows_out_, out_.local_cols);
    // t and y are temporaries: the shared scratch.
    const int64_t y_rows = comms_.a->size() > 1 ? rows_out_ : 0;
    const LayerWorkspace::Pieces piece = workspace_->scratch({terms * rows_in_ * w_cols_, y_rows * w_cols_});
    const Matrix<float> t(piece[0], size_t(terms * rows_in_), size_t(w_cols_));
    const Matrix<float> y(piece[1], size_t(y_rows), size_t(w_cols_));
    pmm_forward_transform_first(ops_, comms_, in, weights(), t, y, out);
    return out;
  }
  if (recompute_) {  // agg is a temporary: backward aggregates again
    Matrix<float> out;
    fit(out_buffer_, out, "multiply.out", rows_out_, out_.local_cols);
    const int64_t floats = terms * rows_out_ * in_b_;
    const Matrix<float> agg(workspace_->scratch({floats})[0], size_t(terms * rows_out_), size_t(in_b_));
    pmm_forward(ops_, comms_, in, weights(), agg, out, false);
    return out;
  }
  return forward_kept(in, graph, pass);
}

Matrix<float> GraphMultiply::backward(const Matrix<const float>& grad_out, bool want_input_grad) {
  const int64_t terms = int64_t(options_.terms.size());
  const Matrix<float> grad_in =
      want_input_grad ? workspace_->input_gradient(rows_in_, in_b_) : Matrix<float>();
  if (transform_first_) {
    // g_y holds g_out gathered over a; the gathered blocks are dead once copied into g_y, before g_t is
    // written, so the two share a piece.
    const int64_t y_rows = comms_.a->size() > 1 ? rows_out_ : 0;
    const int64_t g_t_floats = terms * rows_in_ * w_cols_, gathered_floats = y_rows * w_cols_;
    const LayerWorkspace::Pieces piece =
        workspace_->scratch({y_rows * w_cols_, std::max(g_t_floats, gathered_floats)});
    const Matrix<float> g_y(piece[0], size_t(y_rows), size_t(w_cols_));
    const Matrix<float> g_t(piece[1], size_t(terms * rows_in_), size_t(w_cols_));
    const Vector<float> gathered(piece[1], size_t(gathered_floats));
    pmm_backward_transform_first(ops_, comms_, input_, weights(), grad_out, gathered, g_y, g_t,
                                 weight_grads(), want_input_grad, grad_in);
    return grad_in;
  }
  const int64_t agg_rows = want_input_grad ? terms * rows_out_ : 0;
  require(recompute_ || kept_ != Kept::Nothing, "graph layer ", layer_,
          ": backward after a forward outside training, which keeps no aggregation under bf16 activations");
  if (recompute_ || kept_ == Kept::Bf16) {
    // agg aggregated again, or widened from its bf16 rounding, into the piece g_agg then overwrites
    // (pmm_backward reads agg in full first).
    float* piece = workspace_->scratch({terms * rows_out_ * in_b_})[0];
    const Matrix<float> agg(piece, size_t(terms * rows_out_), size_t(in_b_));
    const Matrix<float> grad_agg(piece, size_t(agg_rows), size_t(in_b_));
    if (recompute_) {
      pmm_aggregate(ops_, comms_, input_, agg, phase::kBackwardRecomputeA);
      pmm_backward(ops_, comms_, agg, weights(), grad_out, weight_grads(), want_input_grad, grad_agg,
                   grad_in);
    } else {  // the weight gradients read the bits, widened into agg where the GEMM does not take them
      const Matrix<const uint16_t> bits =
          Kokkos::subview(agg_bits_, std::make_pair(int64_t(0), terms * rows_out_), Kokkos::ALL());
      pmm_backward(ops_, comms_, bits, agg, weights(), grad_out, weight_grads(), want_input_grad, grad_agg,
                   grad_in);
    }
    return grad_in;
  }
  const Matrix<float> agg =
      Kokkos::subview(agg_, std::make_pair(int64_t(0), terms * rows_out_), Kokkos::ALL());
  const Matrix<float> grad_agg(workspace_->scratch({agg_rows * in_b_})[0], size_t(agg_rows), size_t(in_b_));
  pmm_backward(ops_, comms_, agg, weights(), grad_out, weight_grads(), want_input_grad, grad_agg, grad_in);
  return grad_in;
}

}  // namespace tessera
