// SPDX-License-Identifier: BSD-3-Clause
// The communication schedule of one layer's A * H * W on the 3D grid (DESIGN §4, Plexus):
//   forward   AGG = A_loc H      -> all-reduce over a      OUT = AGG W      -> all-reduce over b
//   backward  gW = AGG^T gOUT    -> all-reduce over c      gAGG = gOUT W^T  -> all-reduce over a
//             gH = A_loc^T gAGG  -> all-reduce over c      (layer 0 skips gAGG and gH)
// A narrowing layer after the first runs transform-first (Layout3D::transforms_first), its W block rows by
// b with every output column:
//   forward   T = H W            -> all-reduce over b      Y = A_loc T        -> all-reduce over a
//             OUT = a's columns of Y
//   backward  G = all-gather of g_OUT over a               gT = A_loc^T G     -> all-reduce over c
//             gW = H^T gT        -> all-reduce over a      gH = gT W^T        (no communication)
// Only dense blocks travel; the sparse blocks never move after loading. A reduction over an axis of
// extent 1 moves nothing and is not counted.
#pragma once

#include <string>

#include "tessera/comm/process_grid.hpp"
#include "tessera/comm/reduced_precision.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/parallel3d/graph3d.hpp"

namespace tessera {

/// The axis communicators of one layer's roles.
struct LayerComms {
  const Communicator* a;
  const Communicator* b;
  const Communicator* c;
  /// --overlap: the sparse products run in this many row chunks, each chunk's all-reduce issued
  /// non-blocking while the next chunk computes (0 or 1: one blocking all-reduce).
  int overlap_chunks = 0;
  /// When set, SpMM and GEMM seconds are added here under "spmm" and "gemm" (each kernel fenced).
  PhaseTimers* timers = nullptr;
  /// Element type on the wire of the activation and activation-gradient sums (forward a and b,
  /// backward a and c (inputs)); weight gradients, norms and the loss always travel as fp32.
  CommDtype dtype = CommDtype::F32;
};
LayerComms layer_comms(const ProcessGrid& grid, int layer, int overlap_chunks = 0,
                       PhaseTimers* timers = nullptr, CommDtype dtype = CommDtype::F32);

/// In-place sum of a block over `comm` (nothing when comm has one rank), fp32 or bf16 on the wire.
void sum_over(const Communicator& comm, float* data, int64_t count, const std::string& phase,
              CommDtype dtype = CommDtype::F32);

/// agg (rows_c x in_b) = sum_a A_loc h; skipped when `agg_ready` (a static input aggregated before).
/// out (rows_c x out_a) = sum_b agg w.
void pmm_forward(const AdjacencyBlock& a, const LayerComms& comms, const Matrix<const float>& h,
                 const Matrix<const float>& w, const Matrix<float>& agg, const Matrix<float>& out,
                 bool agg_ready);

/// g_w = sum_c agg^T g_out; when g_h is not empty also g_agg = sum_a g_out w^T and g_h = sum_c A_loc^T g_agg.
void pmm_backward(const AdjacencyBlock& a, const LayerComms& comms, const Matrix<const float>& agg,
                  const Matrix<const float>& w, const Matrix<const float>& g_out, const Matrix<float>& g_w,
                  const Matrix<float>& g_agg, const Matrix<float>& g_h);

/// Transform-first forward: t (rows_a x out) = sum_b h w, y (rows_c x out) = sum_a A_loc t and
/// out (rows_c x out / G_a) = this rank's a-block of y's columns (y unused when G_a = 1).
void pmm_forward_transform_first(const AdjacencyBlock& a, const LayerComms& comms,
                                 const Matrix<const float>& h, const Matrix<const float>& w,
                                 const Matrix<float>& t, const Matrix<float>& y, const Matrix<float>& out);

/// Transform-first backward: g_y = g_out gathered over a, g_t = sum_c A_loc^T g_y, g_w = sum_a h^T g_t and,
/// when g_h is not empty, g_h = g_t w^T. `gathered` holds G_a blocks of g_out's size (both unused when
/// G_a = 1: g_out is then the whole g_y).
void pmm_backward_transform_first(const AdjacencyBlock& a, const LayerComms& comms,
                                  const Matrix<const float>& h, const Matrix<const float>& w,
                                  const Matrix<const float>& g_out, const Vector<float>& gathered,
                                  const Matrix<float>& g_y, const Matrix<float>& g_t,
                                  const Matrix<float>& g_w, const Matrix<float>& g_h);

/// Distributed masked softmax cross-entropy over logits whose rows are split over c and classes over a
/// (columns col_begin + j; only the first `classes` global columns are real). Returns the loss summed over
/// selected rows of the whole grid and their count; grad = grad_scale * (softmax - onehot) when not empty.
std::pair<double, int64_t> softmax_cross_entropy_3d(const LayerComms& comms,
                                                    const Matrix<const float>& logits, int64_t col_begin,
                                                    int64_t classes, const Vector<const int64_t>& labels,
                                                    const Vector<const uint8_t>& mask, float grad_scale,
                                                    const Matrix<float>& grad);

/// Correct predictions (argmax over the real classes, lowest index on ties) and count, over the grid.
std::pair<int64_t, int64_t> count_correct_3d(const LayerComms& comms, const Matrix<const float>& logits,
                                             int64_t col_begin, int64_t classes,
                                             const Vector<const int64_t>& labels,
                                             const Vector<const uint8_t>& mask);

/// Local argmax (global class index) of every row, agreed over a.
Vector<int64_t> argmax_3d(const LayerComms& comms, const Matrix<const float>& logits, int64_t col_begin,
                          int64_t classes);

}  // namespace tessera
