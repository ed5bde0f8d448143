// SPDX-License-Identifier: BSD-3-Clause
// The mini-batch cut with kernels on the execution space. What it must reproduce is MinibatchBuilder's
// host cut (induced.cpp): rows and columns in increasing position, entries in the static row's order, the
// off-diagonal weights times 1 / p, the transpose's columns increasing. The transpose is cut from a
// transposed copy of the static block rather than transposed per step: a device transpose keeps its rows'
// columns in order only by sorting, and cutting a sorted static transpose gives the host's order for free
// (a weight formed from the scales is the same product either way round).
#include <algorithm>
#include <optional>
#include <utility>

#include "tessera/comm/process_grid.hpp"
#include "tessera/core/csr.hpp"
#include "tessera/core/error.hpp"
#include "tessera/models/modes/minibatch.hpp"

namespace tessera {

// A named namespace, not the anonymous one: DeviceMinibatchBuilder's Layer and Scratch, which the header
// declares, hold these.
namespace device_cut {

// A static block as the cut reads it: values, or scales (empty: ones) where it has none.
struct StaticBlock {
  Vector<const int64_t> row_ptr;
  Vector<const SpmmColumn> col_idx;
  Vector<const float> values;
  Vector<const double> row_scale, col_scale;
};

// What one side of a layer's cut reads: the block whose rows it keeps, each static row's own column (the
// column of the same vertex, or -1) and the picked rows; the kept columns come from the other side.
struct CutSide {
  StaticBlock block;
  Vector<int64_t> own;     // per static row
  Vector<int64_t> vertex;  // per position of the block's rows in the sample's reach
  Vector<int64_t> pick;    // the sampled rows' local indices (the first `count`)
  Vector<int64_t> slot;    // per static row: its index among the sampled rows, or -1
  int64_t count = 0;
};

// Scratch of the entry-parallel cut, kept between steps and grown as needed (3 words per entry the sampled
// rows hold in the static block).
struct CutScratch {
  Vector<int64_t> span;    // per sampled row: where its static entries start when laid end to end
  Vector<int64_t> row;     // per laid-out entry: its cut row
  Vector<int64_t> slot;    // per laid-out entry: its kept column, or -1
  Vector<int64_t> before;  // per laid-out entry and one past: kept entries before it
};

}  // namespace device_cut

namespace {

using device_cut::CutScratch;
using device_cut::CutSide;
using device_cut::StaticBlock;

using Policy = Kokkos::RangePolicy<ExecSpace>;
using Cut = CsrMatrix<float, DeviceSpace, SpmmColumn>;

void mark_sample(const Vector<uint32_t>& mark, const RandomPermutation& perm, int64_t count,
                 uint32_t generation) {
  Kokkos::parallel_for(
      "tessera::mark_sample", Policy(0, count), KOKKOS_LAMBDA(int64_t i) { mark(perm(i)) = generation; });
}

// The positions whose vertex is marked, in increasing order: pick(0..count) = their local indices and
// slot(i) = i's rank among them (or -1). Returns count.
int64_t pick_marked(const CutSide& side, const Vector<const uint32_t>& mark, uint32_t generation) {
  const Vector<const int64_t> vertex = side.vertex;
  const Vector<int64_t> pick = side.pick, slot = side.slot;
  int64_t count = 0;
  Kokkos::parallel_scan(
      "tessera::pick_sampled", Policy(0, int64_t(vertex.extent(0))),
      KOKKOS_LAMBDA(int64_t i, int64_t & prefix, bool final) {
        const bool in = mark(vertex(i)) == generation;
        if (final) {
          slot(i) = in ? prefix : -1;
          if (in) pick(prefix) = i;
        }
        prefix += in ? 1 : 0;
      },
      count);
  return count;
}

// The cut's entries are found entry by entry, not row by row: a static row may hold thousands of entries
// (an R-MAT hub: 6218 on the arxiv-shaped graph), which one thread or one warp would walk while the rest of
// the device waited. The sampled rows' static entries are laid end to end, each finds its row by binary
// search, and a scan over the kept flags gives every kept entry its place, in the host cut's order.
// Entry (r, s) weighs the static weight, times `scale` unless s is row r's own column.
Cut cut_block(const CutSide& side, const CutSide& cols, float scale, CutScratch& scratch, StepUploads& into) {
  const StaticBlock a = side.block;
  const Vector<const int64_t> pick = side.pick, own = side.own, col_slot = cols.slot;
  const int64_t rows = side.count;
  reserve_vector(scratch.span, rows + 1, "sample_cut_span");
  const Vector<int64_t> span = scratch.span;
  const int64_t laid = prefix_offsets(
      rows, KOKKOS_LAMBDA(int64_t r) { return a.row_ptr(pick(r) + 1) - a.row_ptr(pick(r)); }, span,
      "tessera::cut_span");
  reserve_vector(scratch.row, laid, "sample_cut_row");
  reserve_vector(scratch.slot, laid, "sample_cut_slot");
  reserve_vector(scratch.before, laid + 1, "sample_cut_before");
  const Vector<int64_t> entry_row = scratch.row, entry_slot = scratch.slot, before = scratch.before;
  Kokkos::parallel_for(
      "tessera::cut_entries", Policy(0, laid), KOKKOS_LAMBDA(int64_t e) {
        const int64_t lo = row_of_entry(span, rows, e);
        entry_row(e) = lo;
        entry_slot(e) = col_slot(a.col_idx(a.row_ptr(pick(lo)) + e - span(lo)));
      });
  const int64_t nnz = prefix_offsets(
      laid, KOKKOS_LAMBDA(int64_t e) { return entry_slot(e) >= 0 ? int64_t(1) : int64_t(0); }, before,
      "tessera::cut_places");
  Cut out;
  out.num_rows = rows;
  out.num_cols = cols.count;
  out.row_ptr = into.offsets(size_t(rows + 1));
  out.col_idx = into.columns(size_t(nnz));
  out.values = into.values(size_t(nnz));
  const Vector<int64_t> out_ptr = out.row_ptr;
  const Vector<SpmmColumn> out_col = out.col_idx;
  const Vector<float> out_value = out.values;
  Kokkos::parallel_for(
      "tessera::cut_offsets", Policy(0, rows + 1),
      KOKKOS_LAMBDA(int64_t r) { out_ptr(r) = before(span(r)); });
  const bool valued = a.values.extent(0) > 0, row_scaled = a.row_scale.extent(0) > 0;
  const bool col_scaled = a.col_scale.extent(0) > 0;
  Kokkos::parallel_for(
      "tessera::cut_block", Policy(0, laid), KOKKOS_LAMBDA(int64_t e) {
        const int64_t s = entry_slot(e);
        if (s < 0) return;
        const int64_t r = entry_row(e), i = pick(r), k = a.row_ptr(i) + e - span(r);
        const int64_t own_slot = own(i) >= 0 ? col_slot(own(i)) : -1;
        const double row_scale = valued || !row_scaled ? 1.0 : a.row_scale(i);
        const float w = valued
                            ? a.values(k)
                            : scaled_weight<float>(row_scale, col_scaled ? a.col_scale(a.col_idx(k)) : 1.0);
        out_col(before(e)) = SpmmColumn(s);
        out_value(before(e)) = s == own_slot ? w : w * scale;
      });
  return out;
}

// The self block of the cut (a pattern): row r's one entry at its own vertex's kept column, if kept.
Cut cut_self(const CutSide& side, const CutSide& cols, StepUploads& into) {
  const Vector<const int64_t> pick = side.pick, own = side.own, col_slot = cols.slot;
  Cut out;
  out.num_rows = side.count;
  out.num_cols = cols.count;
  out.row_ptr = into.offsets(size_t(side.count + 1));
  const Vector<int64_t> out_ptr = out.row_ptr;
  const int64_t nnz = prefix_offsets(
      side.count,
      KOKKOS_LAMBDA(int64_t r) {
        const int64_t o = own(pick(r));
        return o >= 0 && col_slot(o) >= 0 ? int64_t(1) : int64_t(0);
      },
      out_ptr, "tessera::self_offsets");
  out.col_idx = into.columns(size_t(nnz));
  const Vector<SpmmColumn> out_col = out.col_idx;
  Kokkos::parallel_for(
      "tessera::cut_self", Policy(0, side.count), KOKKOS_LAMBDA(int64_t r) {
        const int64_t o = own(pick(r));
        if (o >= 0 && col_slot(o) >= 0) out_col(out_ptr(r)) = SpmmColumn(col_slot(o));
      });
  return out;
}

// A cut block and, where a backward reads it (BatchNeeds::transposes), its transpose.
std::unique_ptr<AdjacencyBlock> block_of(Cut forward, std::optional<Cut> transposed, StepUploads& into) {
  auto block = std::make_unique<AdjacencyBlock>();
  block->nnz = forward.nnz();
  block->forward = into.spmm(std::move(forward));
  block->has_transpose = transposed.has_value();
  if (transposed) block->transpose = into.spmm(std::move(*transposed));
  return block;
}

// The picked rows' entries of a vector indexed by static row, into `out` (side.count entries).
template <class T>
Vector<T> gather_picked(const Vector<const T>& v, const CutSide& side, const char* name,
                        const Vector<T>& out) {
  const Vector<const int64_t> pick = side.pick;
  Kokkos::parallel_for(
      name, Policy(0, side.count), KOKKOS_LAMBDA(int64_t r) { out(r) = v(pick(r)); });
  return out;
}

// Rows side.pick of the features (floats or bf16 bits) as floats, into a block of `into`.
template <class T>
Matrix<float> gather_feature_rows(const Matrix<const T>& features, const CutSide& side, StepUploads& into) {
  const Matrix<float> out = into.rows(side.count, int64_t(features.extent(1)));
  const Vector<const int64_t> pick = side.pick;
  const int64_t width = int64_t(features.extent(1));
  Kokkos::parallel_for(
      "tessera::gather_features", Policy(0, side.count * width), KOKKOS_LAMBDA(int64_t e) {
        const int64_t r = e / width, j = e % width;
        out(r, j) = widened(features(pick(r), j));
      });
  return out;
}

}  // namespace

// A layer's two sides: its rows (output positions, the forward block) and its columns (input positions,
// the transposed block).
struct DeviceMinibatchBuilder::Layer {
  CutSide rows, cols;
};

struct DeviceMinibatchBuilder::Scratch {
  CutScratch cut;
};

namespace {

// The static block's own columns and positions' vertices for one side: `order` numbers the side's
// positions [begin, end), `other` the other side's [other_begin, other_end). Positions from n on are
// padding, which no sample reaches.
void index_side(CutSide& side, int64_t static_rows, const RandomPermutation& order,
                std::pair<int64_t, int64_t> range, const RandomPermutation& other,
                std::pair<int64_t, int64_t> other_range) {
  const int64_t reach = std::max<int64_t>(0, std::min(range.second, order.size()) - range.first);
  std::vector<int64_t> vertex(static_cast<size_t>(reach)), own(size_t(std::max(static_rows, reach)), -1);
  for (int64_t i = 0; i < reach; ++i) {
    vertex[size_t(i)] = order(range.first + i);
    const int64_t q = other.inverse(vertex[size_t(i)]);
    if (q >= other_range.first && q < other_range.second) own[size_t(i)] = q - other_range.first;
  }
  side.vertex = upload_vector(vertex, "sample_block_vertex");
  side.own = upload_vector(own, "sample_block_own");
  side.pick = Vector<int64_t>("sample_pick", size_t(reach));
  side.slot = Vector<int64_t>("sample_slot", own.size());
  Kokkos::deep_copy(side.slot, int64_t(-1));
}

// The forward block as stored, and where `with_transpose` its transpose made on the host (columns sorted;
// values moved, scales swapped), both on the device; without, an empty block no cut reads.
std::pair<StaticBlock, StaticBlock> static_blocks(const CsrSpmm<float>& block, bool with_transpose) {
  const auto& a = block.matrix();
  require(!a.is_pattern() || block.scaled(), "mini-batch sampling needs a weighted adjacency block");
  StaticBlock forward{a.row_ptr, a.col_idx, a.values, block.row_scale(), block.col_scale()};
  if (!with_transpose) return {forward, StaticBlock{}};
  CsrMatrix<float, HostSpace, SpmmColumn> host;
  host.num_rows = a.num_rows;
  host.num_cols = a.num_cols;
  host.row_ptr = Kokkos::create_mirror_view_and_copy(HostSpace(), a.row_ptr);
  host.col_idx = Kokkos::create_mirror_view_and_copy(HostSpace(), a.col_idx);
  host.values = Kokkos::create_mirror_view_and_copy(HostSpace(), a.values);
  const auto t = csr_to_space<float, DeviceSpace>(csr_transpose(host));
  StaticBlock transposed{t.row_ptr, t.col_idx, t.values, block.col_scale(), block.row_scale()};
  return {forward, transposed};
}

}  // namespace

DeviceMinibatchBuilder::DeviceMinibatchBuilder(const ProcessGrid& grid, const Graph3D& graph,
                                               int64_t batch_size, const BatchNeeds& needs)
    : graph_(graph), batch_size_(batch_size), needs_(needs) {
  const NodeLayout& layout = graph.layout;
  (void)graph.node_data_for(needs.layers);  // throws where the graph does not serve the depth
  const int64_t n = layout.num_nodes();
  scale_ = off_diagonal_scale(n, batch_size);
  // A layout's transposed copy is kept where a layer cut from it has its transpose read.
  std::vector<bool> transposed(6, false);
  for (int l = 0; l < needs.layers; ++l)
    transposed[size_t(l % 6)] = transposed[size_t(l % 6)] || needs.transposed(l);
  std::vector<std::pair<StaticBlock, StaticBlock>> blocks;  // by layout l mod 6
  for (int l = 0; l < needs.layers && l < 6; ++l)
    blocks.push_back(static_blocks(graph.adjacency[size_t(l)].forward, transposed[size_t(l)]));
  for (int l = 0; l < needs.layers; ++l) {
    const AxisRoles r = roles_for_layer(l);
    const auto row_range = layout.node_block(r.c, grid.coords().get(r.c));
    const auto col_range = layout.node_block(r.a, grid.coords().get(r.a));
    Layer layer;
    std::tie(layer.rows.block, layer.cols.block) = blocks[size_t(l % 6)];
    const auto& a = graph.adjacency[size_t(l % 6)].forward.matrix();
    index_side(layer.rows, a.num_rows, layout.row_order(l), row_range, layout.col_order(l), col_range);
    index_side(layer.cols, a.num_cols, layout.col_order(l), col_range, layout.row_order(l), row_range);
    layers_.push_back(std::move(layer));
  }
  mark_ = Vector<uint32_t>("sample_marks", size_t(n));
  scratch_ = std::make_unique<Scratch>();
}

DeviceMinibatchBuilder::~DeviceMinibatchBuilder() = default;

int64_t DeviceMinibatchBuilder::bytes() const {
  int64_t total = int64_t(mark_.span() * sizeof(uint32_t));
  for (const Layer& layer : layers_)
    for (const CutSide* side : {&layer.rows, &layer.cols})
      total += int64_t((side->own.span() + side->vertex.span() + side->pick.span() + side->slot.span()) *
                       sizeof(int64_t));
  const CutScratch& cut = scratch_->cut;
  for (const Vector<int64_t>* v : {&cut.span, &cut.row, &cut.slot, &cut.before})
    total += int64_t(v->span() * sizeof(int64_t));
  total += step_buffers_.bytes();
  // The transposes (the forward blocks are the graph's).
  for (size_t l = 0; l < layers_.size() && l < 6; ++l) {
    const StaticBlock& t = layers_[l].cols.block;
    total += int64_t(t.row_ptr.span() * 8 + t.col_idx.span() * sizeof(SpmmColumn) + t.values.span() * 4);
  }
  return total;
}

DeviceBatch DeviceMinibatchBuilder::build(const SampleKey& key) {
  if (++generation_ == 0) {  // the marks' counter wrapped: start them over
    Kokkos::deep_copy(mark_, uint32_t(0));
    generation_ = 1;
  }
  mark_sample(mark_, sample_permutation(graph_.layout.num_nodes(), key), batch_size_, generation_);
  StepUploads& into = step_buffers_;
  into.restart();
  DeviceBatch d;
  for (size_t l = 0; l < layers_.size(); ++l) {
    Layer& layer = layers_[l];
    layer.rows.count = pick_marked(layer.rows, mark_, generation_);
    layer.cols.count = pick_marked(layer.cols, mark_, generation_);
    const bool transposed = needs_.transposed(int(l));
    d.graph.blocks.push_back(
        block_of(cut_block(layer.rows, layer.cols, scale_, scratch_->cut, into),
                 transposed ? std::optional(cut_block(layer.cols, layer.rows, scale_, scratch_->cut, into))
                            : std::nullopt,
                 into));
    const AdjacencyBlock* adjacency = d.graph.blocks.back().get();
    const AdjacencyBlock* self = nullptr;
    if (needs_.self_blocks) {
      d.graph.blocks.push_back(
          block_of(cut_self(layer.rows, layer.cols, into),
                   transposed ? std::optional(cut_self(layer.cols, layer.rows, into)) : std::nullopt, into));
      self = d.graph.blocks.back().get();
    }
    d.graph.layers.push_back(
        LayerGraph{adjacency, self,
                   gather_picked<int64_t>(layer.rows.vertex, layer.rows, "sample_output_ids",
                                          into.ids(size_t(layer.rows.count))),
                   layer.rows.count, batch_size_, false});
  }
  const CutSide& inputs = layers_.front().cols;
  d.input = graph_.feature_dtype == StorageDtype::Bf16
                ? gather_feature_rows(Matrix<const uint16_t>(graph_.features_bf16), inputs, into)
                : gather_feature_rows(Matrix<const float>(graph_.features), inputs, into);
  d.input_ids =
      gather_picked<int64_t>(inputs.vertex, inputs, "sample_input_ids", into.ids(size_t(inputs.count)));
  d.graph.input = LayerGraph{nullptr, nullptr, d.input_ids, inputs.count, batch_size_, false};
  d.graph.scratch_input = d.input.data();  // gathered for this step only
  const CutSide& outputs = layers_.back().rows;
  const NodeData& data = graph_.node_data_for(needs_.layers);
  d.labels =
      gather_picked<int64_t>(data.labels, outputs, "sample_labels", into.labels(size_t(outputs.count)));
  d.train =
      gather_picked<uint8_t>(data.mask("train"), outputs, "sample_train", into.mask(size_t(outputs.count)));
  if (data.targets.extent(1) > 0) {
    d.targets = into.task_rows(outputs.count, int64_t(data.targets.extent(1)));
    gather_task_rows(data.targets, outputs.pick, d.targets);
  }
  Kokkos::fence();
  return d;
}

}  // namespace tessera
