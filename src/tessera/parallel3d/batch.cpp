// SPDX-License-Identifier: BSD-3-Clause
// Views of a Graph3D for the layers: the full graph's batch, the self blocks and the node data.
#include "tessera/core/error.hpp"
#include "tessera/parallel3d/graph3d.hpp"

namespace tessera {

bool NodeData::has_mask(const std::string& name) const {
  for (const auto& [mask_name, mask] : masks)
    if (mask_name == name) return true;
  return false;
}

const Vector<uint8_t>& NodeData::mask(const std::string& name) const {
  std::string names;
  for (const auto& [mask_name, mask] : masks) {
    if (mask_name == name) return mask;
    names += (names.empty() ? "" : ", ") + mask_name;
  }
  throw Error("no node mask named '" + name + "' (the graph has " + (names.empty() ? "none" : names) + ")");
}

namespace {

void require_serves(const Graph3D& g, int depth) {
  require(g.serves(depth), "the graph serves models of at most ", g.layers, " graph layers, not ", depth,
          " (Graph3DOptions::layers; 0 serves any depth)");
}

}  // namespace

const NodeData& Graph3D::node_data_for(int depth) const {
  require_serves(*this, depth);
  return node_data[size_t((depth - 1) % 6)];
}

int64_t Graph3D::valid_rows(int layer) const {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), output_ids[size_t(layer % 6)]);
  int64_t count = 0;
  while (count < int64_t(host.extent(0)) && host(count) >= 0) ++count;
  return count;
}

AdjacencyBlock self_block(const NodeLayout& layout, const GridCoords& coords, int layer) {
  const AxisRoles roles = roles_for_layer(layer);
  const auto [row_begin, row_end] = layout.node_block(roles.c, coords.get(roles.c));
  const auto [col_begin, col_end] = layout.node_block(roles.a, coords.get(roles.a));
  CsrMatrix<float, HostSpace> a;
  a.num_rows = row_end - row_begin;
  a.num_cols = col_end - col_begin;
  a.row_ptr = HostVector<int64_t>("self.row_ptr", size_t(a.num_rows + 1));
  std::vector<int64_t> cols;
  for (int64_t i = 0; i < a.num_rows; ++i) {
    const int64_t pos = row_begin + i;
    if (pos < layout.num_nodes()) {
      // Node v sits at row position pos in the output order and column position j in the input order.
      const int64_t j = layout.col_order(layer).inverse(layout.row_order(layer)(pos));
      if (j >= col_begin && j < col_end) cols.push_back(j - col_begin);
    }
    a.row_ptr(i + 1) = int64_t(cols.size());
  }
  a.col_idx = HostVector<int64_t>("self.col_idx", cols.size());
  for (size_t k = 0; k < cols.size(); ++k) a.col_idx(k) = cols[k];
  AdjacencyBlock block;
  block.nnz = a.nnz();
  block.forward = CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a));
  block.transpose = CsrSpmm<float>(csr_to_space<float, DeviceSpace>(csr_transpose(a)));
  return block;
}

GraphBatch full_graph_batch(const Graph3D& g, const BatchNeeds& needs) {
  require_serves(g, needs.layers);
  GraphBatch batch;
  const auto ids = Kokkos::create_mirror_view_and_copy(HostSpace(), g.input_ids);
  int64_t valid = 0;
  while (valid < int64_t(ids.extent(0)) && ids(valid) >= 0) ++valid;
  batch.input = LayerGraph{nullptr, nullptr, g.input_ids, valid, g.layout.num_nodes(), true};
  for (int l = 0; l < needs.layers; ++l) {
    const AdjacencyBlock* self = nullptr;
    if (needs.self_blocks) {
      batch.blocks.push_back(std::make_unique<AdjacencyBlock>(self_block(g.layout, g.coords, l)));
      self = batch.blocks.back().get();
    }
    batch.layers.push_back(LayerGraph{&g.adjacency[size_t(l % 6)], self, g.output_ids[size_t(l % 6)],
                                      g.valid_rows(l), g.layout.num_nodes(), true});
  }
  return batch;
}

}  // namespace tessera
