// SPDX-License-Identifier: BSD-3-Clause
// build_graph_3d in its phases: degrees, adjacency (one all-to-all per layout), features, labels.
#include "tessera/parallel3d/graph3d.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "graph3d_impl.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

const char* normalization_name(Normalization normalization) {
  switch (normalization) {
    case Normalization::Mean:
      return "mean";
    case Normalization::Sum:
      return "sum";
    default:
      return "symmetric";
  }
}

namespace {

int64_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return int64_t(u);
}

float bits_float(int64_t b) {
  const uint32_t u = uint32_t(b);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool has_self_loop(const GraphRows& r, int64_t i) {
  for (int64_t k = r.indptr[size_t(i)]; k < r.indptr[size_t(i + 1)]; ++k)
    if (r.indices[size_t(k)] == r.first_row + i) return true;
  return false;
}

// Phase 1. Symmetric weights read the degree of both ends, so every node's degree (in-degree plus the self
// loop GCN adds) is all-gathered: 8 bytes per node on every rank, the one O(N) array of the load. Mean
// weights need only the row's own count of in-neighbours other than itself; Sum needs none.
std::vector<int64_t> degrees(const GraphRows& r, Normalization normalization, const Communicator& comm) {
  const int64_t rows = r.rows();
  std::vector<int64_t> local(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t count = r.indptr[size_t(i + 1)] - r.indptr[size_t(i)];
    const bool loop = has_self_loop(r, i);
    local[size_t(i)] =
        normalization == Normalization::Symmetric ? count + (loop ? 0 : 1) : count - (loop ? 1 : 0);
  }
  if (normalization != Normalization::Symmetric) return local;
  std::vector<int64_t> counts(size_t(comm.size())), all(size_t(r.num_nodes));
  all_gather(comm, &rows, 1, counts.data(), "load degrees");
  all_gather_v(comm, local.data(), counts, all.data(), "load degrees");
  return all;
}

// One nonzero as its block receives it: block-local row and column and the value's bits, three int32 (12
// bytes; the blocks' extents are checked below 2^31).
constexpr int64_t kEntryWords = 3;

// The block's CSR from its entries, rows sorted and columns sorted within a row: a counting pass places every
// entry in its row (O(nnz + rows), no permutation array), then each row is sorted by (column, value) on its
// own. This replaced one comparison sort of a permutation of all nonzeros, which took 28 s of a 37 s load on
// the grid 8x1x1 of a 2^18-node graph (every rank holds all of it there).
CsrMatrix<float, HostSpace> csr_from_entries(const int32_t* entries, int64_t count, int64_t rows,
                                             int64_t cols) {
  CsrMatrix<float, HostSpace> a;
  a.num_rows = rows;
  a.num_cols = cols;
  a.row_ptr = HostVector<int64_t>("row_ptr", size_t(rows + 1));
  a.col_idx = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), size_t(count));
  a.values = HostVector<float>(Kokkos::ViewAllocateWithoutInitializing("values"), size_t(count));
  for (int64_t k = 0; k < count; ++k) ++a.row_ptr(entries[kEntryWords * k] + 1);
  for (int64_t row = 0; row < rows; ++row) a.row_ptr(row + 1) += a.row_ptr(row);
  std::vector<int64_t> next(a.row_ptr.data(), a.row_ptr.data() + rows);
  for (int64_t k = 0; k < count; ++k) {
    const int32_t* e = entries + kEntryWords * k;
    const int64_t at = next[size_t(e[0])]++;
    a.col_idx(at) = e[1];
    a.values(at) = bits_float(e[2]);
  }
  std::vector<std::pair<int64_t, float>> row_entries;
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t begin = a.row_ptr(row), end = a.row_ptr(row + 1);
    row_entries.clear();
    for (int64_t k = begin; k < end; ++k) row_entries.emplace_back(a.col_idx(k), a.values(k));
    std::sort(row_entries.begin(), row_entries.end());
    for (int64_t k = begin; k < end; ++k) {
      a.col_idx(k) = row_entries[size_t(k - begin)].first;
      a.values(k) = row_entries[size_t(k - begin)].second;
    }
  }
  return a;
}

