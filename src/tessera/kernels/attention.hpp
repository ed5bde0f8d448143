// SPDX-License-Identifier: BSD-3-Clause
// The kernels of graph attention (GAT) on one block of a CSR pattern: entry (i, j) is an edge j -> i, rows
// are destinations, columns sources; H heads of F features each, a node's projected row laid out head by
// head (column h * F + f). Each step works on this rank's entries and leaves the sums across ranks that
// share a row or a column to the caller, as the norms' kernels do (norm.hpp), so a layer on any grid
// computes what one rank computes:
//   forward   score(i, j, h) = LeakyReLU(dst(i, h) + src(j, h))
//             alpha(i, j, h) = exp(score - max_j score) / sum_j exp(score - max_j score)   (per row, head)
//             y(i, h, :) = sum_j alpha(i, j, h) z(j, h, :)
//   backward  g_alpha = g_y(i, h, :) . z(j, h, :)                                           (an SDDMM)
//             g_score = alpha (g_alpha - sum_j alpha g_alpha) LeakyReLU'(...)
//             g_dst(i, h) = sum_j g_score,  g_src(j, h) = sum_i g_score,  g_z(j) = sum_i alpha g_y(i)
// Attention dropout multiplies alpha by a mask recomputed from the edge's global node ids (never stored).
// Every kernel runs on the host or team path (kernel_path.hpp; Vendor runs the team path) and sums in the
// same order on both, so they give the same bits. A row's sums run over its entries in storage order.
#pragma once

#include <cstdint>

#include "tessera/core/csr.hpp"
#include "tessera/core/enum_names.hpp"
#include "tessera/core/random.hpp"
#include "tessera/core/views.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/kernels/spmm.hpp"

namespace tessera {

/// A block's pattern as attention reads it: the adjacency block's CSR (its values are not used).
using EdgePattern = CsrMatrix<float, DeviceSpace, SpmmColumn>;

/// Which edges attention dropout keeps, recomputed from (seed, stream) at the edge's global (destination,
/// source) node ids and its head, so every grid and every mode drops the same edges. A value type
/// captured by kernels; it owns no memory.
class EdgeDropout {
 public:
  /// No dropout.
  EdgeDropout() = default;
  /// Drops with probability `rate`; local row i is node row_ids(i), local column j node col_ids(j).
  EdgeDropout(float rate, uint64_t seed, uint64_t stream, int64_t heads, Vector<const int64_t> row_ids,
              Vector<const int64_t> col_ids)
      : rate_(rate),
        rng_(seed, stream),
        threshold_(uint32_t(rate * 65536.0f)),
        head_blocks_((heads + 7) / 8),
        row_ids_(row_ids),
        col_ids_(col_ids) {}

  /// Whether any edge can be dropped.
  KOKKOS_INLINE_FUNCTION bool active() const { return rate_ > 0.0f; }
  /// 1 / (1 - rate) where local edge (i, j) is kept in head h, else 0 (1 without dropout).
  KOKKOS_INLINE_FUNCTION float factor(int64_t i, int64_t j, int64_t h) const {
    return active() ? factor_of_nodes(row_ids_(i), col_ids_(j), h) : 1.0f;
  }
  /// The factor of the edge from node `src` to node `dst` in head h (what factor reads off the ids).
  KOKKOS_INLINE_FUNCTION float factor_of_nodes(int64_t dst, int64_t src, int64_t h) const {
    if (!active()) return 1.0f;
    const Philox4x32Block r =
        rng_.bits(uint64_t(dst), uint64_t(src) * uint64_t(head_blocks_) + uint64_t(h >> 3));
    const int t = int(h & 7);
    const uint32_t word = r.v[t >> 1];
    const uint32_t draw = (t & 1) ? word >> 16 : word & 0xFFFFu;
    return draw >= threshold_ ? 1.0f / (1.0f - rate_) : 0.0f;
  }

