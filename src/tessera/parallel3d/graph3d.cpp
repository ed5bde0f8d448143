// SPDX-License-Identifier: BSD-3-Clause
// build_graph_3d in its phases: labels, degrees, adjacency (adjacency3d.cpp), features.
#include "tessera/parallel3d/graph3d.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "graph3d_impl.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

namespace impl {

RowRounds::RowRounds(const Communicator& comm, int64_t rows, int64_t budget,
                     const std::function<double(int64_t)>& row_bytes)
    : begins_{0} {
  double used = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const double bytes = row_bytes(i);
    if (budget > 0 && used > 0 && used + bytes > double(budget)) begins_.push_back(i), used = 0;
    used += bytes;
  }
  begins_.push_back(rows);
  count_ = int(all_reduce_value(comm, int64_t(begins_.size()) - 1, ReduceOp::Max, "load"));
}

}  // namespace impl

namespace {

using impl::RowRounds;

// Phase 1: this rank's rows' degrees, and where every rank's rows begin (one all-gather of P offsets): a
// block's builder asks for the degrees of its rows and columns (adjacency3d.cpp). Before, every node's
// degree was all-gathered onto every rank, 8 bytes per node: the one O(N) array of the load.
impl::RowDegrees degrees(const GraphRows& r, Normalization normalization, const Communicator& comm) {
  impl::RowDegrees d;
  d.local.resize(size_t(r.rows()));
  for (int64_t i = 0; i < r.rows(); ++i) {
    const int64_t count = r.indptr[size_t(i + 1)] - r.indptr[size_t(i)];
    int64_t loops = 0;  // a row may list its own node more than once: all stand for the one self loop
    for (int64_t k = r.indptr[size_t(i)]; k < r.indptr[size_t(i + 1)]; ++k)
      loops += r.indices[size_t(k)] == r.first_row + i;
    d.local[size_t(i)] = normalization == Normalization::Symmetric ? count - loops + 1 : count - loops;
  }
  d.row_begins.resize(size_t(comm.size()));
  all_gather(comm, &r.first_row, 1, d.row_begins.data(), "load degrees");
  d.row_begins.push_back(r.num_nodes);
  return d;
}

// Node ids of local rows: position = begin + i in `order`; positions past N are padding (-1).
Vector<int64_t> ids_of(const RandomPermutation& order, int64_t begin, int64_t rows, int64_t n) {
  HostVector<int64_t> ids("ids", size_t(rows));
  for (int64_t i = 0; i < rows; ++i) ids(i) = begin + i < n ? order(begin + i) : -1;
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), ids);
}

// Rounds pay in the features phase only when the send and receive buffers outweigh the rows and the block:
// in one round the rows' features are freed before the receive buffer exists and the send buffer before the
// block does, so no three of them coexist, while with rounds the rows and the block are held throughout.
// Collective: `budget` when rounds lower the largest rank's peak, else 0 (one round) on every rank (a
// rank sending all its rows in the first round would swamp what the others receive in it).
int64_t features_budget(const Communicator& comm, int64_t budget, double own, double sent, double received,
                        double block) {
  if (budget <= 0) return 0;
  const double rounds = std::max(1.0, std::ceil(sent / double(budget)));
  double peaks[2] = {std::max({own + sent, sent + received, received + block}),
                     own + block + (sent + received) / rounds};
  all_reduce(comm, peaks, 2, ReduceOp::Max, "load");
  return peaks[1] < peaks[0] ? budget : 0;
}