// Calls emit(v, u, value) for every nonzero of this rank's rows of the normalized adjacency (its in-edges
// and, for Symmetric, the self loop GCN adds), in a fixed order; without kValues every value is 0 (counting
// needs none, and the degree lookups are random reads).
template <bool kValues, class Emit>
void for_each_nonzero(const GraphRows& r, const std::vector<int64_t>& degree, Normalization normalization,
                      const Emit& emit) {
  auto symmetric = [&](int64_t v, int64_t u) {
    return kValues ? float(1.0 / std::sqrt(double(degree[size_t(v)]) * double(degree[size_t(u)]))) : 0.0f;
  };
  for (int64_t i = 0; i < r.rows(); ++i) {
    const int64_t v = r.first_row + i;
    const float row_value = !kValues                               ? 0.0f
                            : normalization == Normalization::Mean ? float(1.0 / double(degree[size_t(i)]))
                            : normalization == Normalization::Sum  ? 1.0f
                                                                   : 0.0f;
    for (int64_t k = r.indptr[size_t(i)]; k < r.indptr[size_t(i + 1)]; ++k) {
      const int64_t u = r.indices[size_t(k)];
      if (normalization == Normalization::Symmetric)
        emit(v, u, symmetric(v, u));
      else if (normalization == Normalization::Sum || u != v)
        emit(v, u, row_value);
    }
    if (normalization == Normalization::Symmetric && !has_self_loop(r, i)) emit(v, v, symmetric(v, v));
  }
}

// Phase 2: layout t's blocks. Each nonzero goes to the G_b ranks of its (c, a) block as one entry. The
// nonzeros are visited twice, to count and then to fill, so the send buffer is allocated once at its exact
// size: growing one bucket per rank copied (and page-faulted) every nonzero about three times, which was
// most of a load's time.
AdjacencyBlock distribute_adjacency(const GraphRows& r, const std::vector<int64_t>& degree,
                                    Normalization normalization, const ProcessGrid& grid,
                                    const NodeLayout& layout, int t) {
  const Communicator& comm = grid.replica();
  const GridShape& shape = grid.shape();
  const GridCoords mine = grid.coords();
  const int p = comm.size();
  const AxisRoles roles = roles_for_layer(t);
  const RandomPermutation &row_order = layout.row_order(t), &col_order = layout.col_order(t);
  const int gc = shape.extent(roles.c), ga = shape.extent(roles.a), gb = shape.extent(roles.b);
  const int64_t row_block = layout.padded_nodes() / gc, col_block = layout.padded_nodes() / ga;
  comm.check(row_block < (int64_t(1) << 31) && col_block < (int64_t(1) << 31),
             "grid " + shape.str() + ": an adjacency block of " + std::to_string(row_block) + " x " +
                 std::to_string(col_block) + " has 2^31 rows or columns or more; use more ranks");
  // The ranks holding block (c, a): the G_b copies, by c * ga + a.
  std::vector<int> block_ranks(size_t(gc) * ga * gb);
  for (int c = 0; c < gc; ++c)
    for (int a = 0; a < ga; ++a)
      for (int b = 0; b < gb; ++b)
        block_ranks[(size_t(c) * ga + a) * gb + b] =
            grid.rank_of(mine.with(roles.c, c).with(roles.a, a).with(roles.b, b)) % p;
  auto visit = [&](auto with_values, const auto& deliver) {
    int64_t last_v = -1, row = 0;
    for_each_nonzero<decltype(with_values)::value>(
        r, degree, normalization, [&](int64_t v, int64_t u, float value) {
          if (v != last_v) row = row_order.inverse(v), last_v = v;  // rows arrive in order
          const int64_t col = col_order.inverse(u);
          const int c = int(row / row_block), a = int(col / col_block);
          const int32_t entry[kEntryWords] = {int32_t(row - c * row_block), int32_t(col - a * col_block),
                                              int32_t(float_bits(value))};
          const int* ranks = &block_ranks[(size_t(c) * ga + a) * gb];
          for (int b = 0; b < gb; ++b) deliver(ranks[b], entry);
        });
  };
  std::vector<int64_t> send_counts(size_t(p), 0);
  visit(std::false_type(), [&](int rank, const int32_t*) { send_counts[size_t(rank)] += kEntryWords; });
  std::vector<int64_t> at(size_t(p), 0);
  for (int q = 1; q < p; ++q) at[size_t(q)] = at[size_t(q - 1)] + send_counts[size_t(q - 1)];
  const int64_t sent = at.back() + send_counts.back();
  std::unique_ptr<int32_t[]> send(
      new int32_t[size_t(std::max<int64_t>(sent, 1))]);  // not zeroed: all written
  visit(std::true_type(), [&](int rank, const int32_t* entry) {
    std::memcpy(send.get() + at[size_t(rank)], entry, sizeof(int32_t) * kEntryWords);
    at[size_t(rank)] += kEntryWords;
  });
  const std::vector<int64_t> recv_counts = exchange_counts(comm, send_counts, "load adjacency");
  int64_t received = 0;
  for (const int64_t c : recv_counts) received += c;
  std::unique_ptr<int32_t[]> recv(new int32_t[size_t(std::max<int64_t>(received, 1))]);
  all_to_allv(comm, send.get(), send_counts, recv.get(), recv_counts, "load adjacency");
  send.reset();
  CsrMatrix<float, HostSpace> a = csr_from_entries(recv.get(), received / kEntryWords, row_block, col_block);
  recv.reset();
  AdjacencyBlock block;
  block.nnz = a.nnz();
  block.forward = CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a));
  block.transpose = CsrSpmm<float>(csr_to_space<float, DeviceSpace>(csr_transpose(a)));
  return block;
}