 private:
  float rate_ = 0.0f;
  CounterRng rng_{0, 0};
  uint32_t threshold_ = 0;
  int64_t head_blocks_ = 1;
  Vector<const int64_t> row_ids_, col_ids_;
};

/// One attention block: the pattern, its explicit transpose (rows = sources) and, for each transpose entry,
/// the position of the same edge in the pattern (transpose_positions).
struct AttentionBlock {
  EdgePattern forward;          ///< rows: destinations, columns: sources
  EdgePattern transpose;        ///< rows: sources, columns: destinations (may be 0 x 0 for forward only)
  Vector<const int64_t> where;  ///< transpose entry t is forward entry where(t)
  int64_t heads = 1;            ///< H
  float negative_slope = 0.2f;  ///< LeakyReLU's slope below zero
};

/// where(t) for every entry t of `transpose`: the forward entry of the same edge. The transpose's rows must
/// list their columns in increasing order (what csr_transpose gives) and a repeated edge's repeats must be
/// next to each other in its forward row; throws Error when `transpose` is not the transpose of `forward`.
Vector<int64_t> transpose_positions(const EdgePattern& forward, const EdgePattern& transpose,
                                    KernelPath path = KernelPath::Auto);

/// src(n, h) = z(n, h, :) . att_src(h, :) and dst(n, h) = z(n, h, :) . att_dst(h, :) for every row n of z
/// (n x H F): each node's source and destination terms, head by head (att_*: H x F).
void attention_node_scores(const Matrix<const float>& z, const Matrix<const float>& att_src,
                           const Matrix<const float>& att_dst, const Matrix<float>& src,
                           const Matrix<float>& dst, KernelPath path = KernelPath::Auto);

/// row_max(i, h) = max over this block's entries of row i of score(i, j, h) (-inf for a row without
/// entries); `dst` (rows x H) and `src` (cols x H) are the terms.
void attention_row_max(const AttentionBlock& a, const Matrix<const float>& dst,
                       const Matrix<const float>& src, const Matrix<float>& row_max,
                       KernelPath path = KernelPath::Auto);

/// alpha(e, h) = exp(score(e, h) - row_max(i, h)) for every entry e of row i, and row_sum(i, h) the sum of
/// them over this block's entries (row_max summed over every rank of the row first).
void attention_exponentials(const AttentionBlock& a, const Matrix<const float>& dst,
                            const Matrix<const float>& src, const Matrix<const float>& row_max,
                            const Matrix<float>& alpha, const Matrix<float>& row_sum,
                            KernelPath path = KernelPath::Auto);

/// alpha(e, h) /= row_sum(i, h) (the sum over every rank of the row).
void attention_normalize(const AttentionBlock& a, const Matrix<const float>& row_sum,
                         const Matrix<float>& alpha, KernelPath path = KernelPath::Auto);

/// The forward of a block that holds its rows whole (no other rank holds part of one: nothing to sum over
/// ranks between the steps): attention_row_max, attention_exponentials, attention_normalize and
/// attention_aggregate in one. The host path takes each row once through all four (the row's scores kept in
/// alpha between them, its source terms and z rows gathered once each), the team path runs the four
/// kernels; both give what the four give.
void attention_forward_whole_rows(const AttentionBlock& a, const Matrix<const float>& dst,
                                  const Matrix<const float>& src, const Matrix<float>& row_max,
                                  const Matrix<float>& row_sum, const Matrix<float>& alpha,
                                  const EdgeDropout& dropout, const Matrix<const float>& z,
                                  const Matrix<float>& y, KernelPath path = KernelPath::Auto);

/// y (rows x H F) = sum over row i's entries of alpha(e, h) dropout(e, h) z(j, h, :).
void attention_aggregate(const AttentionBlock& a, const Matrix<const float>& alpha,
                         const EdgeDropout& dropout, const Matrix<const float>& z, const Matrix<float>& y,
                         KernelPath path = KernelPath::Auto);

/// g_z (cols x H F) = sum over the entries of column j of alpha(e, h) dropout(e, h) g_y(i, h, :): the
/// transpose of attention_aggregate, over a.transpose (no atomics: the same bits every run).
void attention_aggregate_transpose(const AttentionBlock& a, const Matrix<const float>& alpha,
                                   const EdgeDropout& dropout, const Matrix<const float>& g_y,
                                   const Matrix<float>& g_z, KernelPath path = KernelPath::Auto);

/// g_alpha(e, h) = dropout(e, h) g_y(i, h, :) . z(j, h, :) (an SDDMM per head), and row_dot(i, h) = the sum
/// of alpha(e, h) g_alpha(e, h) over row i's entries here: the softmax backward's row term.
void attention_edge_gradients(const AttentionBlock& a, const Matrix<const float>& alpha,
                              const EdgeDropout& dropout, const Matrix<const float>& g_y,
                              const Matrix<const float>& z, const Matrix<float>& g_alpha,
                              const Matrix<float>& row_dot, KernelPath path = KernelPath::Auto);

/// In place: g_alpha becomes g_score(e, h) = alpha (g_alpha - row_dot(i, h)) LeakyReLU'(dst + src) (row_dot
/// summed over every rank of the row), and g_dst(i, h) = its sum over row i's entries here.
void attention_score_gradients(const AttentionBlock& a, const Matrix<const float>& alpha,
                               const Matrix<const float>& row_dot, const Matrix<const float>& dst,
                               const Matrix<const float>& src, const Matrix<float>& g_alpha,
                               const Matrix<float>& g_dst, KernelPath path = KernelPath::Auto);

/// attention_edge_gradients then attention_score_gradients, for a block that holds its rows whole (row_dot
/// needs no sum over ranks between them): on the host path in one pass per row (the row's g_alpha kept in
/// cache between the two), the two kernels on the team path; both give what the two give.
void attention_edge_backward_whole_rows(const AttentionBlock& a, const Matrix<const float>& alpha,
                                        const EdgeDropout& dropout, const Matrix<const float>& g_y,
                                        const Matrix<const float>& z, const Matrix<const float>& dst,
                                        const Matrix<const float>& src, const Matrix<float>& g_score,
                                        const Matrix<float>& row_dot, const Matrix<float>& g_dst,
                                        KernelPath path = KernelPath::Auto);

/// g_src(j, h) = the sum of g_score(e, h) over column j's entries here (over a.transpose).
void attention_source_gradients(const AttentionBlock& a, const Matrix<const float>& g_score,
                                const Matrix<float>& g_src, KernelPath path = KernelPath::Auto);

/// The score terms' share of the gradients: g_z(n, h, :) += g_src(n, h) att_src(h, :) + g_dst(n, h)
/// att_dst(h, :) (g_src, g_dst: n x H); and g_att_src(h, :), g_att_dst(h, :) (H x F) = the column sums over
/// this block's rows of g_src(n, h) z(n, h, :) and g_dst(n, h) z(n, h, :).
void attention_node_score_gradients(const Matrix<const float>& z, const Matrix<const float>& att_src,
                                    const Matrix<const float>& att_dst, const Matrix<const float>& g_src,
                                    const Matrix<const float>& g_dst, const Matrix<float>& g_z,
                                    const Matrix<float>& g_att_src, const Matrix<float>& g_att_dst,
                                    KernelPath path = KernelPath::Auto);

/// The activation after an attention layer's heads are combined.
enum class Activation {
  None,  ///< the identity
  Relu,  ///< max(x, 0)
  Elu    ///< x where x > 0, else e^x - 1 (the GAT paper's)
};
/// The names of Activation's values (core/enum_names.hpp): what the command line, the bindings and messages
/// use.
inline constexpr EnumName<Activation> kActivationNames[] = {
    {Activation::None, "none"}, {Activation::Relu, "relu"}, {Activation::Elu, "elu"}};
/// none, relu or elu: the name of a value.
inline const char* activation_name(Activation activation) {
  return name_of(kActivationNames, activation);
}

/// How an attention layer's heads become its output block: concatenated (H F columns) or averaged (F).
struct HeadsOutput {
  int64_t heads = 1;      ///< H
  bool concat = true;     ///< concatenate (else average)
  int64_t col_begin = 0;  ///< the global output column of local column 0
  int64_t width = 0;      ///< the global output width (H F or F); local columns past it are padding
  Activation activation = Activation::None;  ///< after the bias
  DropoutMask dropout;                       ///< on the output (inactive by default)
};

/// pre (rows x local) = the heads of y (rows x H F, every column) combined, at columns [col_begin, col_begin
/// + local) of the output, plus `bias` (may be empty); out = dropout(activation(pre)). Padding columns: 0.
void attention_heads_forward(const Matrix<const float>& y, const Vector<const float>& bias,
                             const HeadsOutput& o, const Matrix<float>& pre, const Matrix<float>& out,
                             KernelPath path = KernelPath::Auto);

/// In place: dL/d(out) becomes dL/d(pre) (the dropout factor times the activation's slope at pre).
void attention_heads_output_backward(const Matrix<float>& grad, const Matrix<const float>& pre,
                                     const HeadsOutput& o, KernelPath path = KernelPath::Auto);

/// g_y (rows x H F) = dL/dy from g_out (rows x every padded output column): the same columns where the heads
/// are concatenated, each head's share (1 / H) of the averaged column where they are averaged.
void attention_heads_backward(const Matrix<const float>& g_out, const HeadsOutput& o,
                              const Matrix<float>& g_y, KernelPath path = KernelPath::Auto);

}  // namespace tessera
