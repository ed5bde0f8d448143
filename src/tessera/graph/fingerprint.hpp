// SPDX-License-Identifier: BSD-3-Clause
// A graph file's identity for checkpoints: its sizes, splits and a fingerprint of its content, so a resume on
// another graph of the same dimensions is caught. The fingerprint hashes the metadata and 64 evenly spaced
// rows (feature row, label, in-edge offsets and up to 8 in-edges each) plus each split's ends: it reads a few
// hundred small pieces whatever the graph's size, and does not depend on how HDF5 laid the file out, so a
// file converted again from the same data keeps it. It tells different graphs apart; an edit of a few values
// in place can go unseen.
#pragma once

#include <map>
#include <string>

#include "tessera/comm/communicator.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

/// What a checkpoint records of the graph it was trained on.
struct GraphIdentity {
  GraphMeta meta;                         ///< sizes and name
  std::map<std::string, int64_t> splits;  ///< size of each split
  std::string fingerprint;                ///< 16 hex digits
};

/// Collective: rank 0 reads `path` (schema checked as GraphFileReader does) and every rank gets the result.
GraphIdentity graph_identity(const Communicator& comm, const std::string& path);

}  // namespace tessera