// Node ids of local rows: position = begin + i in `order`; positions past N are padding (-1).
Vector<int64_t> ids_of(const RandomPermutation& order, int64_t begin, int64_t rows, int64_t n) {
  HostVector<int64_t> ids("ids", size_t(rows));
  for (int64_t i = 0; i < rows; ++i) ids(i) = begin + i < n ? order(begin + i) : -1;
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), ids);
}

// Phase 3: layer 0's input rows are in p2 order, split by X; columns split by Y; replicated over Z. Each
// row goes to the Y x Z ranks of its X block as its position and its Y slice of (padded) columns; counted
// first so both send buffers are allocated once at their size.
void distribute_features(const GraphRows& r, bool normalize, const ProcessGrid& grid, Graph3D& g) {
  const Communicator& comm = grid.replica();
  const GridShape& shape = grid.shape();
  const GridCoords mine = grid.coords();
  const int p = comm.size();
  const RandomPermutation& order = g.layout.col_order(0);
  const int64_t f = r.num_features, row_block = g.layout.padded_nodes() / shape.x;
  const int64_t col_block = padded_width(f, shape) / shape.y;
  std::vector<int64_t> positions_at(size_t(p) + 1, 0);  // counts, then each rank's next slot
  std::vector<int64_t> positions(size_t(r.rows()));
  for (int64_t i = 0; i < r.rows(); ++i) positions[size_t(i)] = order.inverse(r.first_row + i);
  auto each_dest = [&](int64_t i, const auto& fn) {
    const GridCoords row_owner = mine.with(Axis::X, int(positions[size_t(i)] / row_block));
    for (int ky = 0; ky < shape.y; ++ky)
      for (int kz = 0; kz < shape.z; ++kz)
        fn(ky, grid.rank_of(row_owner.with(Axis::Y, ky).with(Axis::Z, kz)) % p);
  };
  for (int64_t i = 0; i < r.rows(); ++i)
    each_dest(i, [&](int, int dest) { ++positions_at[size_t(dest) + 1]; });
  std::vector<int64_t> pos_counts(positions_at.begin() + 1, positions_at.end());
  std::vector<int64_t> value_counts(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) {
    positions_at[size_t(q) + 1] += positions_at[size_t(q)];
    value_counts[size_t(q)] = pos_counts[size_t(q)] * col_block;
  }
  const int64_t sent = positions_at.back();
  std::vector<int64_t> send_pos(static_cast<size_t>(sent));
  std::unique_ptr<float[]> send_val(new float[size_t(std::max<int64_t>(sent * col_block, 1))]);
  for (int64_t i = 0; i < r.rows(); ++i) {
    const float* x = r.features.data() + i * f;
    double sum = 0;
    if (normalize)
      for (int64_t j = 0; j < f; ++j) sum += x[j];
    const double scale = normalize && sum != 0 ? sum : 1.0;
    each_dest(i, [&](int ky, int dest) {
      const int64_t slot = positions_at[size_t(dest)]++;
      send_pos[size_t(slot)] = positions[size_t(i)];
      float* out = send_val.get() + slot * col_block;
      for (int64_t j = ky * col_block; j < (ky + 1) * col_block; ++j)
        *out++ = j < f ? (normalize ? float(x[j] / scale) : x[j]) : 0.0f;
    });
  }
  const std::vector<int64_t> got_pos_counts = exchange_counts(comm, pos_counts, "load features");
  int64_t got = 0;
  for (const int64_t c : got_pos_counts) got += c;
  std::vector<int64_t> got_pos(static_cast<size_t>(got)), got_counts(static_cast<size_t>(p));
  all_to_allv(comm, send_pos.data(), pos_counts, got_pos.data(), got_pos_counts, "load features");
  for (int q = 0; q < p; ++q) got_counts[size_t(q)] = got_pos_counts[size_t(q)] * col_block;
  std::unique_ptr<float[]> got_val(new float[size_t(std::max<int64_t>(got * col_block, 1))]);
  all_to_allv(comm, send_val.get(), value_counts, got_val.get(), got_counts, "load features");
  send_val.reset();
  HostMatrix<float> block("features", size_t(row_block), size_t(col_block));
  const int64_t first = mine.x * row_block;
  for (size_t k = 0; k < got_pos.size(); ++k)
    std::memcpy(&block(got_pos[k] - first, 0), got_val.get() + k * size_t(col_block),
                sizeof(float) * size_t(col_block));
  g.features = Kokkos::create_mirror_view_and_copy(DeviceSpace(), block);
  g.input_ids = ids_of(order, first, row_block, r.num_nodes);
}

