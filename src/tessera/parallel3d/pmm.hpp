// SPDX-License-Identifier: BSD-3-Clause
// The communication schedule of one layer's A * H * W on the 3D grid (docs/architecture.md §4, Plexus):
//   forward   AGG = A_loc H      -> all-reduce over a      OUT = AGG W      -> all-reduce over b
//   backward  gW = AGG^T gOUT    -> all-reduce over c      gAGG = gOUT W^T  -> all-reduce over a
//             gH = A_loc^T gAGG  -> all-reduce over c      (layer 0 skips gAGG and gH)
// A narrowing layer after the first runs transform-first (Layout3D::transforms_first), its W block rows by
// b with every output column:
//   forward   T = H W            -> all-reduce over b      Y = A_loc T        -> all-reduce over a
//             OUT = a's columns of Y
//   backward  G = all-gather of g_OUT over a               gT = A_loc^T G     -> all-reduce over c
//             gW = H^T gT        -> all-reduce over a      gH = gT W^T        (no communication)
// A layer with a self term (GraphSAGE's root weight) adds S_loc, the self block, beside A_loc in every
// sparse product: (A H) W stacks [A_loc H; S_loc H] in the one all-reduce over a; transform-first sums
// A_loc T_A + S_loc T_S before it. So the root term's row redistribution between layouts rides inside the
// collectives the layer runs anyway (at double their width over a in (A H) W layers).
// Only dense blocks travel; the sparse blocks never move after loading. A reduction over an axis of
// extent 1 moves nothing and is not counted.
#pragma once

#include <string>
#include <vector>

#include "tessera/comm/comm_stats.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/comm/reduced_precision.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/parallel3d/graph3d.hpp"

