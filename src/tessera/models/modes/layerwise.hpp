// SPDX-License-Identifier: BSD-3-Clause
// Exact layer-wise inference on a partitioned graph (docs/guide/inference.md): the model's graph layers run
// one after another over every node, each rank computing its own nodes' rows. Before graph layer l a rank
// fetches the rows of layer l's input that its halo needs from their owners, once (the same exchange the
// sampled mode's feature fetch uses), then runs the layer's stage (Sequential::forward_stage) on one block:
// its owned nodes as destinations, owned then halo nodes as sources, every in-neighbour kept. Nothing is
// sampled, so the result is the full-graph forward of the same weights up to float summation order, and
// memory per rank is O((owned + halo) x width) whatever the depth, where the per-seed expansion of
// `--fanouts -1` grows with the L-hop neighbourhood.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/graph/normalize.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/models/nn/sequential.hpp"

namespace tessera {

/// What a layer-wise inference keeps besides the logits.
struct LayerwiseOptions {
  /// Also keep the representation after this many graph layers (0: the input features, as the model sees
  /// them; graph_layers(): the logits again); -1: none.
  int keep_layer = -1;
  /// One log line per graph layer (rank 0): its seconds and the halo rows fetched.
  bool progress = true;
};

/// What one rank computed: rows of its owned nodes (graph.first + i at row i), row-major.
struct LayerwiseResult {
  int64_t classes = 0;        ///< columns of logits
  std::vector<float> logits;  ///< graph.count x classes
  int64_t kept_width = 0;     ///< columns of kept
  std::vector<float> kept;    ///< graph.count x kept_width (LayerwiseOptions::keep_layer), else empty
  int64_t halo_rows = 0;      ///< rows fetched over all layers, summed over ranks
  double seconds = 0;         ///< the whole inference
};

/// Collective over `world` (one rank per part; the model on the P x 1 x 1 x 1 grid over it, as the sampled
/// mode builds it): every owned node's logits from an evaluation forward of `model`, graph layer by graph
/// layer, the block weights of `normalization` (the model's: block_operator, every neighbour kept).
LayerwiseResult layerwise_inference(Sequential& model, const PartitionedGraph& graph,
                                    const Communicator& world, Normalization normalization,
                                    const LayerwiseOptions& options = {});

/// The bytes a rank needs for layerwise_inference beyond the graph and the model: the widest layer's
/// (owned + halo) input rows on the host and the device, its output rows, and the block.
int64_t layerwise_bytes(const PartitionedGraph& graph, const Sequential& model);

}  // namespace tessera
