// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the loading phases of build_graph_3d, one file each side of the rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/parallel3d/graph3d.hpp"

namespace tessera::impl {

/// The first problem of this rank's rows, or "" (no communication).
std::string check_rows(const GraphRows& rows);
/// Collective: check_rows on every rank, then that the blocks tile [0, num_nodes) in rank order.
void validate_rows(const GraphRows& rows, const Communicator& comm);

/// The degrees the weights need, where they are: this rank's rows' (in-neighbours other than the row's own
/// node, plus one self loop for Symmetric; the in-degree as listed for Sum) and every rank's
/// first row, so that a block's builder can ask the reader of any row.
struct RowDegrees {
  std::vector<int64_t> local;       ///< one per row of this rank
  std::vector<int64_t> row_begins;  ///< every rank's first row in replica order, then num_nodes
};

/// This rank's rows cut into rounds of consecutive rows whose bytes stay within a budget, so that an
/// exchange's buffers are bounded whatever the graph's size (a row that alone exceeds the budget is a round
/// of its own). Collective over the replica: every rank runs as many rounds as the rank that needs most, so
/// every rank enters every round's exchange; the rounds past a rank's own are empty.
class RowRounds {
 public:
  /// `row_bytes(i)`: what row i adds to a round's buffers; budget 0: one round.
  RowRounds(const Communicator& comm, int64_t rows, int64_t budget,
            const std::function<double(int64_t)>& row_bytes);
  /// Rounds every rank runs.
  int count() const { return count_; }
  /// First row of round k (the end of the rows past this rank's rounds).
  int64_t begin(int k) const { return begins_[std::min(size_t(k), begins_.size() - 1)]; }
  /// One past its last row.
  int64_t end(int k) const { return begins_[std::min(size_t(k) + 1, begins_.size() - 1)]; }

 private:
  std::vector<int64_t> begins_;  // this rank's rounds + 1 row offsets
  int count_ = 1;
};

/// Collective over the grid's replica: layout t's block of the normalized adjacency and, when
/// `with_transpose`, its transpose (adjacency3d.cpp). The entries leave this rank in rounds of at most
/// about `budget` bytes (0: one round); the block's rounds are `rounds` on return.
AdjacencyBlock distribute_adjacency(const GraphRows& rows, const RowDegrees& degrees,
                                    Normalization normalization, const ProcessGrid& grid,
                                    const NodeLayout& layout, int t, bool with_transpose, int64_t budget,
                                    int* rounds);

/// On a replica of one rank (1x1x1) every layout's block is the whole matrix in its layer's row and column
/// orders, so layouts whose orders agree hold the same block: the first such layout before t, or -1 (always
/// -1 on larger replicas, where the rotation of the roles gives every layout blocks of its own). The same on
/// every rank: it depends on the grid's shape and the permutation mode only.
int identical_layout(const NodeLayout& layout, int t);

/// On a replica of one rank, for a block built with its transpose: when layout t's orders are an earlier
/// layout's swapped (or its own, with one order) and its matrices equal that layout's transposed to the bit
/// (the normalized adjacency is symmetric), layout t's two matrices become views of those and its own
/// copies are freed. Returns whether it shared. Needs no communication (the replica is this rank).
bool share_transposed(const NodeLayout& layout, int t, std::vector<AdjacencyBlock>& blocks);

}  // namespace tessera::impl
