// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/parallel3d/graph3d.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"

namespace tessera {

int64_t Graph3D::valid_rows(int layer) const {
  const Vector<int64_t>& ids = output_ids[size_t(layer)];
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), ids);
  int64_t count = 0;
  while (count < int64_t(host.extent(0)) && host(count) >= 0) ++count;
  return count;
}

std::vector<LayerGraph> full_graph_views(const Graph3D& g) {
  std::vector<LayerGraph> views;
  for (int l = 0; l < g.layout.layers(); ++l)
    views.push_back(LayerGraph{&g.adjacency[size_t(l % 6)], g.output_ids[size_t(l)], g.valid_rows(l),
                               g.layout.num_nodes(), true});
  return views;
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

// Node ids of local rows: position = begin + i in `order`; positions past N are padding (-1).
Vector<int64_t> ids_of(const RandomPermutation& order, int64_t begin, int64_t rows, int64_t n) {
  HostVector<int64_t> ids("ids", size_t(rows));
  for (int64_t i = 0; i < rows; ++i) ids(i) = begin + i < n ? order(begin + i) : -1;
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), ids);
}

// Receives triples (row position, column position, value bits) into a local CSR with sorted rows.
CsrMatrix<float, HostSpace> build_block(std::vector<int64_t>& triples, int64_t row_begin, int64_t rows,
                                        int64_t col_begin, int64_t cols) {
  const size_t count = triples.size() / 3;
  std::vector<size_t> order(count);
  for (size_t k = 0; k < count; ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t p, size_t q) {
    return std::make_pair(triples[3 * p], triples[3 * p + 1]) <
           std::make_pair(triples[3 * q], triples[3 * q + 1]);
  });
  CsrMatrix<float, HostSpace> a;
  a.num_rows = rows;
  a.num_cols = cols;
  a.row_ptr = HostVector<int64_t>("row_ptr", size_t(rows + 1));
  a.col_idx = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), count);
  a.values = HostVector<float>(Kokkos::ViewAllocateWithoutInitializing("values"), count);
  for (size_t k = 0; k < count; ++k) {
    const size_t t = order[k];
    ++a.row_ptr(triples[3 * t] - row_begin + 1);
    a.col_idx(k) = triples[3 * t + 1] - col_begin;
    a.values(k) = bits_float(triples[3 * t + 2]);
  }
  for (int64_t r = 0; r < rows; ++r) a.row_ptr(r + 1) += a.row_ptr(r);
  return a;
}

}  // namespace

