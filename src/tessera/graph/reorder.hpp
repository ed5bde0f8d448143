// SPDX-License-Identifier: BSD-3-Clause
// Vertex orderings for locality: a new numbering of a graph's nodes that puts a node's neighbours at nearby
// ids, so that the aggregation's gathers of neighbour rows find them in cache. Orderings are computed
// serially at prep time (`tessera prep reorder`), which writes a new graph file with the adjacency, features,
// labels and splits renumbered and /node/original_id holding each node's id in the input; node outputs
// (predictions, embeddings) of a reordered file are written in the input's order (node_outputs.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/enum_names.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

/// How `tessera prep reorder` numbers the nodes.
enum class NodeOrdering {
  Rcm,     ///< reverse Cuthill-McKee on the symmetrized pattern (breadth-first levels)
  Degree,  ///< by in-degree, largest first (the hubs' rows together), ties by id
  Metis    ///< METIS k-way parts of about `part_nodes` nodes each, one after another, ids ascending inside
};
/// The names of NodeOrdering's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<NodeOrdering> kNodeOrderingNames[] = {
    {NodeOrdering::Rcm, "rcm"},
    {NodeOrdering::Degree, "degree"},
    {NodeOrdering::Metis, "metis"}};
/// rcm or degree or metis: the name of a value.
inline const char* node_ordering_name(NodeOrdering ordering) { return name_of(kNodeOrderingNames, ordering); }

/// A graph's symmetrized pattern: an edge u-v for every stored edge u -> v or v -> u, no self loops, no
/// repeats, each row's neighbours ascending (CSR).
struct NodePattern {
  std::vector<int64_t> indptr;   ///< n + 1 offsets
  std::vector<int64_t> indices;  ///< neighbours
};
/// The symmetrized pattern of a CSR graph (`indptr`: n + 1 offsets, `indices`: the stored sources).
NodePattern symmetric_pattern(const std::vector<int64_t>& indptr, const std::vector<int64_t>& indices);

/// Reverse Cuthill-McKee: each connected component, from a pseudo-peripheral node of least degree (the
/// George-Liu search), numbered breadth-first with each node's new neighbours by ascending degree; the whole
/// order reversed. Returns order[new id] = old id.
std::vector<int64_t> rcm_order(const NodePattern& pattern);
/// Nodes by in-degree (indptr's row lengths), largest first, ties by id. order[new id] = old id.
std::vector<int64_t> degree_order(const std::vector<int64_t>& indptr);
/// Nodes by (part, id). order[new id] = old id.
std::vector<int64_t> order_by_part(const std::vector<int32_t>& part);

/// The fraction of stored edges u -> v with |u - v| <= window: how much of a gather stays near its row.
double edges_within(const std::vector<int64_t>& indptr, const std::vector<int64_t>& indices, int64_t window);

/// What `tessera prep reorder` does.
struct ReorderOptions {
  std::string input;                            ///< a Tessera graph file
  std::string output;                           ///< the reordered file (never the input)
  NodeOrdering ordering = NodeOrdering::Metis;  ///< the numbering
  int64_t part_nodes = 4096;                    ///< Metis: nodes per part
  int64_t window = 1024;                        ///< edges_within's window, for the report
};

/// What a reordering did.
struct ReorderReport {
  GraphMeta meta;                    ///< the written file's attributes
  double within_before = 0;          ///< edges_within(window) in the input's order
  double within_after = 0;           ///< and in the new one
  double order_seconds = 0;          ///< computing the order
  std::vector<std::string> dropped;  ///< the input's /partition/ datasets, not carried over
};

/// Serial: reads and validates the whole input (as `tessera info` does), computes the order and writes the
/// output under a temporary name, renamed when complete. Memory: every array of the input, the renumbered
/// adjacency (8 bytes per stored edge and node) and 64 MiB of renumbered feature rows at a time; rcm up to
/// 32 bytes per stored edge more while it builds the symmetrized pattern, metis METIS's own copy of it. A
/// reordered input gives a file whose original ids are the first input's. Partitions are not carried: a
/// partition of the new file is computed on it (`tessera partition`).
ReorderReport reorder_graph_file(const ReorderOptions& options);

}  // namespace tessera