// Phase 3: layer 0's input rows are in p2 order, split by X; columns split by Y; replicated over Z. Each
// row goes to the Y x Z ranks of its X block as its position and its Y slice of (padded) columns, in rounds
// of rows (RowRounds, about `budget` bytes each way, where that lowers the peak: features_budget) that are
// placed in the block as they arrive; each round is counted first so both send buffers are allocated once
// at their size.
// `release`: the rows (the same as r), whose features are freed once the last round is packed (before the
// exchange's receive buffer and the block are allocated when there is one round), or null to keep them.
// Value: float (the block holds floats, rounded to bf16 values when bf16_feature_values) or uint16_t (bf16
// bits: half the bytes sent and held; rows read as bits are sent as they are).
template <class Value>
int distribute_features(const GraphRows& r, const Graph3DOptions& options, const ProcessGrid& grid,
                        Graph3D& g, GraphRows* release) {
  constexpr bool bits = std::is_same<Value, uint16_t>::value;
  constexpr double value_bytes = sizeof(Value);
  const bool normalize = options.normalize_features, bf16 = options.bf16_feature_values;
  const int64_t budget = options.exchange_budget;
  const Communicator& comm = grid.replica();
  const GridShape& shape = grid.shape();
  const GridCoords mine = grid.coords();
  const int p = comm.size();
  const RandomPermutation& order = g.layout.col_order(0);
  const int64_t f = r.num_features, row_block = g.layout.padded_nodes() / shape.x;
  const int64_t col_block = padded_width(f, shape) / shape.y;
  auto each_dest = [&](int64_t position, const auto& fn) {
    const GridCoords row_owner = mine.with(Axis::X, int(position / row_block));
    for (int ky = 0; ky < shape.y; ++ky)
      for (int kz = 0; kz < shape.z; ++kz)
        fn(ky, grid.rank_of(row_owner.with(Axis::Y, ky).with(Axis::Z, kz)) % p);
  };
  const double row_bytes = double(shape.y) * shape.z * (8.0 + value_bytes * double(col_block)) + 8.0;
  const double own = release ? 4.0 * double(r.features.size()) + 2.0 * double(r.features_bf16.size()) : 0.0;
  const double block_bytes = value_bytes * double(row_block) * double(col_block);
  const RowRounds rounds(comm, r.rows(),
                         features_budget(comm, budget, own, row_bytes * double(r.rows()),
                                         block_bytes + 8.0 * double(row_block), block_bytes),
                         [&](int64_t) { return row_bytes; });
  HostMatrix<Value> block;
  const int64_t first = mine.x * row_block;
  Progress progress("load: features, rank 0's rows", r.rows());
  for (int k = 0; k < rounds.count(); ++k) {
    const int64_t begin = rounds.begin(k), rows = rounds.end(k) - begin;
    std::vector<int64_t> positions_at(size_t(p) + 1, 0);  // counts, then each rank's next slot
    std::vector<int64_t> positions(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) positions[size_t(i)] = order.inverse(r.first_row + begin + i);
    for (const int64_t position : positions)
      each_dest(position, [&](int, int dest) { ++positions_at[size_t(dest) + 1]; });
    std::vector<int64_t> pos_counts(positions_at.begin() + 1, positions_at.end());
    std::vector<int64_t> value_counts(static_cast<size_t>(p));
    for (int q = 0; q < p; ++q) {
      positions_at[size_t(q) + 1] += positions_at[size_t(q)];
      value_counts[size_t(q)] = pos_counts[size_t(q)] * col_block;
    }
    const int64_t sent = positions_at.back();
    PageBuffer<int64_t> send_pos{size_t(sent)};
    PageBuffer<Value> send_val{size_t(sent * col_block)};
    for (int64_t i = 0; i < rows; ++i) {
      if (!r.features_bf16.empty()) {  // rows read as bits (build_from_rows checked: no normalization)
        const uint16_t* stored = r.features_bf16.data() + (begin + i) * f;
        each_dest(positions[size_t(i)], [&](int ky, int dest) {
          const int64_t slot = positions_at[size_t(dest)]++;
          send_pos[size_t(slot)] = positions[size_t(i)];
          Value* out = send_val.data() + slot * col_block;
          for (int64_t j = ky * col_block; j < (ky + 1) * col_block; ++j) {
            if constexpr (bits)
              *out++ = j < f ? stored[j] : uint16_t(0);
            else
              *out++ = j < f ? from_bf16(stored[j]) : 0.0f;
          }
        });
        continue;
      }
      const float* x = r.features.data() + (begin + i) * f;
      double sum = 0;
      if (normalize)
        for (int64_t j = 0; j < f; ++j) sum += x[j];
      const double scale = normalize && sum != 0 ? sum : 1.0;
      each_dest(positions[size_t(i)], [&](int ky, int dest) {
        const int64_t slot = positions_at[size_t(dest)]++;
        send_pos[size_t(slot)] = positions[size_t(i)];
        Value* out = send_val.data() + slot * col_block;
        for (int64_t j = ky * col_block; j < (ky + 1) * col_block; ++j) {
          const float value = j < f ? (normalize ? float(x[j] / scale) : x[j]) : 0.0f;
          if constexpr (bits)
            *out++ = to_bf16(value);
          else
            *out++ = bf16 ? from_bf16(to_bf16(value)) : value;
        }
      });
    }
    if (release && rounds.end(k) == r.rows() && rounds.begin(k) < rounds.end(k) + (k == 0)) {
      std::vector<float>().swap(release->features);          // this rank's last rows are packed: it may have
      std::vector<uint16_t>().swap(release->features_bf16);  // fewer rounds than others
    }
    const std::vector<int64_t> got_pos_counts = exchange_counts(comm, pos_counts, "load features");
    int64_t got = 0;
    for (const int64_t c : got_pos_counts) got += c;
    PageBuffer<int64_t> got_pos{size_t(got)};
    std::vector<int64_t> got_counts(static_cast<size_t>(p));
    all_to_allv(comm, send_pos.data(), pos_counts, got_pos.data(), got_pos_counts, "load features");
    send_pos.reset();
    for (int q = 0; q < p; ++q) got_counts[size_t(q)] = got_pos_counts[size_t(q)] * col_block;
    PageBuffer<Value> got_val{size_t(got * col_block)};
    all_to_allv(comm, send_val.data(), value_counts, got_val.data(), got_counts, "load features");
    send_val.reset();
    if (k == 0) block = HostMatrix<Value>("features", size_t(row_block), size_t(col_block));
    for (size_t e = 0; e < got_pos.size(); ++e)
      std::memcpy(&block(got_pos[e] - first, 0), got_val.data() + e * size_t(col_block),
                  sizeof(Value) * size_t(col_block));
    progress.advance(rows);
  }
  g.feature_dtype = bits ? StorageDtype::Bf16 : StorageDtype::F32;
  if constexpr (bits)
    g.features_bf16 = Kokkos::create_mirror_view_and_copy(DeviceSpace(), block);
  else
    g.features = Kokkos::create_mirror_view_and_copy(DeviceSpace(), block);
  g.input_ids = ids_of(order, first, row_block, r.num_nodes);
  return rounds.count();
}

