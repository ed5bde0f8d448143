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

/// The degrees the weights need, where they are: this rank's rows' (in-degree plus the self loop GCN adds
/// for Symmetric; in-neighbours other than the row's own node for Mean; none for Sum) and every rank's
/// first row, so that a block's builder can ask the reader of any row.
struct RowDegrees {
  std::vector<int64_t> local;       ///< one per row of this rank
  std::vector<int64_t> row_begins;  ///< every rank's first row in replica order, then num_nodes
};

/// Collective over the grid's replica: layout t's block of the normalized adjacency and, when
/// `with_transpose`, its transpose (adjacency3d.cpp).
AdjacencyBlock distribute_adjacency(const GraphRows& rows, const RowDegrees& degrees,
                                    Normalization normalization, const ProcessGrid& grid,
                                    const NodeLayout& layout, int t, bool with_transpose);

}  // namespace tessera::impl
