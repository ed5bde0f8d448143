// SPDX-License-Identifier: BSD-3-Clause
// Synthetic graphs, generated in parallel and deterministically: every value is a pure function of the
// seed (counter-based RNG), so the same options give the same file on any number of ranks.
//   R-MAT  (Chakrabarti et al.; a,b,c = 0.57,0.19,0.19 as Graph500): power-law structure, random normal
//          features and degree-bucket labels, as the Plexus paper does for feature-less graphs.
//   CSBM   contextual stochastic block model: classes are blocks, a fraction of each node's edges stays
//          inside its block, features are the class mean plus noise, so a GCN can learn the labels.
// Both are undirected: every edge is stored in both directions, self loops and duplicates removed. With
// `tasks`, the graph is multi-label: each class (block or degree bucket) leans towards half of the tasks,
// whose labels its nodes draw positive with probability 0.85 (the others 0.15).
#pragma once

#include <cstdint>
#include <string>

#include "tessera/comm/communicator.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

/// Which generator.
enum class SynthKind {
  Rmat,  ///< R-MAT: skewed degrees, random features, degree-bucket labels
  Csbm   ///< contextual stochastic block model: learnable labels
};

/// A generated graph's shape.
struct SynthOptions {
  SynthKind kind = SynthKind::Csbm;  ///< the generator
  int64_t num_nodes = 10000;         ///< nodes
  int64_t num_edges = 50000;         ///< undirected edges drawn (before removing duplicates and self loops)
  int64_t num_features = 32;         ///< feature columns
  int64_t num_classes = 8;           ///< label classes (CSBM: blocks)
  /// > 0: a multi-label graph of that many binary tasks correlated with the classes (GraphMeta::multi_label)
  int64_t tasks = 0;
  double unobserved_fraction = 0;  ///< multi-label: share of label entries stored unobserved (-1)
  uint64_t seed = 1;               ///< the same seed gives the same file on any rank count
  double rmat_a = 0.57;            ///< R-MAT quadrant probabilities (the fourth is 1 - a - b - c)
  double rmat_b = 0.19;            ///< see rmat_a
  double rmat_c = 0.19;            ///< see rmat_a
  double intra_class = 0.8;        ///< CSBM: fraction of edges inside the class
  /// CSBM: class-mean scale relative to unit noise (0.1: a 2-layer GCN reaches ~89% on the default graph,
  /// features alone ~55%).
  double feature_signal = 0.1;
  double train_fraction = 0.1;                     ///< nodes in the training split
  double valid_fraction = 0.1;                     ///< nodes in the validation split (the rest are test)
  std::string name;                                ///< empty: a name from kind and seed
  StorageDtype feature_dtype = StorageDtype::F32;  ///< how the file stores the features
};

/// Collective: generates the graph and writes it to `output` (atomically). Returns its metadata.
GraphMeta generate_synthetic(const SynthOptions& options, const std::string& output,
                             const Communicator& comm);

/// The endpoints of generated undirected edge e (before self-loop removal); exposed for tests.
std::pair<int64_t, int64_t> synthetic_edge(const SynthOptions& options, int64_t e);
/// Class of node v in a CSBM graph.
int64_t csbm_class(const SynthOptions& options, int64_t v);
/// Multi-label graphs: the label (1, 0, or -1 unobserved) of task t for a node of class `cls`, node v.
int8_t synthetic_task_label(const SynthOptions& options, int64_t cls, int64_t v, int64_t t);

}  // namespace tessera
