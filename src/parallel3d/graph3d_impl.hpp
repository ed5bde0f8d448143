// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the loading phases of build_graph_3d, one file each side of the rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/parallel3d/graph3d.hpp"

namespace tessera::impl {

/// The first problem of this rank's rows, or "" (no communication).
std::string check_rows(const GraphRows& rows);
/// Collective: check_rows on every rank, then that the blocks tile [0, num_nodes) in rank order.
void validate_rows(const GraphRows& rows, const Communicator& comm);

/// Whether row i of `rows` lists its own node among its in-neighbours.
bool has_self_loop(const GraphRows& rows, int64_t i);

/// Collective over the grid's replica: layout t's block of the normalized adjacency (weights from `degree`:
/// every node's for Symmetric, this rank's rows' for Mean) and its transpose (adjacency3d.cpp).
AdjacencyBlock distribute_adjacency(const GraphRows& rows, const std::vector<int64_t>& degree,
                                    Normalization normalization, const ProcessGrid& grid,
                                    const NodeLayout& layout, int t);

}  // namespace tessera::impl