// Phase 4: labels and split bits for the last layer's output rows (rows by c, replicated over a and b).
void distribute_labels(const GraphRows& r, const ProcessGrid& grid, Graph3D& g) {
  const Communicator& comm = grid.replica();
  const GridShape& shape = grid.shape();
  const GridCoords mine = grid.coords();
  const int p = comm.size();
  const int last = g.layers - 1;
  const AxisRoles roles = roles_for_layer(last);
  const RandomPermutation& order = g.layout.row_order(last);
  const int64_t row_block = g.layout.padded_nodes() / shape.extent(roles.c);
  int64_t local_train = 0;
  std::vector<std::vector<int64_t>> buckets(static_cast<size_t>(p));
  for (int64_t i = 0; i < r.rows(); ++i) {
    local_train += (r.splits[size_t(i)] & GraphRows::kTrain) && r.labels[size_t(i)] >= 0;
    const int64_t pos = order.inverse(r.first_row + i);
    const GridCoords row_owner = mine.with(roles.c, int(pos / row_block));
    for (int ka = 0; ka < shape.extent(roles.a); ++ka)
      for (int kb = 0; kb < shape.extent(roles.b); ++kb) {
        const int dest = grid.rank_of(row_owner.with(roles.a, ka).with(roles.b, kb)) % p;
        buckets[size_t(dest)].insert(buckets[size_t(dest)].end(),
                                     {pos, r.labels[size_t(i)], int64_t(r.splits[size_t(i)])});
      }
  }
  g.num_train = all_reduce_value(comm, local_train, ReduceOp::Sum, "load");
  comm.check(g.num_train > 0, r.name + ": no labeled node in split 'train'");
  const std::vector<int64_t> got = exchange_buckets(comm, std::move(buckets), "load labels");
  const int64_t first = mine.get(roles.c) * row_block;
  HostVector<int64_t> y("labels", size_t(row_block));
  HostVector<uint8_t> train("train", size_t(row_block)), valid("valid", size_t(row_block)),
      test("test", size_t(row_block));
  Kokkos::deep_copy(y, int64_t(-1));
  for (size_t k = 0; k < got.size(); k += 3) {
    const int64_t i = got[k] - first;
    y(i) = got[k + 1];
    train(i) = (got[k + 2] & GraphRows::kTrain) != 0;
    valid(i) = (got[k + 2] & GraphRows::kValid) != 0;
    test(i) = (got[k + 2] & GraphRows::kTest) != 0;
  }
  g.labels = Kokkos::create_mirror_view_and_copy(DeviceSpace(), y);
  g.train = Kokkos::create_mirror_view_and_copy(DeviceSpace(), train);
  g.valid = Kokkos::create_mirror_view_and_copy(DeviceSpace(), valid);
  g.test = Kokkos::create_mirror_view_and_copy(DeviceSpace(), test);
}

// Every rank's phases become the slowest time and the largest peak (one all-reduce, on every rank).
void reduce_load_phases(const Communicator& comm, std::vector<LoadPhase>& phases) {
  std::vector<double> values;
  for (const LoadPhase& p : phases) values.insert(values.end(), {p.seconds, double(p.peak_bytes)});
  all_reduce(comm, values.data(), int64_t(values.size()), ReduceOp::Max, "load");
  for (size_t i = 0; i < phases.size(); ++i) {
    phases[i].seconds = values[2 * i];
    phases[i].peak_bytes = int64_t(values[2 * i + 1]);
  }
}

