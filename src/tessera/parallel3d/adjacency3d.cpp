// SPDX-License-Identifier: BSD-3-Clause
// build_graph_3d's adjacency phase: one layout's block of the normalized adjacency and its transpose.
// The G_b ranks that hold copies of a block share its construction: each receives the nonzeros of 1/G_b of
// the block's rows and 1/G_b of its transpose's rows, builds those two row ranges, and an all-gather over
// the b axis assembles both matrices on every copy. Before, every copy received every nonzero and built
// both whole matrices itself: G_b times the sorting and scattering (the load's largest cost), and G_b
// copies of each nonzero sent where now at most two travel. Weights are computed where the block is built,
// from the degrees of its rows' and columns' nodes, asked of the ranks that read those rows: no rank holds
// every node's degree, and an entry travels as two int32 (its row and column) instead of three. A rank's
// entries leave in rounds of its rows (RowRounds) within a byte budget, so what it sends is bounded
// however many edges it read; a builder keeps what each round brings until it builds.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "graph3d_impl.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"

namespace tessera::impl {

namespace {

// Row ranges of `parts` pieces of n rows, as even as integers allow: piece j is [begin(j), begin(j + 1)).
int64_t part_begin(int64_t n, int parts, int j) {
  return n * j / parts;
}

// One nonzero as a builder receives it: row and column inside the rows it builds.
constexpr int64_t kEntryWords = 2;

// A block's pattern on the host as CsrSpmm keeps it.
using BlockCsr = CsrMatrix<float, HostSpace, SpmmColumn>;

// Entries a builder received, one chunk per round of the exchange (RowRounds), kept until the block is
// built: a round's buffers are freed as it ends, and no chunk is copied into a larger one.
struct ReceivedEntries {
  std::vector<PageBuffer<int32_t>> chunks;
  std::vector<int64_t> counts;  // entries per chunk

  template <class Visit>
  void for_each(const Visit& visit) const {
    for (size_t c = 0; c < chunks.size(); ++c)
      for (int64_t k = 0; k < counts[c]; ++k) visit(chunks[c].data() + kEntryWords * k);
  }
};

// The pattern CSR of `rows` rows from their entries, columns sorted within a row: a counting pass places
// every entry in its row (O(nnz + rows), no permutation array), then each row's columns are sorted in
// place. This replaced one comparison sort of a permutation of all nonzeros, which took 28 s of a 37 s
// load on the grid 8x1x1 of a 2^18-node graph. The weights are not stored: they are the degrees' scales.
// The entries are freed once placed. Column ids are SpmmColumn from the start (int32 on host builds), so no
// 64-bit copy of a block is ever held.
BlockCsr csr_from_entries(ReceivedEntries&& entries, int64_t rows, int64_t cols) {
  BlockCsr a;
  a.num_rows = rows;
  a.num_cols = cols;
  a.row_ptr = HostVector<int64_t>("row_ptr", size_t(rows + 1));
  int64_t count = 0;
  for (const int64_t c : entries.counts) count += c;
  a.col_idx = HostVector<SpmmColumn>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), size_t(count));
  entries.for_each([&](const int32_t* e) { ++a.row_ptr(e[0] + 1); });
  for (int64_t row = 0; row < rows; ++row) a.row_ptr(row + 1) += a.row_ptr(row);
  std::vector<int64_t> next(a.row_ptr.data(), a.row_ptr.data() + rows);
  entries.for_each([&](const int32_t* e) { a.col_idx(next[size_t(e[0])]++) = e[1]; });
  entries = ReceivedEntries();
  for (int64_t row = 0; row < rows; ++row)
    std::sort(a.col_idx.data() + a.row_ptr(row), a.col_idx.data() + a.row_ptr(row + 1));
  return a;
}

