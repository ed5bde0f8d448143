// SPDX-License-Identifier: BSD-3-Clause
// Per-node outputs of a trained model, written in global node order by the ranks that hold them (any rows,
// in any order, each node from exactly one rank): a predicted class per node as text, one per line, and a
// row of floats per node (its embedding) as HDF5. Rows first move to the rank whose block of node ids
// they fall in; every rank then writes its own part of the file (MPI-IO for the text, parallel HDF5 for
// the embeddings), so no rank holds every node. Files are written under a temporary name and renamed. A
// reordered graph file (tessera prep reorder) names each node's id in the file it was made from; outputs
// are written in that order (OutputOrder), so they line up with the user's own node numbering.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/comm/communicator.hpp"

namespace tessera {

class GraphFileReader;  // graph/graph_file.hpp

/// This rank's part of the predictions.
struct NodeClasses {
  std::vector<int64_t> nodes;    ///< node ids
  std::vector<int64_t> classes;  ///< predicted class of each
};

/// This rank's part of an embedding table: rows of `cols` values from global column `col_begin` on.
struct NodeRowBlock {
  std::vector<int64_t> nodes;  ///< node id of each row
  int64_t col_begin = 0;       ///< global column of local column 0
  int64_t cols = 0;            ///< values per row here (columns past the table's width are dropped)
  std::vector<float> values;   ///< nodes.size() x cols, row-major
};

/// The rows of a table whose node ids fall in this rank's block of ids (block_range), whole.
struct BlockRows {
  int64_t begin = 0;             ///< the block's first node id
  int64_t width = 0;             ///< columns
  std::vector<float> values;     ///< every node of the block x width, row-major (zeros where none came)
  std::vector<uint8_t> present;  ///< per node of the block: some rank sent its row
};

/// Collective: assembles the rows every rank holds (each (node, column) from one rank; a node's columns
/// may come in pieces from several, as a 3D grid splits them) at the rank whose block holds the node.
BlockRows assemble_block_rows(const Communicator& comm, int64_t num_nodes, int64_t width,
                              const NodeRowBlock& mine);

/// Node outputs kept in memory (TrainOptions::keep_node_outputs): this rank's block of node ids
/// (block_range over the run's ranks), in the order a file would hold them.
struct NodeOutputArrays {
  int64_t begin = 0;              ///< the block's first node id
  std::vector<int64_t> classes;   ///< the predicted class of each node of the block (-1: no rank sent one)
  int64_t width = 0;              ///< embedding columns
  std::vector<float> embeddings;  ///< every node of the block x width, row-major (zeros where none came)
};

/// Where per-node outputs go (an empty path: not written; no `arrays`: not kept).
struct NodeOutputPaths {
  std::string predictions;             ///< text, one predicted class per node
  std::string embeddings;              ///< HDF5 /embeddings [nodes, width]: the last hidden representation
  std::string graph;                   ///< the graph file: a reordered one's outputs go in its original order
  NodeOutputArrays* arrays = nullptr;  ///< also kept here, this rank's block
  /// A link task: no class per node, and the embeddings are the model's output (what pairs are scored by).
  bool link_task = false;
  /// Whether predictions are written or kept.
  bool want_predictions() const { return !link_task && (!predictions.empty() || arrays != nullptr); }
  /// Whether embeddings are written or kept.
  bool want_embeddings() const { return !embeddings.empty() || arrays != nullptr; }
};

/// The order a graph file's node outputs are written in: its own node ids, or, for a reordered file, the ids
/// its nodes had in the file it was made from (/node/original_id).
struct OutputOrder {
  bool reordered = false;    ///< the file has /node/original_id (the same on every rank)
  int64_t num_nodes = 0;     ///< the graph's nodes
  std::vector<int64_t> ids;  ///< reordered: the original id of each node of this rank's block (block_range)
};
/// Collective: the order of the graph file `path`, this rank's block of it (an empty path: the file's own
/// order, nothing read).
OutputOrder read_output_order(const Communicator& comm, const std::string& path);
/// The same from an open reader.
OutputOrder read_output_order(const GraphFileReader& reader, const Communicator& comm);

/// Collective: `rows` (this rank's block of the file's node ids) moved to the blocks of the nodes' ids in
/// `order`; returned as they are when the file is not reordered.
BlockRows to_output_order(const Communicator& comm, const BlockRows& rows, const OutputOrder& order);

/// Collective: where this rank's `mine` items start when every rank's are laid out in rank order, and the
/// total over the ranks.
std::pair<int64_t, int64_t> offset_in_rank_order(const Communicator& comm, int64_t mine);

/// Collective: `path` gets every rank's `text` in rank order (MPI-IO, under a temporary name, renamed when
/// complete); `what` names it in errors ("predictions").
void write_text_in_rank_order(const Communicator& comm, const std::string& path, const std::string& text,
                              const std::string& what);

/// Collective: an HDF5 file made by `fill` (collective, given the open file's HDF5 identifier, a hid_t)
/// under a temporary name and renamed when complete; nothing is left behind when `fill` throws. `what` names
/// it in errors. (The identifier is passed as int64_t so that this header needs no <hdf5.h>.)
void write_hdf5_output(const Communicator& comm, const std::string& path, const std::string& what,
                       const std::function<void(int64_t file)>& fill);

/// Collective: `path` gets the HDF5 dataset /embeddings, float32 [num_nodes, width] (zeros where no rank sent
/// a value) in `order`, with root attributes format = "tessera-embeddings", model = `model`, epoch = `epoch`.
void write_embeddings(const Communicator& comm, const std::string& path, int64_t num_nodes, int64_t width,
                      const NodeRowBlock& mine, const std::string& model, int64_t epoch,
                      const OutputOrder& order = {});

/// Collective: the predictions every rank holds (`mine`) written to paths.predictions and kept in
/// paths.arrays, as far as each is asked for.
void output_predictions(const Communicator& comm, const NodeOutputPaths& paths, int64_t num_nodes,
                        const NodeClasses& mine, const OutputOrder& order);
/// Collective: the embeddings every rank holds written to paths.embeddings (write_embeddings) and kept in
/// paths.arrays, as far as each is asked for.
void output_embeddings(const Communicator& comm, const NodeOutputPaths& paths, int64_t num_nodes,
                       int64_t width, const NodeRowBlock& mine, const std::string& model, int64_t epoch,
                       const OutputOrder& order);

}  // namespace tessera