namespace tessera {

/// The axis communicators of one graph layer's roles, and how its kernels and collectives run.
struct LayerComms {
  const Communicator* a = nullptr;  ///< the layer's outer axis
  const Communicator* b = nullptr;  ///< inner axis
  const Communicator* c = nullptr;  ///< depth axis
  /// --overlap: the sparse products run in this many row chunks, each chunk's all-reduce issued
  /// non-blocking while the next chunk computes (0 or 1: one blocking all-reduce).
  int overlap_chunks = 0;
  /// When set, SpMM and GEMM seconds are added here under "spmm" and "gemm" (each kernel fenced).
  PhaseTimers* timers = nullptr;
  /// Element type on the wire of the activation and activation-gradient sums (forward a and b,
  /// backward a and c (inputs)); weight gradients, norms and the loss always travel as fp32.
  CommDtype dtype = CommDtype::F32;
  /// Which SpMM and GEMM kernels run (kernel_path.hpp).
  KernelPath kernels = KernelPath::Auto;
};
/// The communicators of `layer`'s roles on `grid`, with the given settings.
LayerComms layer_comms(const ProcessGrid& grid, int layer, int overlap_chunks = 0,
                       PhaseTimers* timers = nullptr, CommDtype dtype = CommDtype::F32,
                       KernelPath kernels = KernelPath::Auto);

/// The sparse side of one graph layer: a term per block, each with its own weight block. The aggregate
/// term is the normalized adjacency; a self term (GraphSAGE's root weight) is the self block, which moves
/// a node's own row from the input layout to the output layout inside the same products and sums.
struct LayerOperators {
  const AdjacencyBlock* aggregate = nullptr;  ///< term 0 (may be absent: a self-only layer)
  const AdjacencyBlock* self = nullptr;       ///< the self term, when the layer has one
  /// The terms in order (aggregate first).
  std::vector<const AdjacencyBlock*> terms() const;
};

/// In-place sum of a block over `comm` (nothing when comm has one rank), fp32 or bf16 on the wire.
void sum_over(const Communicator& comm, float* data, int64_t count, const std::string& phase,
              CommDtype dtype = CommDtype::F32);
/// In-place sum of double values over `comm` (nothing when comm has one rank).
void sum_over(const Communicator& comm, double* data, int64_t count, const std::string& phase);

// Below, T is the number of terms; "stacked" buffers hold the terms' blocks one after another by rows.

/// agg (T rows_c x in_b, stacked) = sum_a Op_t h, the sum counted under `phase`: pmm_forward's first half,
/// which a layer that keeps no aggregation runs again in backward (phase::kBackwardRecomputeA).
void pmm_aggregate(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& h,
                   const Matrix<float>& agg, const char* phase);

/// agg (T rows_c x in_b, stacked) = sum_a Op_t h; skipped when `agg_ready` (a static input aggregated
/// before). out (rows_c x out_a) = sum_b sum_t agg_t w_t, with w (T in_b x out_a) stacked.
void pmm_forward(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& h,
                 const Matrix<const float>& w, const Matrix<float>& agg, const Matrix<float>& out,
                 bool agg_ready);

/// pmm_aggregate for an input held as bf16 bits (node features stored as bf16): the products widen each
/// entry as they read it and sum in fp32, so agg (fp32) is bit for bit the fp32 input's of the widened
/// values.
void pmm_aggregate(const LayerOperators& ops, const LayerComms& comms, const Matrix<const uint16_t>& h,
                   const Matrix<float>& agg, const char* phase);
/// pmm_forward for an input held as bf16 bits, aggregated as pmm_aggregate on bf16 does; agg and out fp32.
void pmm_forward(const LayerOperators& ops, const LayerComms& comms, const Matrix<const uint16_t>& h,
                 const Matrix<const float>& w, const Matrix<float>& agg, const Matrix<float>& out,
                 bool agg_ready);
/// pmm_forward's second half: out = sum_b sum_t agg_t w_t.
void pmm_transform(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& w,
                   const Matrix<const float>& agg, const Matrix<float>& out);

/// g_w (stacked like w) = sum_c agg_t^T g_out; with `want_input_grad` also g_agg (stacked) = sum_a g_out
/// w_t^T and g_h = sum_c sum_t Op_t^T g_agg_t. Whether the input gradient is wanted is an argument, never
/// read off a buffer: a rank whose block is empty still enters every collective its peers enter. agg is
/// read in full before g_agg is written, so the two may share memory.
void pmm_backward(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& agg,
                  const Matrix<const float>& w, const Matrix<const float>& g_out, const Matrix<float>& g_w,
                  bool want_input_grad, const Matrix<float>& g_agg, const Matrix<float>& g_h);

/// pmm_backward with agg held as bf16 bits (RunOptions::activation_dtype): the weight gradients through
/// gemm_bf16_operand, which reads the bits as they are where the GEMM rounds to bf16 anyway and otherwise
/// widens them into `widened` (agg's extents) first. `widened` may share memory with g_agg: it is read in
/// full before g_agg is written.
void pmm_backward(const LayerOperators& ops, const LayerComms& comms, const Matrix<const uint16_t>& agg,
                  const Matrix<float>& widened, const Matrix<const float>& w,
                  const Matrix<const float>& g_out, const Matrix<float>& g_w, bool want_input_grad,
                  const Matrix<float>& g_agg, const Matrix<float>& g_h);

/// pmm_transform on agg rounded to bf16 bits, read as they are: only where gemm_reads_bf16_bits, where
/// the result equals pmm_transform's on the fp32 sums the bits round (the GEMM rounds them the same way).
void pmm_transform(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& w,
                   const Matrix<const uint16_t>& agg, const Matrix<float>& out);

/// Transform-first forward: t (T rows_a x out, stacked) = sum_b h w_t with w (T in_b x out) stacked,
/// y (rows_c x out) = sum_a sum_t Op_t t_t and out (rows_c x out / G_a) = this rank's a-block of y's columns
/// (y unused when G_a = 1).
void pmm_forward_transform_first(const LayerOperators& ops, const LayerComms& comms,
                                 const Matrix<const float>& h, const Matrix<const float>& w,
                                 const Matrix<float>& t, const Matrix<float>& y, const Matrix<float>& out);

/// Transform-first backward: g_y = g_out gathered over a, g_t (stacked) = sum_c Op_t^T g_y,
/// g_w (stacked) = sum_a h^T g_t_t and, with `want_input_grad`, g_h = sum_t g_t_t w_t^T. `gathered` holds
/// G_a blocks of g_out's size (both unused when G_a = 1: g_out is then the whole g_y); it is read only
/// before g_t is written, so it may share g_t's memory.
void pmm_backward_transform_first(const LayerOperators& ops, const LayerComms& comms,
                                  const Matrix<const float>& h, const Matrix<const float>& w,
                                  const Matrix<const float>& g_out, const Vector<float>& gathered,
                                  const Matrix<float>& g_y, const Matrix<float>& g_t,
                                  const Matrix<float>& g_w, bool want_input_grad, const Matrix<float>& g_h);

/// Names under which the schedule's collectives are counted (CommStats phases).
namespace phase {
inline constexpr const char* kForwardA = "forward allreduce a";                     ///< (A H) or A T over a
inline constexpr const char* kForwardB = "forward allreduce b";                     ///< AGG W or H W over b
inline constexpr const char* kBackwardWeightsC = "backward allreduce c (weights)";  ///< weight gradients
inline constexpr const char* kBackwardA = "backward allreduce a";                   ///< g_AGG over a
inline constexpr const char* kBackwardInputsC = "backward allreduce c (inputs)";    ///< input gradients
inline constexpr const char* kBackwardGatherA = "backward allgather a";             ///< transform-first g_OUT
inline constexpr const char* kBackwardWeightsA = "backward allreduce a (weights)";  ///< transform-first g_W
inline constexpr const char* kBackwardRecomputeA = "backward allreduce a (recompute)";  ///< A H again
}  // namespace phase

}  // namespace tessera