// Calls emit(v, u) for every nonzero of this rank's rows [begin, end) of the normalized adjacency (their
// in-edges other than the row's own node, and for Symmetric one self loop, however often the file lists
// it: PyG's gcn_norm and GATConv do the same), in a fixed order.
template <class Emit>
void for_each_nonzero(const GraphRows& r, Normalization normalization, int64_t begin, int64_t end,
                      const Emit& emit) {
  for (int64_t i = begin; i < end; ++i) {
    const int64_t v = r.first_row + i;
    for (int64_t k = r.indptr[size_t(i)]; k < r.indptr[size_t(i + 1)]; ++k) {
      const int64_t u = r.indices[size_t(k)];
      if (normalization == Normalization::Sum || u != v) emit(v, u);
    }
    if (normalization == Normalization::Symmetric) emit(v, v);
  }
}

// Collective over the replica: the degree (RowDegrees) of each node in `ids`, asked of the rank that read
// its row; -1 (padding) gets 1. One request and one answer per id.
std::vector<int64_t> fetch_degrees(const Communicator& comm, const RowDegrees& degrees, int64_t first_row,
                                   const std::vector<int64_t>& ids) {
  const int p = comm.size();
  const std::vector<int64_t>& begins = degrees.row_begins;
  std::vector<int> owner(ids.size(), -1);
  std::vector<int64_t> counts(size_t(p), 0), at(size_t(p), 0);
  for (size_t k = 0; k < ids.size(); ++k)
    if (ids[k] >= 0) {
      owner[k] = int(std::upper_bound(begins.begin(), begins.end(), ids[k]) - begins.begin()) - 1;
      ++counts[size_t(owner[k])];
    }
  for (int q = 1; q < p; ++q) at[size_t(q)] = at[size_t(q - 1)] + counts[size_t(q - 1)];
  std::vector<int64_t> asked(size_t(at.back() + counts.back())), slot(ids.size(), -1);
  for (size_t k = 0; k < ids.size(); ++k)
    if (owner[k] >= 0) slot[k] = at[size_t(owner[k])]++, asked[size_t(slot[k])] = ids[k];
  const std::vector<int64_t> got_counts = exchange_counts(comm, counts, "load degrees");
  int64_t total = 0;
  for (const int64_t c : got_counts) total += c;
  std::vector<int64_t> questions(static_cast<size_t>(total));
  all_to_allv(comm, asked.data(), counts, questions.data(), got_counts, "load degrees");
  for (int64_t& q : questions) q = degrees.local[size_t(q - first_row)];  // the answer, in place
  all_to_allv(comm, questions.data(), got_counts, asked.data(), counts, "load degrees");
  std::vector<int64_t> out(ids.size(), 1);
  for (size_t k = 0; k < ids.size(); ++k)
    if (slot[k] >= 0) out[k] = asked[size_t(slot[k])];
  return out;
}

// Entries bound for the ranks of the replica, counted per rank and then written into one buffer of exactly
// that size (growing one bucket per rank copied and page-faulted every nonzero about three times).
struct EntryStream {
  std::vector<int64_t> counts, at;  // words per destination rank; next word to write for each
  PageBuffer<int32_t> words;

  explicit EntryStream(int p) : counts(size_t(p), 0), at(size_t(p), 0) {}
  void allocate() {
    for (size_t q = 1; q < counts.size(); ++q) at[q] = at[q - 1] + counts[q - 1];
    words = PageBuffer<int32_t>(size_t(at.back() + counts.back()));
  }
  void put(int rank, int32_t row, int32_t col) {
    int32_t* out = words.data() + at[size_t(rank)];
    out[0] = row, out[1] = col;
    at[size_t(rank)] += kEntryWords;
  }
};