// Layout t's output rows hold the same nodes as layout u's on every rank (the same row order, and the same
// axis splits them or neither splits them): its node data is u's. -1: none before t.
int node_data_twin(const NodeLayout& layout, int t) {
  const GridShape& shape = layout.shape();
  for (int u = 0; u < t; ++u) {
    const Axis cu = roles_for_layer(u).c, ct = roles_for_layer(t).c;
    const bool same_order = layout.one_order() || u % 2 == t % 2;
    if (same_order && (cu == ct || (shape.extent(cu) == 1 && shape.extent(ct) == 1))) return u;
  }
  return -1;
}

// Each row's (layout, position, label, split bits) for the ranks that hold its output row in each of
// `layouts` layouts (rows by c, replicated over a and b), layouts sharing their node data sent once. A
// multi-label row's tasks follow its four words, packed eight to a word (label_words of them).
int64_t label_words(const GraphRows& r) {
  return r.multi_label ? (r.num_classes + 7) / 8 : 0;
}

std::vector<std::vector<int64_t>> label_buckets(const GraphRows& r, const ProcessGrid& grid,
                                                const NodeLayout& layout, int layouts) {
  const GridShape& shape = grid.shape();
  const GridCoords mine = grid.coords();
  const int p = grid.replica().size();
  std::vector<std::vector<int64_t>> buckets(static_cast<size_t>(p));
  for (int t = 0; t < layouts; ++t) {
    if (node_data_twin(layout, t) >= 0) continue;
    const AxisRoles roles = roles_for_layer(t);
    const int64_t row_block = layout.padded_nodes() / shape.extent(roles.c);
    for (int64_t i = 0; i < r.rows(); ++i) {
      const int64_t pos = layout.row_order(t).inverse(r.first_row + i);
      const GridCoords row_owner = mine.with(roles.c, int(pos / row_block));
      for (int ka = 0; ka < shape.extent(roles.a); ++ka)
        for (int kb = 0; kb < shape.extent(roles.b); ++kb) {
          const int dest = grid.rank_of(row_owner.with(roles.a, ka).with(roles.b, kb)) % p;
          std::vector<int64_t>& bucket = buckets[size_t(dest)];
          bucket.insert(bucket.end(), {t, pos, r.labels[size_t(i)], int64_t(r.splits[size_t(i)])});
          const size_t words = size_t(label_words(r));
          bucket.resize(bucket.size() + words, 0);
          if (words > 0)
            std::memcpy(bucket.data() + bucket.size() - words, &r.label_matrix[size_t(i * r.num_classes)],
                        size_t(r.num_classes));
        }
    }
  }
  return buckets;
}

