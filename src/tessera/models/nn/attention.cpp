// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/attention.hpp"

#include <algorithm>

#include "tessera/comm/device_collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/kernel_profile.hpp"
#include "tessera/kernels/gemm.hpp"
#include "tessera/models/nn/random_streams.hpp"

namespace tessera {

namespace {

// The leading `rows` rows of `capacity`, grown (grown_capacity) when too small.
Matrix<float> leading_rows(Matrix<float>& capacity, const char* name, int64_t rows, int64_t cols) {
  if (int64_t(capacity.extent(0)) < rows || int64_t(capacity.extent(1)) != cols)
    capacity = Matrix<float>(std::string(name), size_t(grown_capacity(int64_t(capacity.extent(0)), rows)),
                             size_t(cols));
  return Kokkos::subview(capacity, std::make_pair(int64_t(0), rows), Kokkos::ALL());
}

// Consecutive matrices carved out of one flat piece of scratch.
class Carver {
 public:
  explicit Carver(float* base) : at_(base) {}
  Matrix<float> next(int64_t rows, int64_t cols) {
    const Matrix<float> m(at_, size_t(rows), size_t(cols));
    at_ += rows * cols;
    return m;
  }

 private:
  float* at_;
};

void maximum_over(const Communicator& comm, const Matrix<float>& m, const char* phase) {
  if (comm.size() > 1) device_all_reduce(comm, m.data(), int64_t(m.size()), ReduceOp::Max, phase);
}

void gemm_timed(const LayerComms& comms, Trans ta, Trans tb, const Matrix<const float>& a,
                const Matrix<const float>& b, float beta, const Matrix<float>& c) {
  const auto run = [&] { gemm<float>(ta, tb, 1.0f, a, b, beta, c, comms.kernels); };
  if (comms.timers)
    time_phase(*comms.timers, "gemm", run);
  else
    run();
}

template <class Fn>
void spmm_timed(const LayerComms& comms, const Fn& fn) {
  if (comms.timers)
    time_phase(*comms.timers, "spmm", fn);
  else
    fn();
}

}  // namespace

GatConv::GatConv(LayerSlot& slot, int64_t width, const GatOptions& options)
    : options_(options), width_(width), in_(slot.layout()), workspace_(slot.workspace()) {
  require(options_.heads >= 1 && options_.heads <= 1024, "gat: `heads` must be in [1, 1024], not ",
          options_.heads);
  require(width >= 1, "gat: the width per head must be at least 1, not ", width);
  require(options_.attention_dropout >= 0 && options_.attention_dropout < 1,
          "`attention-dropout` must be in [0, 1), not ", options_.attention_dropout);
  require(options_.dropout >= 0 && options_.dropout < 1, "`dropout` must be in [0, 1), not ",
          options_.dropout);
  require(options_.negative_slope >= 0, "gat: the negative slope must be at least 0, not ",
          options_.negative_slope);
  z_width_ = options_.heads * width;
  layer_ = slot.take_graph_layer(options_.concat ? z_width_ : width);
  out_ = slot.layout();
  slot.request_self_blocks();  // moves the destination terms to the output rows
  slot.require_aggregation(Normalization::Symmetric, "gat");
  const RunOptions& run = slot.run();
  comms_ = layer_comms(slot.grid(), layer_, 0, slot.timers(), run.comm_dtype, run.kernels);
  recompute_ = run.recompute_aggregation;
  const GridShape& shape = slot.grid().shape();
  const GridCoords& me = slot.grid().coords();
  const AxisRoles roles = roles_for_layer(layer_);
  in_b_ = padded_width(in_.width, shape) / shape.extent(roles.b);
  const std::string name = "layer" + std::to_string(layer_);
  // W: rows by b with every output column (replicated over a and c), as a transform-first layer's.
  weight_ = Parameter(name + ".weight", in_b_, z_width_, true);
  weight_at_ = {in_.col_begin, 0, in_.width, z_width_,
                me.get(roles.c) == 0 && me.get(roles.a) == 0 && me.d == 0};
  glorot_init(weight_, weight_at_, slot.seed(), streams::kWeight + uint64_t(layer_));
  att_src_ = Parameter(name + ".att_src", options_.heads, width, false);
  att_dst_ = Parameter(name + ".att_dst", options_.heads, width, false);
  att_at_ = {0, 0, options_.heads, width, me.x == 0 && me.y == 0 && me.z == 0 && me.d == 0};
  glorot_init(att_src_, att_at_, slot.seed(), streams::kAttentionSource + uint64_t(layer_));
  glorot_init(att_dst_, att_at_, slot.seed(), streams::kAttentionDestination + uint64_t(layer_));
  if (options_.bias) bias_ = std::make_unique<RowParameter>(slot, "bias", 0.0f);
}

std::vector<ParameterRef> GatConv::parameters() {
  std::vector<ParameterRef> out{{&weight_, weight_at_}, {&att_src_, att_at_}, {&att_dst_, att_at_}};
  if (bias_) out.push_back(bias_->ref());
  return out;
}

std::string GatConv::describe() const {
  std::string s = "gat " + std::to_string(in_.width) + " -> " + std::to_string(options_.heads) + "x" +
                  std::to_string(width_) + (options_.concat ? " concatenated" : " averaged");
  if (options_.activation != Activation::None) s += std::string(", ") + activation_name(options_.activation);
  if (options_.attention_dropout > 0)
    s += ", attention dropout " + std::to_string(options_.attention_dropout).substr(0, 4);
  if (options_.dropout > 0) s += ", dropout " + std::to_string(options_.dropout).substr(0, 4);
  return s;
}

AttentionBlock GatConv::block(const LayerGraph& graph, bool with_transpose) {
  AttentionBlock a;
  a.forward = graph.adjacency->forward.matrix();
  a.heads = options_.heads;
  a.negative_slope = options_.negative_slope;
  if (!with_transpose) return a;
  require(graph.adjacency->has_transpose,
          "gat: backward needs the block's transpose, and the graph was loaded without");
  a.transpose = graph.adjacency->transpose.matrix();
  // The static graph's positions are computed once; a batch's blocks are new every step.
  if (!graph.is_static || where_for_ != graph.adjacency) {
    where_ = transpose_positions(a.forward, a.transpose, comms_.kernels);
    where_for_ = graph.is_static ? graph.adjacency : nullptr;
  }
  a.where = where_;
  return a;
}

EdgeDropout GatConv::attention_dropout(const PassInfo& pass) const {
  if (!pass.training || options_.attention_dropout <= 0) return EdgeDropout();
  return EdgeDropout(options_.attention_dropout, pass.seed, streams::attention_dropout(pass.epoch, layer_),
                     options_.heads, row_ids_, col_ids_);
}

HeadsOutput GatConv::heads_output(const PassInfo& pass) const {
  HeadsOutput o;
  o.heads = options_.heads;
  o.concat = options_.concat;
  o.col_begin = out_.col_begin;
  o.width = out_.width;
  o.activation = options_.activation;
  if (pass.training && options_.dropout > 0)
    o.dropout =
        DropoutMask(options_.dropout, pass.seed, streams::dropout(pass.epoch, layer_), 0, out_.col_begin)
            .with_row_ids(row_ids_);
  return o;
}

GatConv::Terms GatConv::terms() {
  const int64_t heads = options_.heads;
  return {leading_rows(z_, "gat.z", rows_in_, z_width_), leading_rows(src_, "gat.src", rows_in_, heads),
          leading_rows(dst_, "gat.dst", rows_out_, heads),
          leading_rows(row_max_, "gat.row_max", rows_out_, heads),
          leading_rows(row_sum_, "gat.row_sum", rows_out_, heads)};
}

// alpha (edges x H) = the edge softmax of this pass's scores, its row terms in t.row_max and t.row_sum.
void GatConv::attention(const AttentionBlock& a, const Terms& t, const Matrix<float>& alpha) {
  const KernelPath path = comms_.kernels;
  attention_row_max(a, t.dst, t.src, t.row_max, path);
  maximum_over(*comms_.a, t.row_max, phase::kForwardA);
  attention_exponentials(a, t.dst, t.src, t.row_max, alpha, t.row_sum, path);
  sum_over(*comms_.a, t.row_sum.data(), int64_t(t.row_sum.size()), phase::kForwardA);
  attention_normalize(a, t.row_sum, alpha, path);
}

Matrix<const float> GatConv::forward(const Matrix<const float>& in, const GraphBatch& batch,
                                     const PassInfo& pass) {
  require(size_t(layer_) < batch.layers.size(), "graph layer ", layer_, ": the batch has only ",
          batch.layers.size(), " graph layers");
  const LayerGraph& graph = batch.layers[size_t(layer_)];
  require(graph.adjacency != nullptr && graph.self != nullptr, "graph layer ", layer_,
          ": gat needs the batch's adjacency and self blocks");
  graph_ = &graph;
  row_ids_ = graph.output_ids;
  col_ids_ = rows_at(batch, in_).output_ids;
  const AttentionBlock a = block(graph, false);
  rows_in_ = a.forward.num_cols, rows_out_ = a.forward.num_rows;
  require(int64_t(in.extent(0)) == rows_in_ && int64_t(in.extent(1)) == in_b_, "graph layer ", layer_,
          ": the input block is ", in.extent(0), "x", in.extent(1), ", expected ", rows_in_, "x", in_b_);
  input_ = in;
  if (layer_ > 0) workspace_->reserve_input_gradient(rows_in_ * in_b_);
  const KernelPath path = comms_.kernels;
  const int64_t heads = options_.heads, edges = a.forward.nnz();
  const Terms t = terms();
  // z = H W over b; the node terms; the destination terms moved to the output rows.
  gemm_timed(comms_, Trans::No, Trans::No, in, weight_.matrix(), 0.0f, t.z);
  sum_over(*comms_.b, t.z.data(), int64_t(t.z.size()), phase::kForwardB, comms_.dtype);
  const Matrix<float> dst_in = leading_rows(dst_in_, "gat.dst_in", rows_in_, heads);
  attention_node_scores(t.z, att_src_.matrix(), att_dst_.matrix(), t.src, dst_in, path);
  spmm_timed(comms_, [&] { graph.self->forward.apply(dst_in, t.dst, 1.0f, 0.0f, path); });
  sum_over(*comms_.a, t.dst.data(), int64_t(t.dst.size()), phase::kForwardA);
  // The attention (kept for backward unless recomputed there), the weighted sum, the output.
  const LayerWorkspace::Pieces piece =
      workspace_->scratch({rows_out_ * z_width_, recompute_ ? edges * heads : 0});
  const Matrix<float> alpha = recompute_ ? Matrix<float>(piece[1], size_t(edges), size_t(heads))
                                         : leading_rows(alpha_, "gat.alpha", edges, heads);
  const Matrix<float> y(piece[0], size_t(rows_out_), size_t(z_width_));
  const EdgeDropout drop = attention_dropout(pass);
  if (comms_.a->size() == 1) {  // whole rows here: the softmax and the weighted sum in one pass
    spmm_timed(comms_, [&] {
      attention_forward_whole_rows(a, t.dst, t.src, t.row_max, t.row_sum, alpha, drop, t.z, y, path);
    });
  } else {
    attention(a, t, alpha);
    spmm_timed(comms_, [&] { attention_aggregate(a, alpha, drop, t.z, y, path); });
    sum_over(*comms_.a, y.data(), int64_t(y.size()), phase::kForwardA, comms_.dtype);
  }
  const Matrix<float> pre = leading_rows(pre_, "gat.pre", rows_out_, out_.local_cols);
  const Matrix<float> out = leading_rows(out_buffer_, "gat.out", rows_out_, out_.local_cols);
  const Vector<const float> bias = bias_ ? bias_->value() : Vector<const float>();
  attention_heads_forward(y, bias, heads_output(pass), pre, out, path);
  return out;
}

Matrix<float> GatConv::backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass) {
  const KernelPath path = comms_.kernels;
  const int64_t heads = options_.heads, local = out_.local_cols;
  const AttentionBlock a = block(*graph_, true);
  const int64_t edges = a.forward.nnz();
  const Terms t = terms();
  // Through dropout, activation and bias; then every output column of every row, and the heads' share.
  const HeadsOutput o = heads_output(pass);
  attention_heads_output_backward(grad_out, leading_rows(pre_, "gat.pre", rows_out_, local), o, path);
  if (bias_) bias_->gradient_from(grad_out, path, phase::kBackwardWeightsC);
  const int ga = comms_.a->size();
  const int64_t gathered_floats = ga > 1 ? rows_out_ * local * ga : 0;
  const int64_t c_floats = rows_in_ * (z_width_ + 2 * heads);
  const LayerWorkspace::Pieces piece =
      workspace_->scratch({rows_out_ * (z_width_ + 2 * heads) + (recompute_ ? edges * heads : 0),
                           edges * heads, std::max(c_floats, gathered_floats + rows_out_ * local * ga)});
  Carver first(piece[0]);
  const Matrix<float> g_y = first.next(rows_out_, z_width_), row_dot = first.next(rows_out_, heads),
                      g_dst = first.next(rows_out_, heads);
  Matrix<const float> g_full = grad_out;
  if (ga > 1) {  // the output's column blocks gathered over a, then laid side by side
    Kokkos::fence();
    device_all_gather(*comms_.a, grad_out.data(), rows_out_ * local, piece[2], phase::kBackwardGatherA);
    const Matrix<float> whole(piece[2] + gathered_floats, size_t(rows_out_), size_t(local * ga));
    for (int k = 0; k < ga; ++k) {
      const Matrix<const float> block_k(piece[2] + k * rows_out_ * local, size_t(rows_out_), size_t(local));
      Kokkos::deep_copy(Kokkos::subview(whole, Kokkos::ALL(), std::make_pair(k * local, (k + 1) * local)),
                        block_k);
    }
    g_full = whole;
  }
  attention_heads_backward(g_full, o, g_y, path);
  // The attention again where it was not kept; the edge softmax's backward.
  const Matrix<float> alpha =
      recompute_ ? first.next(edges, heads) : leading_rows(alpha_, "gat.alpha", edges, heads);
  if (recompute_) attention(a, t, alpha);
  const EdgeDropout drop = attention_dropout(pass);
  const Matrix<float> g_score(piece[1], size_t(edges), size_t(heads));
  if (comms_.a->size() == 1) {  // whole rows here: no sum between the SDDMM and the softmax backward
    attention_edge_backward_whole_rows(a, alpha, drop, g_y, t.z, t.dst, t.src, g_score, row_dot, g_dst, path);
  } else {
    attention_edge_gradients(a, alpha, drop, g_y, t.z, g_score, row_dot, path);
    sum_over(*comms_.a, row_dot.data(), int64_t(row_dot.size()), phase::kBackwardA);
    attention_score_gradients(a, alpha, row_dot, t.dst, t.src, g_score, g_dst, path);
    sum_over(*comms_.a, g_dst.data(), int64_t(g_dst.size()), phase::kBackwardA);
  }
  // z's, the sources' and the moved destination terms' gradients, summed over c at once.
  Carver third(piece[2]);
  const Matrix<float> g_z = third.next(rows_in_, z_width_), g_src = third.next(rows_in_, heads),
                      g_dst_in = third.next(rows_in_, heads);
  spmm_timed(comms_, [&] {
    attention_aggregate_transpose(a, alpha, drop, g_y, g_z, path);
    graph_->self->transpose.apply(g_dst, g_dst_in, 1.0f, 0.0f, path);
  });
  attention_source_gradients(a, g_score, g_src, path);
  sum_over(*comms_.c, piece[2], c_floats, phase::kBackwardInputsC, comms_.dtype);
  attention_node_score_gradients(t.z, att_src_.matrix(), att_dst_.matrix(), g_src, g_dst_in, g_z,
                                 att_src_.grad_matrix(), att_dst_.grad_matrix(), path);
  // The weights: over a (the rows of z); the attention vectors' with them in one sum.
  gemm_timed(comms_, Trans::Yes, Trans::No, input_, g_z, 0.0f, weight_.grad_matrix());
  sum_over(*comms_.a, weight_.grad.data(), weight_.size(), phase::kBackwardWeightsA);
  sum_over(*comms_.a, att_src_.grad.data(), att_src_.size(), phase::kBackwardWeightsA);
  sum_over(*comms_.a, att_dst_.grad.data(), att_dst_.size(), phase::kBackwardWeightsA);
  if (!want_input_grad) return Matrix<float>();
  const Matrix<float> grad_in = workspace_->input_gradient(rows_in_, in_b_);
  gemm_timed(comms_, Trans::No, Trans::Yes, g_z, weight_.matrix(), 0.0f, grad_in);
  return grad_in;
}

}  // namespace tessera