// Collective over the replica: sends one round's stream, freeing it, and keeps what arrives.
void exchange_round(const Communicator& comm, EntryStream& stream, ReceivedEntries& received) {
  const std::vector<int64_t> recv_counts = exchange_counts(comm, stream.counts, "load adjacency");
  int64_t words = 0;
  for (const int64_t c : recv_counts) words += c;
  PageBuffer<int32_t> recv{size_t(words)};
  all_to_allv(comm, stream.words.data(), stream.counts, recv.data(), recv_counts, "load adjacency");
  stream.words.reset();
  received.chunks.push_back(std::move(recv));
  received.counts.push_back(words / kEntryWords);
}

// Collective over a block's copies (the b axis, ranked by coordinate): the whole pattern of `rows` rows on
// every copy, from copy j's rows [part_begin(j), part_begin(j + 1)) in `part` (whose offsets start at 0).
BlockCsr gather_row_parts(const Communicator& copies, const BlockCsr& part, int64_t rows, int64_t cols) {
  const int n = copies.size();
  std::vector<int64_t> nnz(static_cast<size_t>(n)), row_counts(static_cast<size_t>(n));
  const int64_t mine = part.nnz();
  all_gather(copies, &mine, 1, nnz.data(), "load adjacency");
  int64_t total = 0;
  for (int j = 0; j < n; ++j) {
    row_counts[size_t(j)] = part_begin(rows, n, j + 1) - part_begin(rows, n, j);
    total += nnz[size_t(j)];
  }
  BlockCsr a;
  a.num_rows = rows;
  a.num_cols = cols;
  a.row_ptr = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("row_ptr"), size_t(rows + 1));
  a.col_idx = HostVector<SpmmColumn>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), size_t(total));
  a.row_ptr(0) = 0;
  all_gather_v(copies, part.row_ptr.data() + 1, row_counts, a.row_ptr.data() + 1, "load adjacency");
  all_gather_v(copies, part.col_idx.data(), nnz, a.col_idx.data(), "load adjacency");
  int64_t before = 0;  // each part's offsets count from its own first nonzero
  for (int j = 0; j < n; ++j) {
    for (int64_t r = part_begin(rows, n, j); r < part_begin(rows, n, j + 1); ++r) a.row_ptr(r + 1) += before;
    before += nnz[size_t(j)];
  }
  return a;
}

// Where layout t's nonzeros go: each one's block (c, a), that block's G_b copies, and the piece of the
// block's rows and of its transpose's rows that each copy builds.
struct BlockRouting {
  int ga = 1, gb = 1;
  int64_t row_block = 0, col_block = 0;
  std::vector<int> block_ranks;               // the copies of block (c, a) by b coordinate, at (c ga + a) gb
  std::vector<int64_t> row_parts, col_parts;  // copy k builds rows [parts[k], parts[k + 1])

  BlockRouting(const ProcessGrid& grid, const NodeLayout& layout, int t) {
    const Communicator& comm = grid.replica();
    const GridShape& shape = grid.shape();
    const GridCoords mine = grid.coords();
    const AxisRoles roles = roles_for_layer(t);
    const int gc = shape.extent(roles.c);
    ga = shape.extent(roles.a), gb = shape.extent(roles.b);
    row_block = layout.padded_nodes() / gc, col_block = layout.padded_nodes() / ga;
    comm.check(row_block < (int64_t(1) << 31) && col_block < (int64_t(1) << 31),
               "grid " + shape.str() + ": an adjacency block of " + std::to_string(row_block) + " x " +
                   std::to_string(col_block) + " has 2^31 rows or columns or more; use more ranks");
    block_ranks.resize(size_t(gc) * ga * gb);
    for (int c = 0; c < gc; ++c)
      for (int a = 0; a < ga; ++a)
        for (int b = 0; b < gb; ++b)
          block_ranks[(size_t(c) * ga + a) * gb + b] =
              grid.rank_of(mine.with(roles.c, c).with(roles.a, a).with(roles.b, b)) % comm.size();
    for (int k = 0; k <= gb; ++k) {
      row_parts.push_back(part_begin(row_block, gb, k));
      col_parts.push_back(part_begin(col_block, gb, k));
    }
  }
  // One copy builds everything when there is one; otherwise the transpose's rows travel separately.
  bool shared() const { return gb > 1; }
  static int piece(const std::vector<int64_t>& parts, int64_t i) {
    int k = 0;
    while (i >= parts[size_t(k) + 1]) ++k;
    return k;
  }
};