// The labels phase: labels and named masks in the output rows' order of each of `layouts` layouts, in one
// exchange.
void distribute_labels(const GraphRows& r, const ProcessGrid& grid, int layouts, bool require_labels,
                       Graph3D& g) {
  const Communicator& comm = grid.replica();
  const GridCoords mine = grid.coords();
  const auto train_bit =
      std::find(r.split_names.begin(), r.split_names.end(), "train") - r.split_names.begin();
  int64_t local_train = 0;
  for (int64_t i = 0; i < r.rows(); ++i)
    local_train += ((r.splits[size_t(i)] >> train_bit) & 1) && r.labels[size_t(i)] >= 0;
  g.num_train = all_reduce_value(comm, local_train, ReduceOp::Sum, "load");
  comm.check(g.num_train > 0 || !require_labels, r.name + ": no labeled node in split 'train'");
  const std::vector<int64_t> got =
      exchange_buckets(comm, label_buckets(r, grid, g.layout, layouts), "load labels");
  std::vector<HostVector<int64_t>> labels(static_cast<size_t>(layouts));
  std::vector<HostMatrix<int8_t>> targets(static_cast<size_t>(layouts));
  std::vector<std::vector<HostVector<uint8_t>>> masks(static_cast<size_t>(layouts));
  for (int t = 0; t < layouts; ++t) {
    if (node_data_twin(g.layout, t) >= 0) continue;  // nothing arrives for it: it shares its twin's
    const int64_t row_block = g.layout.padded_nodes() / grid.shape().extent(roles_for_layer(t).c);
    labels[size_t(t)] = HostVector<int64_t>("labels", size_t(row_block));
    Kokkos::deep_copy(labels[size_t(t)], int64_t(-1));
    if (r.multi_label) {
      targets[size_t(t)] = HostMatrix<int8_t>("targets", size_t(row_block), size_t(r.num_classes));
      Kokkos::deep_copy(targets[size_t(t)], int8_t(-1));
    }
    for (const std::string& name : r.split_names)
      masks[size_t(t)].push_back(HostVector<uint8_t>("mask " + name, size_t(row_block)));
  }
  const size_t stride = 4 + size_t(label_words(r));
  for (size_t k = 0; k < got.size(); k += stride) {
    const int t = int(got[k]);
    const int64_t i = got[k + 1] - mine.get(roles_for_layer(t).c) * int64_t(labels[size_t(t)].extent(0));
    labels[size_t(t)](i) = got[k + 2];
    if (r.multi_label) std::memcpy(&targets[size_t(t)](i, 0), &got[k + 4], size_t(r.num_classes));
    for (size_t m = 0; m < r.split_names.size(); ++m) masks[size_t(t)][m](i) = (got[k + 3] >> m) & 1;
  }
  for (int t = 0; t < layouts; ++t) {
    const int twin = node_data_twin(g.layout, t);
    NodeData d = twin >= 0 ? g.node_data[size_t(twin)] : NodeData{};
    if (twin < 0) {
      d.labels = Kokkos::create_mirror_view_and_copy(DeviceSpace(), labels[size_t(t)]);
      if (r.multi_label) d.targets = Kokkos::create_mirror_view_and_copy(DeviceSpace(), targets[size_t(t)]);
      for (size_t m = 0; m < r.split_names.size(); ++m)
        d.masks.emplace_back(r.split_names[m],
                             Kokkos::create_mirror_view_and_copy(DeviceSpace(), masks[size_t(t)][m]));
    }
    g.node_data.push_back(std::move(d));
  }
}

