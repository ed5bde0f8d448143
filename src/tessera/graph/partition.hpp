// SPDX-License-Identifier: BSD-3-Clause
// Graph partitions for partition-parallel training (docs/architecture.md §6): one part per rank, computed once by
// `tessera partition` (METIS k-way, balanced by nodes, training nodes and edges, or a random balanced split)
// and stored in the graph file as /partition/<name> (int32 part per node, attributes parts, method,
// edge_cut). At load nodes are renumbered by (part, file id), so part r owns the contiguous new ids
// [begin[r], begin[r + 1]) and an owner lookup is a binary search.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/enum_names.hpp"

namespace tessera {

/// How nodes are assigned to parts.
enum class PartitionMethod {
  Metis,  ///< METIS k-way, balanced by nodes, training nodes and in-edges
  Random  ///< a seeded random permutation cut into equal pieces
};
/// The names of PartitionMethod's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<PartitionMethod> kPartitionMethodNames[] = {
    {PartitionMethod::Metis, "metis"},
    {PartitionMethod::Random, "random"}};
/// metis or random: the name of a value.
inline const char* partition_method_name(PartitionMethod method) { return name_of(kPartitionMethodNames, method); }

/// How good a partition is.
struct PartitionReport {
  int64_t parts = 0;         ///< parts
  int64_t cut_edges = 0;     ///< stored (directed) edges whose ends lie in different parts
  int64_t edges = 0;         ///< all stored edges
  double node_balance = 0;   ///< largest part's nodes / mean
  double train_balance = 0;  ///< largest part's training nodes / mean (0 without a train split)
  double edge_balance = 0;   ///< largest part's stored in-edges / mean (0 without edges)
};

/// Part of every node: METIS on the symmetrized graph without self loops (balance constraints on nodes,
/// training nodes when the file has a train split, and stored in-edges), or a seeded random permutation cut
/// into equal pieces. Serial; reads the whole graph. Throws Error naming the file on impossible requests
/// (parts < 1 or > nodes, a graph too large for METIS's 32-bit indices).
std::vector<int32_t> compute_partition(const std::string& path, int64_t parts, PartitionMethod method,
                                       uint64_t seed);

/// Edge cut and balance of `part` on the graph in `path`. Serial.
PartitionReport evaluate_partition(const std::string& path, const std::vector<int32_t>& part, int64_t parts);

/// Writes /partition/NAME into the graph file (serial; replaces a partition of that name). The data goes
/// to a temporary link that is renamed when complete, so an interrupted write never leaves a partition
/// that looks valid.
void write_partition(const std::string& path, const std::string& name, const std::vector<int32_t>& part,
                     int64_t parts, PartitionMethod method, const PartitionReport& report);

/// Creates `path` (replacing it) as a partition file of its own for the graph `graph_path`: root attributes
/// format "tessera-partition", graph, num_nodes and graph_fingerprint (graph_identity); write_partition then
/// adds /partition/NAME to it. A graph shared read-only is never written this way. Serial.
void create_partition_file(const std::string& path, const std::string& graph_path, int64_t num_nodes,
                           const std::string& graph_fingerprint);

/// Collective: throws CollectiveError naming `path` unless it is a partition file (create_partition_file)
/// made for a graph of `num_nodes` nodes with this fingerprint.
void check_partition_file(const Communicator& comm, const std::string& path, int64_t num_nodes,
                          const std::string& graph_fingerprint);

/// Collective: the parts of nodes [first, first + count) (count < 0: every node) from /partition/NAME of
/// `path`, a graph file or a partition file; CollectiveError naming the file when it is missing, has another
/// length, another part count than `expected_parts`, or part ids out of range.
std::vector<int32_t> read_partition(const Communicator& comm, const std::string& path,
                                    const std::string& name, int64_t expected_parts, int64_t first = 0,
                                    int64_t count = -1);

/// Collective: the partition a run on comm's P ranks reads when none is named. One rank: "block".
/// Otherwise metis-P where the file it is read from (`partition_file` when given, else `path`) has it.
/// A graph file without one gives "block" (contiguous ranges of nodes, which every file serves) and a log
/// line naming the command that makes metis-P; a partition file without one is refused (CollectiveError),
/// since it was given for its partitions.
std::string default_partition(const Communicator& comm, const std::string& path,
                              const std::string& partition_file = "");

/// Node renumbering by (part, old id): new_of_old[v] and the first new id of each part (parts + 1 entries).
struct Renumbering {
  std::vector<int64_t> new_of_old;  ///< the new id of every node
  std::vector<int64_t> begin;       ///< parts + 1: part p holds new ids [begin[p], begin[p + 1])
};
/// Nodes renumbered by (part, old id). Serial, an array of every node: the plain reference for
/// BlockRenumbering.
Renumbering renumber_by_part(const std::vector<int32_t>& part, int64_t parts);

/// renumber_by_part's numbering without an array of every node on any rank: rank r reads the parts of the
/// nodes of its block (block_range(n, r, P)) and holds their new ids; any other node's new id is asked of
/// its block's rank. O(N/P) memory, two all-to-alls of one count per rank pair to build.
class BlockRenumbering {
 public:
  /// Collective: from /partition/NAME of `path` (one part per rank of `comm`; checked as read_partition
  /// checks it). Rank r holds the nodes [row_begins[r], row_begins[r + 1]) (P + 1 entries ending at
  /// num_nodes, the same on every rank; empty: block_begins).
  BlockRenumbering(const Communicator& comm, const std::string& path, const std::string& name,
                   int64_t num_nodes, std::vector<int64_t> row_begins = {});
  /// ranks + 1: part p holds new ids [begin[p], begin[p + 1]).
  const std::vector<int64_t>& begin() const { return begin_; }
  /// The new id of node `old` of this rank's block.
  int64_t of_block_node(int64_t old) const;
  /// Collective: the new ids of `old` (any node ids, each rank its own list, repeats allowed), in order.
  std::vector<int64_t> lookup(const std::vector<int64_t>& old) const;

 private:
  int holder(int64_t old) const;  // the rank whose block holds node `old`
  Communicator comm_;             // not owned: the caller's
  int64_t n_ = 0, first_ = 0;
  std::vector<int64_t> row_begins_, begin_, new_of_block_;
};

}  // namespace tessera
