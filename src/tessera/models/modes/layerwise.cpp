// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/modes/layerwise.hpp"

#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/models/modes/minibatch.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/prefetch/remote_features.hpp"
#include "tessera/sampling/neighbor.hpp"

namespace tessera {

namespace {

// The one block every graph layer runs on: the owned nodes and every in-neighbour of theirs. The sampler
// with fanout -1 builds it (its own nodes, no remote frontier), with the source degrees the weights need.
SampledBlock whole_neighbourhood(const PartitionedGraph& g, const Communicator& world) {
  std::vector<int64_t> owned(size_t(g.count));
  for (int64_t i = 0; i < g.count; ++i) owned[size_t(i)] = g.first + i;
  const NeighborSampler sampler(world, g, {-1}, 0);
  return sampler.sample(owned, 0, 0).front();
}

// The views of that block for every graph layer (they all run on it), with self blocks where the model
// has a root term. The blocks live in `views`.
GraphBatch block_views(const SampledBlock& block, Normalization normalization, bool self_blocks, int layers) {
  GraphBatch views;
  auto adjacency = std::make_unique<AdjacencyBlock>();
  const HostCsr op = block_operator(block, normalization);
  adjacency->forward = CsrSpmm<float>(upload_csr(op));
  adjacency->nnz = int64_t(op.col_idx.size());
  adjacency->has_transpose = false;
  views.blocks.push_back(std::move(adjacency));
  const AdjacencyBlock* self = nullptr;
  if (self_blocks) {
    auto b = std::make_unique<AdjacencyBlock>();
    b->forward = CsrSpmm<float>(upload_csr(leading_identity(block.num_dst, int64_t(block.src.size()))));
    b->nnz = block.num_dst;
    b->has_transpose = false;
    views.blocks.push_back(std::move(b));
    self = views.blocks.back().get();
  }
  const std::vector<int64_t> dst(block.src.begin(), block.src.begin() + block.num_dst);
  const LayerGraph layer{views.blocks.front().get(),
                         self,
                         upload_vector(dst, "layerwise.dst"),
                         block.num_dst,
                         block.num_dst,
                         false};
  views.layers.assign(size_t(layers), layer);
  const int64_t sources = int64_t(block.src.size());
  views.input =
      LayerGraph{nullptr, nullptr, upload_vector(block.src, "layerwise.src"), sources, sources, false};
  return views;
}

// The gathered rows as a stage's input: read in place on a host build (no second copy of the widest
// array), a device copy otherwise (kept in `device`).
Matrix<const float> stage_input(std::vector<float>& x, size_t rows, size_t width, Matrix<float>& device) {
  const HostMatrix<float> host(x.data(), rows, width);
  if constexpr (std::is_same<DeviceSpace, HostSpace>::value) {
    return host;
  } else {
    device = Matrix<float>(Kokkos::ViewAllocateWithoutInitializing("layerwise.input"), rows, width);
    Kokkos::deep_copy(device, host);
    x = std::vector<float>();  // the host copy goes before the layer's output is made
    return device;
  }
}

// The first `width` columns of a device block's rows, on the host.
std::vector<float> host_rows(const Matrix<const float>& m, int64_t rows, int64_t width) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), m);
  std::vector<float> out(size_t(rows * width));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < width; ++j) out[size_t(i * width + j)] = host(size_t(i), size_t(j));
  return out;
}

}  // namespace

LayerwiseResult layerwise_inference(Sequential& model, const PartitionedGraph& g, const Communicator& world,
                                    Normalization normalization, const LayerwiseOptions& o) {
  Stopwatch watch;
  LayerwiseResult result;
  const int layers = model.graph_layers();
  const SampledBlock block = whole_neighbourhood(g, world);
  GraphBatch views = block_views(block, normalization, model.needs_self_blocks(), layers);
  const size_t sources = block.src.size();
  // The representation after l graph layers, owned rows (l = 0: the features, which the graph holds).
  std::vector<float> h;
  OwnedRows rows = feature_rows(g);  // in the dtype the graph holds them
  int64_t width = g.num_features;
  if (o.keep_layer == 0) result.kept = owned_features_f32(g), result.kept_width = width;
  for (int l = 0; l < layers; ++l) {
    Stopwatch layer_watch;
    const RemoteFeatures fetch(world, g, rows);
    FetchStats stats;
    std::vector<float> x = fetch.gather(block.src, nullptr, false, stats);
    Matrix<float> device;
    const Matrix<const float> input = stage_input(x, sources, size_t(width), device);
    views.scratch_input = input.data();
    const Matrix<const float> out = model.forward_stage(l, input, views, PassInfo{false, 0, 0});
    width = model.graph_layer_input_layout(l + 1).width;
    h = host_rows(out, g.count, width);
    rows = OwnedRows{h.data(), width};
    if (o.keep_layer == l + 1) result.kept = h, result.kept_width = width;
    const int64_t fetched = all_reduce_value(world, stats.fetched_rows, ReduceOp::Sum, "layerwise");
    result.halo_rows += fetched;
    if (o.progress) {
      char line[160];
      std::snprintf(line, sizeof(line), "layer-wise inference: graph layer %d of %d, %.2f s, %lld halo rows",
                    l + 1, layers, layer_watch.seconds(), (long long)fetched);
      log_line(line);
    }
  }
  result.classes = width;
  result.logits = std::move(h);
  result.seconds = watch.seconds();
  return result;
}

int64_t layerwise_bytes(const PartitionedGraph& g, const Sequential& model) {
  int64_t widest = g.num_features;
  for (int l = 1; l <= model.graph_layers(); ++l)
    widest = std::max(widest, model.graph_layer_input_layout(l).width);
  const int64_t sources = g.count + int64_t(g.halo.size());
  const int64_t edges = int64_t(g.col.size()) + g.count;
  return 4 * widest * (2 * sources + 2 * g.count) + 16 * edges;
}

}  // namespace tessera
