// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/minibatch.hpp"

#include "tessera/core/error.hpp"

namespace tessera {

namespace {

template <class T>
Vector<T> to_device(const std::vector<T>& v, const char* name) {
  Vector<T> out(std::string(name), v.size());
  const auto host = Kokkos::create_mirror_view(out);
  for (size_t k = 0; k < v.size(); ++k) host(k) = v[k];
  Kokkos::deep_copy(out, host);
  return out;
}

// Rows `index` of a device vector / matrix, in order.
template <class T>
Vector<T> gather(const Vector<T>& v, const Vector<const int64_t>& index) {
  Vector<T> out("gathered", index.extent(0));
  Kokkos::parallel_for(
      "tessera::gather_rows", Kokkos::RangePolicy<ExecSpace>(0, int64_t(index.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { out(i) = v(index(i)); });
  return out;
}

}  // namespace

CsrMatrix<float, DeviceSpace> upload_csr(const HostCsr& a) {
  CsrMatrix<float, DeviceSpace> m;
  m.num_rows = a.num_rows;
  m.num_cols = a.num_cols;
  m.row_ptr = to_device(a.row_ptr, "sample_row_ptr");
  m.col_idx = to_device(a.col_idx, "sample_col_idx");
  m.values = to_device(a.values, "sample_values");
  return m;
}

MinibatchBuilder::MinibatchBuilder(const ProcessGrid& grid, const Graph3D& graph, int64_t batch_size)
    : graph_(graph), batch_size_(batch_size) {
  const Layout3D& layout = graph.layout;
  const int64_t n = layout.num_nodes();
  require(batch_size >= 2 && batch_size <= n, "--batch-size ", batch_size, " must be between 2 and the ", n,
          " nodes");
  scale_ = float(1.0 / pair_inclusion_probability(n, batch_size));
  for (int l = 0; l < layout.layers(); ++l) {
    const AxisRoles r = roles_for_layer(l);
    row_range_.push_back(layout.node_block(r.c, grid.coords().get(r.c)));
    col_range_.push_back(layout.node_block(r.a, grid.coords().get(r.a)));
    const CsrMatrix<float, DeviceSpace>& a = graph.adjacency[size_t(l % 6)].forward.matrix();
    blocks_.push_back({Kokkos::create_mirror_view_and_copy(HostSpace(), a.row_ptr),
                       Kokkos::create_mirror_view_and_copy(HostSpace(), a.col_idx),
                       Kokkos::create_mirror_view_and_copy(HostSpace(), a.values)});
    require(!a.is_pattern(), "mini-batch sampling needs a valued adjacency block");
    const auto ids = Kokkos::create_mirror_view_and_copy(
        HostSpace(), l == 0 ? graph.input_ids : graph.output_ids[size_t(l - 1)]);
    col_ids_.emplace_back(ids.data(), ids.data() + ids.extent(0));
  }
}

HostBatch MinibatchBuilder::build(const SampleKey& key) const {
  const Layout3D& layout = graph_.layout;
  HostBatch b;
  const std::vector<int64_t> sample = uniform_vertex_sample(layout.num_nodes(), batch_size_, key);
  // Every layer orders its rows and columns by p1 or p2: each sample vertex's two positions, computed once.
  std::vector<int64_t> in_p1(sample.size()), in_p2(sample.size());
  for (size_t k = 0; k < sample.size(); ++k) {
    in_p1[k] = layout.p1().inverse(sample[k]);
    in_p2[k] = layout.p2().inverse(sample[k]);
  }
  for (int l = 0; l < layout.layers(); ++l) {
    // Layer l's rows are in row_order(l) = p1 on even layers, p2 on odd ones; its columns in the other.
    const std::vector<int64_t>& row_pos = l % 2 == 0 ? in_p1 : in_p2;
    const std::vector<int64_t>& col_pos = l % 2 == 0 ? in_p2 : in_p1;
    const auto [r0, r1] = row_range_[size_t(l)];
    const auto [c0, c1] = col_range_[size_t(l)];
    b.rows.push_back(sampled_positions(sample, row_pos, r0, r1));
    b.cols.push_back(sampled_positions(sample, col_pos, c0, c1));
    const HostBlock& a = blocks_[size_t(l)];
    std::vector<int64_t> slot(col_ids_[size_t(l)].size(), -1);
    b.forward.push_back(induced_block(a.row_ptr.data(), a.col_idx.data(), a.values.data(), b.rows.back(),
                                      b.cols.back(), col_ids_[size_t(l)], scale_, slot));
    b.transpose.push_back(transpose(b.forward.back()));
  }
  return b;
}

DeviceBatch MinibatchBuilder::upload(const HostBatch& b) const {
  DeviceBatch d;
  const int layers = graph_.layout.layers();
  for (int l = 0; l < layers; ++l) {
    auto block = std::make_unique<AdjacencyBlock>();
    block->forward = CsrSpmm<float>(upload_csr(b.forward[size_t(l)]));
    block->transpose = CsrSpmm<float>(upload_csr(b.transpose[size_t(l)]));
    block->nnz = int64_t(b.forward[size_t(l)].col_idx.size());
    const int64_t rows = int64_t(b.rows[size_t(l)].local.size());
    d.views.push_back(LayerGraph{block.get(), to_device(b.rows[size_t(l)].ids, "sample_output_ids"), rows,
                                 batch_size_, false});
    d.blocks.push_back(std::move(block));
  }
  const Vector<const int64_t> in_rows = to_device(b.cols[0].local, "sample_input_rows");
  const Matrix<const float> features = graph_.features;
  d.input = Matrix<float>("sample_input", in_rows.extent(0), features.extent(1));
  const Matrix<float> input = d.input;
  Kokkos::parallel_for(
      "tessera::gather_features", Kokkos::RangePolicy<ExecSpace>(0, int64_t(in_rows.extent(0))),
      KOKKOS_LAMBDA(int64_t i) {
        for (size_t j = 0; j < input.extent(1); ++j) input(i, j) = features(in_rows(i), j);
      });
  d.input_ids = to_device(b.cols[0].ids, "sample_input_ids");
  const Vector<const int64_t> out_rows = to_device(b.rows[size_t(layers - 1)].local, "sample_label_rows");
  d.labels = gather(graph_.labels, out_rows);
  d.train = gather(graph_.train, out_rows);
  Kokkos::fence();
  return d;
}

}  // namespace tessera