// Two passes over this rank's rows [begin, end) (one round): the first counts the entries bound for each
// rank, the second writes them into streams of exactly that size. The first evaluates each column's
// permutation once and keeps its block and position for the second: 8 bytes per nonzero of the round for
// a while instead of a second evaluation each. The transpose's entries travel in a stream of their own
// when `transposed` (several copies build a block).
void write_entries(const GraphRows& r, Normalization normalization, const NodeLayout& layout, int t,
                   const BlockRouting& route, bool transposed, int64_t begin, int64_t end, Progress& progress,
                   EntryStream& forward, EntryStream& transpose) {
  const RandomPermutation &row_order = layout.row_order(t), &col_order = layout.col_order(t);
  // At most one entry per edge and one self loop per row.
  PageBuffer<uint64_t> columns(
      end > begin ? size_t(r.indptr[size_t(end)] - r.indptr[size_t(begin)] + (end - begin)) : 0);
  size_t written = 0;
  auto visit = [&](bool write, const auto& deliver) {
    int64_t last_v = -1, i = 0, i_part = 0, rows_seen = 0;
    const int* ranks_c = nullptr;
    int fb = 0;
    size_t k = 0;
    for_each_nonzero(r, normalization, begin, end, [&](int64_t v, int64_t u) {
      if (v != last_v) {  // rows arrive in order
        if ((++rows_seen & 4095) == 0) progress.advance(4096);
        const int64_t row = row_order.inverse(v);
        const int c = int(row / route.row_block);
        i = row - c * route.row_block, last_v = v;
        fb = route.piece(route.row_parts, i);
        i_part = i - route.row_parts[size_t(fb)];
        ranks_c = &route.block_ranks[size_t(c) * route.ga * route.gb];
      }
      uint64_t packed;
      if (write) {
        packed = columns[k++];
      } else {
        const int64_t col = col_order.inverse(u), a = col / route.col_block;
        packed = uint64_t(a) << 32 | uint64_t(col - a * route.col_block);
        columns[written++] = packed;
      }
      const int64_t a = int64_t(packed >> 32), j = int64_t(packed & 0xffffffffu);
      const int* ranks = ranks_c + a * route.gb;
      deliver(forward, ranks[fb], int32_t(i_part), int32_t(j));
      if (!transposed) return;
      const int tb = route.piece(route.col_parts, j);
      deliver(transpose, ranks[tb], int32_t(j - route.col_parts[size_t(tb)]), int32_t(i));
    });
    progress.advance((end - begin) - (rows_seen & ~int64_t(4095)));  // rows without entries count too
  };
  visit(false, [](EntryStream& s, int rank, int32_t, int32_t) { s.counts[size_t(rank)] += kEntryWords; });
  forward.allocate();
  if (transposed) transpose.allocate();
  visit(true, [](EntryStream& s, int rank, int32_t i, int32_t j) { s.put(rank, i, j); });
}

