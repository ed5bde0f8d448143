// SPDX-License-Identifier: BSD-3-Clause
// Graph attention (Velickovic et al., GAT; PyG's GATConv) as a layer of the 3D grid. Per head h, with
// z = H W (the nodes' projections, H F columns):
//   score(v, u) = LeakyReLU(a_dst,h . z_v,h + a_src,h . z_u,h) over v's in-edges and its self loop,
//   alpha = softmax over u of score (per destination v),  out_v,h = sum_u alpha(v, u) z_u,h;
// the heads concatenated or averaged, then bias, activation and dropout. On the grid (pmm.hpp's roles a,
// b, c of the layer):
//   z = H W (W rows by b, every column)       -> all-reduce over b   (z: rows by a, replicated over b, c)
//   node terms src, dst from z; dst moved to the output rows through the self block -> all-reduce over a
//   row max, then exponentials and row sums on this rank's edges   -> max, then sum, over a (H per row)
//   y = alpha-weighted sum of z over this rank's edges             -> all-reduce over a
// and backward the transposes of each step (the edge softmax's row term summed over a; the sources'
// gradients, z's and the moved dst terms' in one sum over c), never a dense N x N matrix. The per-edge
// attention (edges x H floats) is kept from forward to backward, or recomputed there from the row max and
// sum when RunOptions::recompute_aggregation is on (the same bits, edges x H less memory per layer).
// Its graph is the symmetric-normalized one's pattern (its weights unused): A + I, every in-edge and the self
// loop, as PyG's add_self_loops.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/kernels/attention.hpp"
#include "tessera/models/nn/layer.hpp"
#include "tessera/parallel3d/pmm.hpp"

namespace tessera {

/// A GatConv's settings (PyG's names where they mean the same; PyG's `dropout` of GATConv, on the
/// attention coefficients, is `attention_dropout` here, since `dropout` of every Tessera layer is on its
/// output).
struct GatOptions {
  int64_t heads = 1;                         ///< attention heads
  bool concat = true;                        ///< concatenate the heads (H x width columns), else average
  float negative_slope = 0.2f;               ///< LeakyReLU's slope of the scores
  float attention_dropout = 0.0f;            ///< dropout on the attention coefficients (training passes)
  bool bias = true;                          ///< add a bias after the heads are combined
  Activation activation = Activation::None;  ///< then this activation
  float dropout = 0.0f;                      ///< then dropout on the output (training passes)
};

/// Graph attention with `width` features per head; see the file comment.
class GatConv final : public Layer {
 public:
  /// The input width is the slot's; the output has heads x width columns (concat) or width (averaged).
  GatConv(LayerSlot& slot, int64_t width, const GatOptions& options = {});
  GatConv(const GatConv&) = delete;
  GatConv& operator=(const GatConv&) = delete;

  Matrix<const float> forward(const Matrix<const float>& in, const GraphBatch& batch,
                              const PassInfo& pass) override;
  Matrix<float> backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass) override;
  /// weight (in x heads width), att_src and att_dst (heads x width), bias.
  std::vector<ParameterRef> parameters() override;
  std::string describe() const override;
  /// The graph layer it took.
  int layer() const { return layer_; }

 private:
  struct Edges;  // this pass's block, as attention reads it
  AttentionBlock block(const LayerGraph& graph, bool with_transpose);
  EdgeDropout attention_dropout(const PassInfo& pass) const;
  HeadsOutput heads_output(const PassInfo& pass) const;
  // The pass's node terms and softmax row terms: leading rows of the buffers below.
  struct Terms {
    Matrix<float> z, src, dst, row_max, row_sum;
  };
  Terms terms();
  void attention(const AttentionBlock& a, const Terms& t, const Matrix<float>& alpha);

  GatOptions options_;
  int64_t width_, z_width_, in_b_;
  ActivationLayout in_, out_;
  int layer_;
  LayerComms comms_;
  bool recompute_;
  Parameter weight_, att_src_, att_dst_;
  BlockPlacement weight_at_, att_at_;
  std::unique_ptr<RowParameter> bias_;
  std::shared_ptr<LayerWorkspace> workspace_;
  // Forward state kept for backward (leading rows of buffers that grow with headroom).
  Matrix<const float> input_;
  const LayerGraph* graph_ = nullptr;
  int64_t rows_in_ = 0, rows_out_ = 0;
  Vector<const int64_t> row_ids_, col_ids_;  // the pass's output and input node ids (dropout keys)
  Matrix<float> z_, src_, dst_in_, dst_, row_max_, row_sum_, alpha_, pre_, out_buffer_;  // capacities
  Vector<int64_t> where_;  // the static graph's transpose positions (computed once)
  const AdjacencyBlock* where_for_ = nullptr;
};

}  // namespace tessera
