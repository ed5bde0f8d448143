// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the loading phases of build_graph_3d, one file each side of the rows.
#pragma once

#include <string>

#include "tessera/comm/communicator.hpp"
#include "tessera/parallel3d/graph3d.hpp"

namespace tessera::impl {

/// The first problem of this rank's rows, or "" (no communication).
std::string check_rows(const GraphRows& rows);
/// Collective: check_rows on every rank, then that the blocks tile [0, num_nodes) in rank order.
void validate_rows(const GraphRows& rows, const Communicator& comm);

}  // namespace tessera::impl