// Collective over the replica: every round of this rank's entries of layout t sent (RowRounds: about
// `budget` bytes of entries and the first pass's columns at a time), and what this rank's pieces of the
// block and of its transpose (`transposed`) receive.
int send_entries(const GraphRows& r, Normalization normalization, const ProcessGrid& grid,
                 const NodeLayout& layout, int t, const BlockRouting& route, bool transposed, int64_t budget,
                 ReceivedEntries& forward, ReceivedEntries& transpose) {
  const Communicator& comm = grid.replica();
  const double entry_bytes = 8.0 * (transposed ? 3 : 2);  // the column kept, and two int32 per stream
  const RowRounds rounds(comm, r.rows(), budget, [&](int64_t i) {
    return entry_bytes * double(r.indptr[size_t(i + 1)] - r.indptr[size_t(i)] + 1);
  });
  // The two passes are most of a large load's time: rank 0 reports them.
  Progress progress("load: adjacency " + std::to_string(t) + ", rank 0's rows (two passes)", 2 * r.rows());
  for (int k = 0; k < rounds.count(); ++k) {
    EntryStream forward_out(comm.size()), transpose_out(comm.size());
    write_entries(r, normalization, layout, t, route, transposed, rounds.begin(k), rounds.end(k), progress,
                  forward_out, transpose_out);
    exchange_round(comm, forward_out, forward);
    if (transposed) exchange_round(comm, transpose_out, transpose);
  }
  return rounds.count();
}

// A block's scales from its nodes' degrees: d^-1/2 (Symmetric) or 1/d (Mean), in double, so a weight
// float(scale_i * scale_j) is the one gcn_normalize forms.
Vector<double> degree_scales(const std::vector<int64_t>& degree, bool symmetric, const char* name) {
  const HostVector<double> host(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)),
                                degree.size());
  for (size_t i = 0; i < degree.size(); ++i)
    host(i) = degree_scale(symmetric ? Normalization::Symmetric : Normalization::Mean, double(degree[i]));
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), host);
}

// Node ids of `count` consecutive positions of a layout order from `first` (-1 past the graph's nodes).
std::vector<int64_t> ids_at(const RandomPermutation& order, int64_t first, int64_t count, int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) ids[size_t(i)] = first + i < n ? order(first + i) : -1;
  return ids;
}

// The two matrices of this copy's block of layout t from the entries it received: the block, assembled
// from the copies' row parts when there are several (collective over the b axis), and its transpose (empty
// unless `with_transpose`).
std::pair<BlockCsr, BlockCsr> build_block(const ProcessGrid& grid, const BlockRouting& route, int t,
                                          ReceivedEntries&& forward, ReceivedEntries&& transpose,
                                          bool with_transpose) {
  const AxisRoles roles = roles_for_layer(t);
  const int b = grid.coords().get(roles.b);
  const int64_t first_row = route.row_parts[size_t(b)], first_col = route.col_parts[size_t(b)];
  BlockCsr a =
      csr_from_entries(std::move(forward), route.row_parts[size_t(b) + 1] - first_row, route.col_block);
  BlockCsr at;
  if (!route.shared()) {
    if (with_transpose) at = csr_transpose(a);
    return {std::move(a), std::move(at)};
  }
  if (with_transpose)
    at = csr_from_entries(std::move(transpose), route.col_parts[size_t(b) + 1] - first_col, route.row_block);
  const Communicator& copies = grid.axis(roles.b);
  a = gather_row_parts(copies, a, route.row_block, route.col_block);
  if (with_transpose) at = gather_row_parts(copies, at, route.col_block, route.row_block);
  return {std::move(a), std::move(at)};
}

// Whether two operators multiply by the same matrix, compared array by array (ids, offsets, values, scales).
bool same_operator(const CsrSpmm<float>& a, const CsrSpmm<float>& b) {
  const auto equal = [](const auto& x, const auto& y) {
    if (x.extent(0) != y.extent(0)) return false;
    const auto hx = Kokkos::create_mirror_view_and_copy(HostSpace(), x);
    const auto hy = Kokkos::create_mirror_view_and_copy(HostSpace(), y);
    return std::equal(hx.data(), hx.data() + hx.extent(0), hy.data());
  };
  const auto &ma = a.matrix(), &mb = b.matrix();
  return ma.num_rows == mb.num_rows && ma.num_cols == mb.num_cols && equal(ma.row_ptr, mb.row_ptr) &&
         equal(ma.col_idx, mb.col_idx) && equal(ma.values, mb.values) &&
         equal(a.row_scale(), b.row_scale()) && equal(a.col_scale(), b.col_scale());
}

