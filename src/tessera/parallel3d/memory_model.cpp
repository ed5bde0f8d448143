// SPDX-License-Identifier: BSD-3-Clause
// predict_memory: one rank's resident memory, term by term as build_graph_3d and the layers allocate it.
// Every term names the code it mirrors; when that code changes, this changes with it (the CLI test
// `memory_plan` compares the prediction with the measured peak on grids of 1 to 8 ranks).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tessera/kernels/kernel_path.hpp"
#include "tessera/kernels/spmm.hpp"
#include "tessera/parallel3d/layout.hpp"
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera {

namespace {

// What read_graph_rows reads: this rank's rows of indptr, indices, features, labels and split bits. The
// load frees the edges after the adjacency and the features in their phase (build_graph_3d(GraphRows&&)).
struct RowsBytes {
  double edges = 0, features = 0, labels = 0;
  double all() const { return edges + features + labels; }
};

RowsBytes read_rows_bytes(const ProblemSize& p, double rows_read, double edges) {
  // bf16 features are read as bits, unless they are normalized first (as fp32).
  const double value = p.feature_bytes == 2 && !p.normalize_features ? 2 : 4;
  return {8 * (rows_read + 1) + 8 * edges, value * double(p.dims.front()) * rows_read,
          (9 + double(p.tasks)) * rows_read};
}

// A multi-label row's task labels in the labels exchange: eight to a word.
double task_words_bytes(const ProblemSize& p) {
  return 8 * double((p.tasks + 7) / 8);
}

struct LayoutBytes {
  double matrix = 0;    // one of the two matrices kept
  double sent = 0;      // what this rank sends of it in all (MPI's buffers grow with it)
  double exchange = 0;  // distribute_adjacency's peak, ending with the block and its transpose
  double kept = 0;      // the block and its transpose (CsrSpmm: SpmmColumn ids, degree scales)
};

// Rounds an exchange of `bytes` (this rank's send side, all rounds) takes within `budget` (RowRounds).
double rounds_for(double bytes, double budget) {
  return budget > 0 ? std::max(1.0, std::ceil(bytes / budget)) : 1.0;
}

// Layout t of the adjacency (adjacency3d.cpp). Every nonzero is sent as two int32 to the copy that builds
// its row of the block and, with G_b > 1 copies, to the copy that builds its row of the transpose, in
// rounds within the exchange budget; a round's first pass keeps 8 bytes per nonzero for the second. A
// builder keeps every round's entries until it builds. Then the degrees of the block's rows and columns
// are fetched (about 44 bytes per node while asking, 8 kept). Each copy builds 1/G_b of both patterns and
// an all-gather over the copies assembles them, so a copy holds its two parts beside the whole matrices.
// Both are built with SpmmColumn ids (int32 on host builds), which CsrSpmm keeps as they are. The weights
// are the degrees' scales (8 bytes per row and column, shared by the block and its transpose); a device
// build multiplies them out into a float per nonzero.
LayoutBytes layout_bytes(const Layout3D& layout, int t, double nnz, double budget) {
  const GridShape& s = layout.shape();
  const AxisRoles r = roles_for_layer(t);
  const double ranks = double(s.x) * s.y * s.z, np = double(layout.padded_nodes());
  const double gb = s.extent(r.b), block_nnz = nnz / (double(s.extent(r.a)) * s.extent(r.c));
  const double rows_c = np / s.extent(r.c), rows_a = np / s.extent(r.a);
  const double streams = gb == 1 ? 1 : 2, local = nnz / ranks;  // entries this rank sends per stream
  const double rounds = rounds_for((8 + 8 * streams) * local, budget);
  const double cache = 8 * local / rounds, stream = 8 * streams * local / rounds;  // one round's
  const double received = 8 * block_nnz / gb * streams;  // every round's, kept until the build
  const double degrees = 8 * (rows_c + rows_a), asking = 36 * std::max(rows_c, rows_a);
  const double column = double(sizeof(SpmmColumn)), offsets = 8 * (rows_c + 1) + 8 * (rows_a + 1);
  const double value = std::is_same<DeviceSpace, HostSpace>::value ? 0.0 : 4.0;
  const double matrix = column * block_nnz;  // one matrix's ids
  LayoutBytes b;
  b.matrix = (value + column) * block_nnz + offsets / 2;
  b.kept = 2 * b.matrix + degrees;  // degrees: the scales
  b.sent = stream * rounds;         // measured: MPI's buffers did not shrink with the rounds
  const double sending = std::max(received * (rounds - 1) / rounds + cache + stream, received + stream);
  if (gb == 1) {
    b.exchange = std::max({sending, received + degrees + asking, degrees + received + matrix + offsets,
                           degrees + 2 * matrix + offsets});
  } else {
    const double part = matrix / gb;  // one part built
    b.exchange = std::max({sending, received + degrees + asking, degrees + received + part,
                           degrees + received / 2 + 2 * part, degrees + 2 * part + matrix,
                           degrees + part + 2 * matrix + offsets});
  }
  return b;
}

// What layout t keeps on a replica of one rank (build_graph_3d): layouts in the same orders share one block
// (identical_layout), and a symmetric normalized adjacency's layouts in swapped orders share their matrices
// (share_transposed: after the build, so its peak counts). GCN's normalization of a graph the file calls
// symmetric is taken to be symmetric.
enum class LayoutShare { None, Identical, Transposed, SelfTransposed };

LayoutShare layout_share(const ProblemSize& p, const GridShape& s, int t) {
  if (s.x != 1 || s.y != 1 || s.z != 1) return LayoutShare::None;
  if (p.one_order ? t > 0 : t >= 2) return LayoutShare::Identical;
  if (!(p.symmetric_graph && p.symmetric)) return LayoutShare::None;
  return p.one_order ? LayoutShare::SelfTransposed : t == 1 ? LayoutShare::Transposed : LayoutShare::None;
}

// distribute_features: (position, padded row) to every (y, z) of the row's X block, each received row
// placed in the block. In one round the rows' own features are freed once packed, before the receive
// buffer and the block are allocated, and the send buffer is counted beside the block all the same: below
// glibc's mmap threshold (which it raises up to 32 MiB as arrays are freed) freed memory stays in the
// process until the load ends (release_free_memory), so a small graph peaks so, and a large one this much
// lower. In rounds (taken where they lower the peak: features_budget) the rows and the block are held
// throughout, beside one round's buffers. Values of `value_bytes` (4, or 2 for bf16 bits) sent and held.
double features_exchange_bytes(const Layout3D& layout, double rows_read, double own_features, double nodes,
                               double budget, double value_bytes) {
  const GridShape& s = layout.shape();
  const double fp = double(layout.padded_dim(0)), vb = value_bytes;
  const double sent = rows_read * s.z * (8.0 * s.y + vb * fp) + 8 * rows_read;
  const double received = nodes / s.x * (8 + vb * fp / s.y);
  const double block = vb * double(layout.padded_nodes()) / s.x * fp / s.y;
  const double rounds = rounds_for(sent, budget);
  const double many = own_features + block + (sent + received) / rounds;
  const bool in_rounds =
      many < std::max({own_features + sent, sent + received, received + block});  // features_budget's rule
  return in_rounds ? many : std::max(own_features, sent) + received + block;
}

// distribute_labels: (layout, position, label, splits[, task words]) to the G_a x G_b ranks of the row's
// block in each layout the model uses, received (layouts that share their node data counted too: an upper
// bound), and the labels, masks and task rows built from them.
double labels_exchange_bytes(const ProblemSize& p, const Layout3D& layout, double rows_read) {
  const GridShape& s = layout.shape();
  const double tuple = 32 + task_words_bytes(p);
  double bytes = 0;
  for (int t = 0; t < layout.num_adjacency_layouts(); ++t) {
    const AxisRoles r = roles_for_layer(t);
    const double rows_c = double(layout.padded_nodes()) / s.extent(r.c);
    bytes += tuple * rows_read * s.extent(r.a) * s.extent(r.b) + tuple * double(p.nodes) / s.extent(r.c) +
             (11 + double(p.tasks)) * rows_c;
  }
  return bytes;
}

struct LayerFloats {
  double kept = 0;                // held from forward to backward and between steps
  double scratch = 0;             // the largest call's temporaries (the model's shared scratch)
  double input_grad = 0;          // the input gradient (in the one buffer every layer's shares)
  double gemm_scratch_bytes = 0;  // what the host GEMM keeps after the weight gradient (kernel_path.hpp)
  double gemm_a = 0, gemm_b = 0;  // entries of the largest A and B its GEMMs read (bf16 GEMMs copy them)
};

// GraphMultiply's buffers: its own (out, agg), its weights with their gradients, Adam moments and the
// trainer's flat gradient copy, and a fused norm's output; and what it takes from the model's shared
// workspace (models/nn/workspace.hpp): t and y forward, g_y beside g_t or the gathered g_out (which share) or
// g_agg backward, and the input gradient. Layer 0 computes no input gradient.
GemmDtype gemm_dtype_of(const ProblemSize& p) {
  return p.gemm_operand_bytes == 2 ? GemmDtype::Bf16 : GemmDtype::F32;
}

LayerFloats layer_floats(const ProblemSize& p, const Layout3D& layout, int l) {
  const GridShape& s = layout.shape();
  const AxisRoles r = roles_for_layer(l);
  const double ga = s.extent(r.a), gb = s.extent(r.b), gc = s.extent(r.c), k = p.terms;
  const double np = double(layout.padded_nodes()), rows_c = np / gc, rows_a = np / ga;
  const double in_b = double(layout.padded_dim(l)) / gb, out_full = double(layout.padded_dim(l + 1));
  const double out_local = out_full / ga;
  const bool cached = caches_input(p, l), first = runs_transform_first(p, layout, l);
  LayerFloats f;
  f.kept = rows_c * out_local + 5 * k * in_b * (first ? out_full : out_local);
  if (first) {
    const double t = k * rows_a * out_full, y = ga > 1 ? rows_c * out_full : 0.0;
    f.scratch = y + std::max(t, y);  // forward t + y; backward g_y + max(g_t, gathered = y's size)
  } else if (p.recompute && !cached && !reads_bf16_features(p, l)) {
    f.scratch = k * rows_c * in_b;  // agg in forward; agg again, then g_agg over it, in backward
  } else if (p.activation_bytes == 2 && !cached) {
    f.kept += 0.5 * k * rows_c * in_b;  // agg as bf16 bits
    f.scratch = k * rows_c * in_b;      // agg's fp32 sums in forward; agg widened, then g_agg over it
  } else {
    f.kept += k * rows_c * in_b;
    if (l > 0) f.scratch = k * rows_c * in_b;  // g_agg
  }
  if (l > 0) f.input_grad = rows_a * in_b;
  // The weight gradient reduces over the rows of agg (rows_c) or, transforming first, of h (rows_a).
  f.gemm_scratch_bytes = host_gemm_scratch_bytes(gemm_dtype_of(p), int64_t(in_b),
                                                 int64_t(first ? out_full : out_local),
                                                 int64_t(first ? rows_a : rows_c));
  // A: the input (h or agg) forward and for the weight gradient, the output-wide gradient for the input
  // gradient; B: the output-wide gradient of the weight gradient.
  const double rows = first ? rows_a : rows_c, out_wide = first ? out_full : out_local;
  f.gemm_a = rows * std::max(in_b, l > 0 ? out_wide : 0.0);
  f.gemm_b = rows * out_wide;
  if (p.norm && l + 1 < layout.layers()) f.kept += rows_c * out_local;
  if (k > 1) f.kept += 3.0 * rows_c;  // the self block (CsrSpmm of the identity) and its transpose
  return f;
}

// GatConv's buffers (models/nn/attention.hpp): kept from forward to backward z (rows_a x H F), the node terms
// (src, dst_in by rows_a; dst, row max, row sum by rows_c), the attention (edges x H, unless recomputed), the
// pre-activation and the output, the weights (value, gradient, Adam's two moments and the trainer's flat
// copy), the transpose positions (int64 per edge) and the self block; scratch forward y (rows_c x H F) and
// backward [g_y, row terms], g_score (edges x H) and [g_z, g_src, g_dst] or the gathered output.
LayerFloats attention_floats(const ProblemSize& p, const Layout3D& layout, int l) {
  const GridShape& s = layout.shape();
  const AxisRoles r = roles_for_layer(l);
  const double ga = s.extent(r.a), gb = s.extent(r.b), gc = s.extent(r.c);
  const double np = double(layout.padded_nodes()), rows_c = np / gc, rows_a = np / ga;
  const bool last = l + 1 == layout.layers();
  const double heads = double(last ? p.output_heads : p.heads);
  const double zw = last ? heads * double(layout.dim(l + 1)) : double(layout.dim(l + 1));
  const double in_b = double(layout.padded_dim(l)) / gb, out_local = double(layout.padded_dim(l + 1)) / ga;
  const double edges = double(p.nnz) / (ga * gc) * heads;  // this rank's block, every head
  LayerFloats f;
  f.kept = rows_a * zw + 2 * rows_a * heads + 3 * rows_c * heads + (p.recompute ? 0.0 : edges) +
           2 * rows_c * out_local + 5 * (in_b * zw + 2 * zw) + 2 * double(p.nnz) / (ga * gc) + 3.0 * rows_c;
  const double forward = rows_c * zw + (p.recompute ? edges : 0.0);
  const double backward = rows_c * (zw + 2 * heads) + (p.recompute ? edges : 0.0) + edges +
                          std::max(rows_a * (zw + 2 * heads), 2 * rows_c * out_local * ga);
  f.scratch = std::max(forward, backward);
  if (l > 0) f.input_grad = rows_a * in_b;
  f.gemm_scratch_bytes =
      host_gemm_scratch_bytes(gemm_dtype_of(p), int64_t(in_b), int64_t(zw), int64_t(rows_a));
  f.gemm_a = rows_a * std::max(in_b, l > 0 ? zw : 0.0);  // h (z = h W, its weight gradient), g_z (g_h)
  f.gemm_b = rows_a * zw;                                // g_z
  if (p.norm && !last) f.kept += rows_c * out_local;
  return f;
}

}  // namespace

MemoryEstimate predict_memory(const ProblemSize& p, const GridShape& s, const MachineProfile& m) {
  const Layout3D layout(s, p.nodes, p.dims, PermuteMode::None, 0);
  const double ranks = double(s.x) * s.y * s.z, np = double(layout.padded_nodes());
  const double rows_read = double(p.nodes) / ranks;
  const double edges = double(p.edges >= 0 ? p.edges : p.nnz - p.nodes);
  MemoryEstimate e;
  e.process = m.process_bytes;
  const RowsBytes rows = read_rows_bytes(p, rows_read, edges / ranks);
  const double degrees = 8 * rows_read;  // this rank's rows' (the blocks' are in layout_bytes)
  double kept = 0, peak = rows.all() + labels_exchange_bytes(p, layout, rows_read), largest_send = 0;
  for (int t = 0; t < std::min(layout.layers(), 6); ++t) {
    const LayoutShare share = layout_share(p, s, t);
    if (share == LayoutShare::Identical) continue;  // a view of an earlier layout's block
    const LayoutBytes b = layout_bytes(layout, t, double(p.nnz), double(p.exchange_budget));
    largest_send = std::max(largest_send, b.sent);
    peak = std::max(peak, rows.all() + degrees + kept + b.exchange);
    kept += share == LayoutShare::Transposed       ? 0.0
            : share == LayoutShare::SelfTransposed ? b.kept - b.matrix
                                                   : b.kept;
  }
  peak = std::max(peak, rows.labels + degrees + kept +
                            features_exchange_bytes(layout, rows_read, rows.features, double(p.nodes),
                                                    double(p.exchange_budget), double(p.feature_bytes)));
  // Kept after the load besides the blocks: the feature block (fp32 or bf16), its row ids, and each
  // layout's output row ids, labels, three split masks and a multi-label graph's task rows.
  kept += double(p.feature_bytes) * np / s.x * double(layout.padded_dim(0)) / s.y + 8 * np / s.x;
  for (int t = 0; t < layout.num_adjacency_layouts(); ++t)
    kept += (19 + double(p.tasks)) * np / s.extent(roles_for_layer(t).c);
  // MPI's own buffers grow with the messages it has moved, up to what the machine profile measured, and
  // with the peers whose shared-memory segments a rank maps.
  if (ranks > 1) e.process += std::min(m.mpi_bytes, largest_send) + m.peer_bytes * std::min(ranks - 1, 64.0);
  e.load_peak = e.process + (1 + kHeapSlack) * peak;
  e.graph = (1 + kHeapSlack) * kept;
  // The input dropout's copy of the feature block (fp32, bf16 features widened; a GAT's widened bf16
  // features, which its input dropout masks in place), the layers and their shared workspace.
  const bool feature_copy = p.input_dropout || widened_bf16_features(p);
  double training = feature_copy ? 4 * np / s.x * double(layout.padded_dim(0)) / s.y : 0.0;
  double scratch = 0, input_grad = 0, gemm_scratch = 0, gemm_a = 0, gemm_b = 0;
  for (int l = 0; l < layout.layers(); ++l) {
    const LayerFloats f = p.heads > 0 ? attention_floats(p, layout, l) : layer_floats(p, layout, l);
    training += 4 * f.kept;
    scratch = std::max(scratch, 4 * f.scratch);
    input_grad = std::max(input_grad, 4 * f.input_grad);
    gemm_scratch = std::max(gemm_scratch, f.gemm_scratch_bytes);
    gemm_a = std::max(gemm_a, f.gemm_a);
    gemm_b = std::max(gemm_b, f.gemm_b);
  }
  // The logits' gradient is written into the input-gradient buffer (Sequential::logits_gradient_buffer).
  const int last = layout.layers() - 1;
  input_grad =
      std::max(input_grad, 4 * np / s.extent(roles_for_layer(last).c) * double(layout.padded_dim(last + 1)) /
                               s.extent(roles_for_layer(last).a));
  training += scratch + input_grad;
  // A multi-label graph's ranked metrics (ROC-AUC, average precision) gather every evaluated entry of the
  // rank's task columns, 5 bytes each, as they rank them: counted for a split of every node (a split is
  // at most that), twice where the logits' rows are spread over ranks (the entries as gathered and as
  // joined per task).
  if (p.tasks > 0) {
    const double copies = s.extent(roles_for_layer(last).c) > 1 ? 2 : 1;
    training += 5 * copies * double(p.nodes) * double(layout.padded_dim(last + 1)) /
                s.extent(roles_for_layer(last).a);
  }
  // A link step: every rank holds the gathered rows (as received and placed, 4 bytes per local column each)
  // and their gradient (8), and per pair its two ids (16), score (8) and its own float copies for ranking.
  if (p.link_pairs > 0) {
    const double cols = double(layout.padded_dim(last + 1)) / s.extent(roles_for_layer(last).a);
    training += link_rows(p) * (16 * cols + 8) + 40 * double(p.link_pairs);
  }
  // The GEMM library's own memory, from the first GEMM on.
  training +=
      host_gemm_resident_bytes() + gemm_scratch +
      host_gemm_bf16_copy_bytes(gemm_dtype_of(p), int64_t(gemm_a), int64_t(gemm_b));
  e.training = (1 + kHeapSlack) * training;
  e.peak = std::max(e.load_peak, e.process + e.graph + e.training);
  return e;
}

}  // namespace tessera