// What an in-edge and a row cost the rank that reads them, in bytes held at once: the edge is read (8) and
// sent as three int32 to the G_b ranks of its block (12 G_b, for the layout with the largest G_b); the
// row's features, label, offset and split bits are read, and then either its self loop is sent like an
// edge or its features go to the Y x Z ranks of its block, whichever is more. Balancing this sum bounds
// every phase's transient on every rank by the mean.
RowCosts row_costs(const GraphMeta& meta, const GridShape& shape, int layers) {
  int widest = 1;
  for (int t = 0; t < std::min(layers, 6); ++t) widest = std::max(widest, shape.extent(roles_for_layer(t).b));
  const double exchange = 12.0 * widest;
  const double features =
      double(shape.z) * (8.0 * shape.y + 4.0 * double(padded_width(meta.num_features, shape)));
  return RowCosts{8.0 + exchange, 4.0 * double(meta.num_features) + 17.0 + std::max(exchange, features)};
}

}  // namespace

Graph3D build_graph_3d(const GraphRows& rows, const ProcessGrid& grid, const Graph3DOptions& options) {
  const Communicator& comm = grid.replica();
  impl::validate_rows(rows, comm);
  comm.check(rows.num_classes > 0, rows.name + ": num_classes is 0 (the file has no labels to train on)");
  comm.check(options.layers >= 1, "a model on the grid needs at least one graph layer");
  const GridShape& shape = grid.shape();
  comm.check(rows.num_nodes >= int64_t(shape.x) * shape.y * shape.z,
             "grid " + shape.str() + " has more ranks than the graph has nodes (" +
                 std::to_string(rows.num_nodes) + ")");
  Graph3D g;
  g.layout = NodeLayout(shape, rows.num_nodes, options.permute, options.seed);
  g.coords = grid.coords();
  g.layers = options.layers;
  g.num_features = rows.num_features;
  g.num_classes = rows.num_classes;
  g.normalization = options.normalization;
  Stopwatch phase;
  auto done = [&](const std::string& name) {
    g.load_phases.push_back({name, phase.seconds(), int64_t(peak_rss_bytes())});
    if (options.on_phase) options.on_phase(g.load_phases.back());
    phase.restart();
  };
  // Labels first: a graph without training labels is refused before the expensive phases.
  distribute_labels(rows, grid, g);
  done("labels");
  const std::vector<int64_t> degree = degrees(rows, options.normalization, comm);
  done("degrees");
  for (int t = 0; t < std::min(options.layers, 6); ++t) {
    g.adjacency.push_back(distribute_adjacency(rows, degree, options.normalization, grid, g.layout, t));
    done("adjacency " + std::to_string(t));
  }
  const double local_nnz = double(g.adjacency[0].nnz);
  g.max_nnz = all_reduce_value(comm, local_nnz, ReduceOp::Max, "load");
  // Ranks that differ only in b hold copies of the same block: the mean over ranks is the mean over blocks.
  g.mean_nnz = all_reduce_value(comm, local_nnz, ReduceOp::Sum, "load") / double(comm.size());
  distribute_features(rows, options.normalize_features, grid, g);
  done("features");
  for (int l = 0; l < options.layers; ++l) {
    const AxisRoles roles = roles_for_layer(l);
    const int64_t row_block = g.layout.padded_nodes() / shape.extent(roles.c);
    g.output_ids.push_back(
        ids_of(g.layout.row_order(l), g.coords.get(roles.c) * row_block, row_block, rows.num_nodes));
  }
  reduce_load_phases(comm, g.load_phases);
  return g;
}

Graph3D load_graph_3d(const GraphFileReader& reader, const ProcessGrid& grid, const Graph3DOptions& options) {
  const Communicator& comm = grid.replica();
  comm.check(reader.has_split("train"),
             reader.path() + ": no split named 'train' (the trainer needs /split/train)");
  Stopwatch watch;
  const GraphRows rows =
      read_graph_rows(reader, comm, row_costs(reader.meta(), grid.shape(), options.layers));
  std::vector<LoadPhase> read{{"read", watch.seconds(), int64_t(peak_rss_bytes())}};
  if (options.on_phase) options.on_phase(read.front());
  reduce_load_phases(comm, read);
  Graph3D g = build_graph_3d(rows, grid, options);
  g.load_phases.insert(g.load_phases.begin(), read.front());
  return g;
}

}  // namespace tessera