bool one_rank_replica(const NodeLayout& layout) {
  const GridShape& s = layout.shape();
  return s.x == 1 && s.y == 1 && s.z == 1;
}

}  // namespace

int identical_layout(const NodeLayout& layout, int t) {
  if (!one_rank_replica(layout)) return -1;
  for (int s = 0; s < t; ++s)
    if (layout.one_order() || s % 2 == t % 2) return s;
  return -1;
}

bool share_transposed(const NodeLayout& layout, int t, std::vector<AdjacencyBlock>& blocks) {
  if (!one_rank_replica(layout)) return false;
  AdjacencyBlock& mine = blocks[size_t(t)];
  for (int s = 0; s <= t; ++s) {
    if (!(layout.one_order() || s % 2 != t % 2)) continue;
    const AdjacencyBlock& other = blocks[size_t(s)];
    if (!other.has_transpose || !same_operator(mine.forward, other.transpose) ||
        !same_operator(mine.transpose, other.forward))
      continue;
    if (s == t) {  // the block is its own transpose
      mine.transpose = mine.forward;
    } else {
      mine.forward = other.transpose;
      mine.transpose = other.forward;
    }
    return true;
  }
  return false;
}

AdjacencyBlock distribute_adjacency(const GraphRows& r, const RowDegrees& degrees,
                                    Normalization normalization, const ProcessGrid& grid,
                                    const NodeLayout& layout, int t, bool with_transpose, int64_t budget,
                                    int* rounds) {
  const Communicator& comm = grid.replica();
  const BlockRouting route(grid, layout, t);
  ReceivedEntries forward, transpose;
  const int sent = send_entries(r, normalization, grid, layout, t, route, with_transpose && route.shared(),
                                budget, forward, transpose);
  if (rounds) *rounds = sent;
  // The weights need the degrees of the block's rows (Mean, Symmetric) and columns (Symmetric).
  const AxisRoles roles = roles_for_layer(t);
  const GridCoords mine = grid.coords();
  const int64_t n = layout.num_nodes();
  std::vector<int64_t> row_degree, col_degree;
  if (normalization != Normalization::Sum)
    row_degree =
        fetch_degrees(comm, degrees, r.first_row,
                      ids_at(layout.row_order(t), mine.get(roles.c) * route.row_block, route.row_block, n));
  if (normalization == Normalization::Symmetric)
    col_degree =
        fetch_degrees(comm, degrees, r.first_row,
                      ids_at(layout.col_order(t), mine.get(roles.a) * route.col_block, route.col_block, n));
  auto [a, at] = build_block(grid, route, t, std::move(forward), std::move(transpose), with_transpose);
  AdjacencyBlock block;
  block.nnz = a.nnz();
  block.has_transpose = with_transpose;
  // Entry (i, j) weighs row_scale(i) * col_scale(j) (graph3d.hpp): the transpose swaps the two. Sum has no
  // scales (a pattern), Mean no column scale (ones), so its transpose has no row scale.
  const bool symmetric = normalization == Normalization::Symmetric;
  const Vector<double> row_scale = normalization == Normalization::Sum
                                       ? Vector<double>()
                                       : degree_scales(row_degree, symmetric, "row_scale");
  const Vector<double> col_scale =
      symmetric ? degree_scales(col_degree, true, "col_scale") : Vector<double>();
  // CsrSpmm takes the matrices' arrays as they are (their ids are SpmmColumn already).
  block.forward =
      CsrSpmm<float>(csr_to_space<float, DeviceSpace>(std::exchange(a, {})), row_scale, col_scale);
  if (with_transpose)
    block.transpose =
        CsrSpmm<float>(csr_to_space<float, DeviceSpace>(std::exchange(at, {})), col_scale, row_scale);
  return block;
}

}  // namespace tessera::impl