// Adjacency layouts a graph serving models of at most `layers` graph layers holds (0: any depth).
int layouts_for(int layers) {
  return layers <= 0 || layers >= 6 ? 6 : layers;
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

// What an in-edge and a row cost the rank that reads them, in bytes held at once: the edge is read (8),
// its column kept between two passes (8) and sent as two int32 to one copy of its block, or two when
// the block has copies (adjacency3d.cpp); the row's features, label, offset and split bits are read, and then
// either its self loop is sent like an edge or its features go to the Y x Z ranks of its block, whichever is
// more. Balancing this sum bounds every phase's transient on every rank by the mean.
RowCosts row_costs(const GraphMeta& meta, const GridShape& shape, int layouts) {
  int copies = 1;
  for (int t = 0; t < layouts; ++t)
    copies = std::max(copies, std::min(2, shape.extent(roles_for_layer(t).b)));
  const double exchange = 8.0 * copies + 8.0;
  const double features =
      double(shape.z) * (8.0 * shape.y + 4.0 * double(padded_width(meta.num_features, shape)));
  return RowCosts{8.0 + exchange, 4.0 * double(meta.num_features) + 17.0 + std::max(exchange, features)};
}

// build_graph_3d; `release` (the same rows, or null) has each array freed once the phases are done with it.
Graph3D build_from_rows(const GraphRows& rows, GraphRows* release, const ProcessGrid& grid,
                        const Graph3DOptions& options) {
  const Communicator& comm = grid.replica();
  impl::validate_rows(rows, comm);
  comm.check(rows.num_classes > 0 || !options.require_labels,
             rows.name + ": num_classes is 0 (the file has no labels to train on)");
  // Rows read as bits are the values held: nothing may change them before the block.
  comm.check(rows.features_bf16.empty() ||
                 (options.feature_dtype == StorageDtype::Bf16 && !options.normalize_features),
             rows.name +
                 ": features given as bf16 bits need Graph3DOptions::feature_dtype Bf16 and no "
                 "normalize_features");
  comm.check(options.layers >= 0, "Graph3DOptions::layers is negative (" + std::to_string(options.layers) +
                                      "; 0 serves models of any depth)");
  const GridShape& shape = grid.shape();
  comm.check(rows.num_nodes >= int64_t(shape.x) * shape.y * shape.z,
             "grid " + shape.str() + " has more ranks than the graph has nodes (" +
                 std::to_string(rows.num_nodes) + ")");
  Graph3D g;
  g.layout = NodeLayout(shape, rows.num_nodes, options.permute, options.seed,
                        std::max<int64_t>(1, options.permute_chunk));
  g.coords = grid.coords();
  g.layers = options.layers;
  g.num_features = rows.num_features;
  g.num_classes = rows.num_classes;
  g.multi_label = rows.multi_label;
  g.normalization = options.normalization;
  Stopwatch phase;
  auto done = [&](const std::string& name, int rounds) {
    g.load_phases.push_back({name, phase.seconds(), int64_t(peak_rss_bytes()), rounds});
    if (options.on_phase) options.on_phase(g.load_phases.back());
    phase.restart();
  };
  const int layouts = layouts_for(options.layers);
  // Labels first: a graph without training labels is refused before the expensive phases.
  distribute_labels(rows, grid, layouts, options.require_labels, g);
  done("labels", 1);
  const impl::RowDegrees degree = degrees(rows, options.normalization, comm);
  done("degrees", 1);
  for (int t = 0; t < layouts; ++t) {
    // One rank per replica: layouts in the same orders are one block, and a symmetric adjacency's layouts
    // in swapped orders are each other's transposes (A2 = A1^T): views, not copies.
    const int twin = impl::identical_layout(g.layout, t);
    if (twin >= 0) {
      g.adjacency.push_back(g.adjacency[size_t(twin)]);
      done("adjacency " + std::to_string(t) + " as " + std::to_string(twin), 0);
      continue;
    }
    int rounds = 1;
    g.adjacency.push_back(impl::distribute_adjacency(rows, degree, options.normalization, grid, g.layout, t,
                                                     options.transposes, options.exchange_budget, &rounds));
    if (options.transposes) impl::share_transposed(g.layout, t, g.adjacency);
    done("adjacency " + std::to_string(t), rounds);
  }
  if (release) {  // the edges are in the blocks now; the features phase peaks higher than any before it
    std::vector<int64_t>().swap(release->indices);
    std::vector<int64_t>().swap(release->indptr);
    release_free_memory();
  }
  const double local_nnz = double(g.adjacency[0].nnz);
  g.max_nnz = all_reduce_value(comm, local_nnz, ReduceOp::Max, "load");
  // Ranks that differ only in b hold copies of the same block: the mean over ranks is the mean over blocks.
  g.mean_nnz = all_reduce_value(comm, local_nnz, ReduceOp::Sum, "load") / double(comm.size());
  done("features", options.feature_dtype == StorageDtype::Bf16
                       ? distribute_features<uint16_t>(rows, options, grid, g, release)
                       : distribute_features<float>(rows, options, grid, g, release));
  for (int t = 0; t < layouts; ++t) {
    const AxisRoles roles = roles_for_layer(t);
    const int64_t row_block = g.layout.padded_nodes() / shape.extent(roles.c);
    g.output_ids.push_back(
        ids_of(g.layout.row_order(t), g.coords.get(roles.c) * row_block, row_block, rows.num_nodes));
  }
  reduce_load_phases(comm, g.load_phases);
  if (release) release_free_memory();  // the exchanges' buffers and the rows' features
  return g;
}

}  // namespace