Graph3D load_graph_3d(const GraphFileReader& reader, const ProcessGrid& grid, const Load3DOptions& options) {
  const Communicator& comm = grid.replica();
  const GraphMeta& meta = reader.meta();
  const std::string& file = reader.path();
  comm.check(reader.has_split("train"), file + ": no split named 'train' (the trainer needs /split/train)");
  comm.check(meta.num_classes > 0, file + ": num_classes is 0 (the file has no labels to train on)");
  const GridShape& shape = grid.shape();
  comm.check(meta.num_nodes >= int64_t(shape.x) * shape.y * shape.z,
             "grid " + shape.str() + " has more ranks than the graph has nodes (" +
                 std::to_string(meta.num_nodes) + ")");
  std::vector<int64_t> dims = {meta.num_features};
  dims.insert(dims.end(), options.hidden.begin(), options.hidden.end());
  dims.push_back(meta.num_classes);
  Graph3D g{Layout3D(shape, meta.num_nodes, dims, options.permute, options.seed),
            {},
            {},
            {},
            {},
            {},
            {},
            {},
            {},
            0,
            0,
            0};
  const Layout3D& layout = g.layout;
  const int64_t n = meta.num_nodes, np = layout.padded_nodes();
  const int p = comm.size(), me = comm.rank();
  const GridCoords mine = grid.coords();
  const auto [begin, end] = block_range(n, me, p);
  const int64_t rows = end - begin;

  // Local rows of the graph and every node's degree (in-degree plus the self loop GCN adds).
  const std::vector<int64_t> indptr = reader.read_indptr(begin, rows + 1);
  const std::vector<int64_t> sources = reader.read_indices(indptr.front(), indptr.back() - indptr.front());
  std::vector<int64_t> degree(static_cast<size_t>(rows));
  std::vector<bool> has_loop(static_cast<size_t>(rows), false);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = indptr[size_t(i)]; k < indptr[size_t(i + 1)]; ++k)
      if (sources[size_t(k - indptr.front())] == begin + i) has_loop[size_t(i)] = true;
    degree[size_t(i)] = indptr[size_t(i + 1)] - indptr[size_t(i)] + (has_loop[size_t(i)] ? 0 : 1);
  }
  std::vector<int64_t> counts(static_cast<size_t>(p)), all_degrees(static_cast<size_t>(n));
  for (int r = 0; r < p; ++r) {
    const auto [rb, re] = block_range(n, r, p);
    counts[size_t(r)] = re - rb;
  }
  all_gather_v(comm, degree.data(), counts, all_degrees.data(), "load degrees");

  // The normalized adjacency, one layout at a time: each nonzero goes to the Gb ranks of its (c, a) block.
  for (int t = 0; t < layout.num_adjacency_layouts(); ++t) {
    const AxisRoles roles = roles_for_layer(t);
    const RandomPermutation &row_order = layout.row_order(t), &col_order = layout.col_order(t);
    const int64_t row_block = np / shape.extent(roles.c), col_block = np / shape.extent(roles.a);
    std::vector<std::vector<int64_t>> buckets(static_cast<size_t>(p));
    auto send = [&](int64_t v, int64_t u) {
      const int64_t row = row_order.inverse(v), col = col_order.inverse(u);
      const float value =
          float(1.0 / std::sqrt(double(all_degrees[size_t(v)]) * double(all_degrees[size_t(u)])));
      GridCoords dest = mine.with(roles.c, int(row / row_block)).with(roles.a, int(col / col_block));
      for (int kb = 0; kb < shape.extent(roles.b); ++kb) {
        std::vector<int64_t>& bucket = buckets[size_t(grid.rank_of(dest.with(roles.b, kb)) % p)];
        bucket.insert(bucket.end(), {row, col, float_bits(value)});
      }
    };
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t v = begin + i;
      for (int64_t k = indptr[size_t(i)]; k < indptr[size_t(i + 1)]; ++k)
        send(v, sources[size_t(k - indptr.front())]);
      if (!has_loop[size_t(i)]) send(v, v);
    }
    std::vector<int64_t> triples = exchange_buckets(comm, buckets, "load adjacency");
    std::vector<std::vector<int64_t>>().swap(buckets);
    const int kc = mine.get(roles.c), ka = mine.get(roles.a);
    const CsrMatrix<float, HostSpace> block =
        build_block(triples, kc * row_block, row_block, ka * col_block, col_block);
    AdjacencyBlock ab;
    ab.nnz = block.nnz();
    ab.forward = CsrSpmm<float>(csr_to_space<float, DeviceSpace>(block));
    ab.transpose = CsrSpmm<float>(csr_to_space<float, DeviceSpace>(csr_transpose(block)));
    g.adjacency.push_back(std::move(ab));
  }
  const double local_nnz = double(g.adjacency[0].nnz);
  g.max_nnz = all_reduce_value(comm, local_nnz, ReduceOp::Max, "load");
  // Ranks that differ only in b hold copies of the same block: average over distinct blocks.
  g.mean_nnz = all_reduce_value(comm, local_nnz, ReduceOp::Sum, "load") / double(p);

  // Features: layer 0's input rows are in p2 order, split by X; columns split by Y.
  {
    const RandomPermutation& order = layout.col_order(0);
    const int64_t f = meta.num_features, row_block = np / shape.x;
    const int64_t col_block = layout.padded_dim(0) / shape.y;
    std::vector<float> x = reader.read_features(begin, rows);
    if (options.normalize_features)
      for (int64_t i = 0; i < rows; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < f; ++j) sum += x[size_t(i * f + j)];
        if (sum != 0)
          for (int64_t j = 0; j < f; ++j) x[size_t(i * f + j)] = float(x[size_t(i * f + j)] / sum);
      }
    std::vector<std::vector<int64_t>> positions(static_cast<size_t>(p));
    std::vector<std::vector<float>> values(static_cast<size_t>(p));
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t pos = order.inverse(begin + i);
      const GridCoords row_owner = mine.with(Axis::X, int(pos / row_block));
      for (int ky = 0; ky < shape.y; ++ky)
        for (int kz = 0; kz < shape.z; ++kz) {
          const int dest = grid.rank_of(row_owner.with(Axis::Y, ky).with(Axis::Z, kz)) % p;
          positions[size_t(dest)].push_back(pos);
          for (int64_t j = ky * col_block; j < (ky + 1) * col_block; ++j)
            values[size_t(dest)].push_back(j < f ? x[size_t(i * f + j)] : 0.0f);
        }
    }
    const std::vector<int64_t> got_pos = exchange_buckets(comm, positions, "load features");
    const std::vector<float> got_val = exchange_buckets(comm, values, "load features");
    HostMatrix<float> block("features", size_t(row_block), size_t(col_block));
    const int64_t first = mine.x * row_block;
    for (size_t r = 0; r < got_pos.size(); ++r)
      for (int64_t j = 0; j < col_block; ++j)
        block(got_pos[r] - first, j) = got_val[r * size_t(col_block) + size_t(j)];
    g.features = Kokkos::create_mirror_view_and_copy(DeviceSpace(), block);
    g.input_ids = ids_of(order, first, row_block, n);
  }

  // Labels and split bits for the last layer's output rows. Split lists are read in blocks, so each split
  // id first goes to the rank that read that node's label.
  {
    const int last = layout.layers() - 1;
    const AxisRoles roles = roles_for_layer(last);
    const RandomPermutation& order = layout.row_order(last);
    const int64_t row_block = np / shape.extent(roles.c);
    std::vector<uint8_t> bits(static_cast<size_t>(rows), 0);
    const char* names[] = {"train", "valid", "test"};
    for (int s = 0; s < 3; ++s) {
      if (!reader.has_split(names[s])) continue;
      int64_t size = 0;
      for (const SplitInfo& info : reader.splits())
        if (info.name == names[s]) size = info.size;
      const auto [sb, se] = block_range(size, me, p);
      std::vector<std::vector<int64_t>> to_owner(static_cast<size_t>(p));
      for (int64_t id : reader.read_split(names[s], sb, se - sb)) {
        int owner = 0;
        while (block_range(n, owner, p).second <= id) ++owner;
        to_owner[size_t(owner)].push_back(id);
      }
      for (int64_t id : exchange_buckets(comm, to_owner, "load splits"))
        bits[size_t(id - begin)] |= uint8_t(1 << s);
    }
    const std::vector<int64_t> labels = reader.read_labels(begin, rows);
    int64_t local_train = 0;
    std::vector<std::vector<int64_t>> buckets(static_cast<size_t>(p));
    for (int64_t i = 0; i < rows; ++i) {
      local_train += (bits[size_t(i)] & 1) && labels[size_t(i)] >= 0;
      const int64_t pos = order.inverse(begin + i);
      const GridCoords row_owner = mine.with(roles.c, int(pos / row_block));
      for (int ka = 0; ka < shape.extent(roles.a); ++ka)
        for (int kb = 0; kb < shape.extent(roles.b); ++kb) {
          const int dest = grid.rank_of(row_owner.with(roles.a, ka).with(roles.b, kb)) % p;
          buckets[size_t(dest)].insert(buckets[size_t(dest)].end(),
                                       {pos, labels[size_t(i)], int64_t(bits[size_t(i)])});
        }
    }
    g.num_train = all_reduce_value(comm, local_train, ReduceOp::Sum, "load");
    comm.check(g.num_train > 0, file + ": no labeled node in split 'train'");
    const std::vector<int64_t> got = exchange_buckets(comm, buckets, "load labels");
    const int64_t first = mine.get(roles.c) * row_block;
    HostVector<int64_t> y("labels", size_t(row_block));
    HostVector<uint8_t> train("train", size_t(row_block)), valid("valid", size_t(row_block)),
        test("test", size_t(row_block));
    Kokkos::deep_copy(y, int64_t(-1));
    for (size_t k = 0; k < got.size(); k += 3) {
      const int64_t i = got[k] - first;
      y(i) = got[k + 1];
      train(i) = got[k + 2] & 1;
      valid(i) = (got[k + 2] >> 1) & 1;
      test(i) = (got[k + 2] >> 2) & 1;
    }
    g.labels = Kokkos::create_mirror_view_and_copy(DeviceSpace(), y);
    g.train = Kokkos::create_mirror_view_and_copy(DeviceSpace(), train);
    g.valid = Kokkos::create_mirror_view_and_copy(DeviceSpace(), valid);
    g.test = Kokkos::create_mirror_view_and_copy(DeviceSpace(), test);
  }
  for (int l = 0; l < layout.layers(); ++l) {
    const AxisRoles roles = roles_for_layer(l);
    const int64_t row_block = np / shape.extent(roles.c);
    g.output_ids.push_back(ids_of(layout.row_order(l), mine.get(roles.c) * row_block, row_block, n));
  }
  return g;
}

}  // namespace tessera
