// SPDX-License-Identifier: BSD-3-Clause
// Converts an OGB node-property dataset in its raw directory layout (what the OGB loaders download:
// raw/edge.csv.gz, raw/node-feat.csv.gz, raw/node-label.csv.gz, raw/num-{node,edge}-list.csv.gz,
// split/<kind>/{train,valid,test}.csv.gz; or raw/data.npz + raw/node-label.npz as for papers100M) into
// a Tessera graph file. Memory stays O(N) plus a budget for edges: larger graphs take several passes.
// ogbn-proteins' layout converts too: a node-label.csv.gz of several 0/1 columns is a multi-label graph
// (one task per column), and without node-feat.csv.gz each node's features are the mean of its edges'
// raw/edge-feat.csv.gz rows (over its in-edges, or every incident edge when symmetrizing), as OGB's
// proteins examples make them.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/comm/communicator.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

/// What `tessera prep ogb` converts.
struct OgbConvertOptions {
  std::string dataset_dir;  ///< the OGB raw layout (raw/, split/)
  std::string output;       ///< the graph file to write
  bool symmetrize = false;  ///< add the reverse of every edge and drop duplicates (as OGB's arxiv baselines)
  std::string split;        ///< the split directory under split/; empty: the only one present
  std::string name;         ///< empty: the directory's name
  int64_t edge_memory_bytes = int64_t(2) << 30;    ///< budget for the edge bucket of one pass
  StorageDtype feature_dtype = StorageDtype::F32;  ///< how the file stores the node features
};

/// Runs on one process (pass a communicator of size one, e.g. MPI_COMM_SELF). Throws Error naming the
/// file, line and problem; on error no output file is left behind.
GraphMeta convert_ogb(const OgbConvertOptions& options, const Communicator& self);

}  // namespace tessera