Graph3D build_graph_3d(const GraphRows& rows, const ProcessGrid& grid, const Graph3DOptions& options) {
  return build_from_rows(rows, nullptr, grid, options);
}

Graph3D build_graph_3d(GraphRows&& rows, const ProcessGrid& grid, const Graph3DOptions& options) {
  return build_from_rows(rows, &rows, grid, options);
}

Graph3D load_graph_3d(const GraphFileReader& reader, const ProcessGrid& grid, const Graph3DOptions& options) {
  const Communicator& comm = grid.replica();
  comm.check(reader.has_split("train") || !options.require_labels,
             reader.path() + ": no split named 'train' (the trainer needs /split/train)");
  Stopwatch watch;
  // bf16 storage reads the rows as bits where nothing changes them first (a normalization is done on the
  // fp32 values and rounded after).
  const bool bits = options.feature_dtype == StorageDtype::Bf16 && !options.normalize_features;
  GraphRows rows =
      read_graph_rows(reader, comm, row_costs(reader.meta(), grid.shape(), layouts_for(options.layers)),
                      bits ? StorageDtype::Bf16 : StorageDtype::F32);
  std::vector<LoadPhase> read{{"read", watch.seconds(), int64_t(peak_rss_bytes()), 1}};
  if (options.on_phase) options.on_phase(read.front());
  reduce_load_phases(comm, read);
  Graph3DOptions load = options;
  if (load.permute_chunk == 0) load.permute_chunk = reader.has_original_ids() ? kReorderedPermuteChunk : 1;
  Graph3D g = build_graph_3d(std::move(rows), grid, load);
  g.load_phases.insert(g.load_phases.begin(), read.front());
  return g;
}

}  // namespace tessera
