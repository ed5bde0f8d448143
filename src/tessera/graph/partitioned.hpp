// SPDX-License-Identifier: BSD-3-Clause
// A graph distributed by a partition (docs/architecture.md §6): each rank owns a contiguous range of
// renumbered node ids and holds their in-edges, features, labels and split membership, and the in-degree of
// its halo (the non-owned in-neighbours of its nodes: GCN weights of sampled neighbours, the cache's initial
// fill), asked of their owners at load; no array of every node. Loaded collectively: each rank reads a 1/P
// block of the file and an all-to-all moves every row to its owner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/bf16.hpp"

namespace tessera {

/// This rank's part of a partitioned graph (nodes renumbered so every rank owns a contiguous range).
struct PartitionedGraph {
  std::string path;                  ///< the graph file
  int64_t num_nodes = 0;             ///< nodes of the whole graph
  int64_t num_features = 0;          ///< feature columns
  int64_t num_classes = 0;           ///< label classes
  std::vector<int64_t> owner_begin;  ///< ranks + 1: rank r owns new ids [owner_begin[r], owner_begin[r + 1])
  int64_t first = 0;                 ///< this rank's first new id
  int64_t count = 0;                 ///< and how many it owns
  /// Owned rows (new id first + i): offsets into col.
  std::vector<int64_t> row_ptr;
  /// In-neighbours in new ids, sorted, self loops dropped (GCN adds its own).
  std::vector<int64_t> col;
  std::vector<float> features;  ///< count x num_features (empty when they are stored in bf16)
  /// count x num_features when the features are stored in bf16 (store_features_in_bf16), else empty.
  std::vector<uint16_t> features_bf16;
  StorageDtype feature_dtype = StorageDtype::F32;  ///< which of the two holds them
  std::vector<int64_t> labels;       ///< count, -1 = unlabeled (multi-label: 0 where a task is observed)
  bool multi_label = false;          ///< num_classes is the tasks of a multi-label graph
  std::vector<int8_t> targets;       ///< multi-label: count x num_classes of 1, 0, -1 (unobserved)
  std::vector<int64_t> halo;         ///< non-owned in-neighbours of owned nodes (new ids), sorted
  std::vector<int64_t> halo_degree;  ///< their in-degrees (without self loops), from their owners
  std::vector<int64_t> train;        ///< owned new ids in the training split, sorted
  std::vector<int64_t> valid;        ///< owned new ids in the validation split, sorted
  std::vector<int64_t> test;         ///< owned new ids in the test split, sorted
  std::vector<int64_t> file_id;      ///< count: each owned node's id in the file

  /// The rank owning a (new) node id.
  int owner(int64_t node) const;
  /// Whether this rank owns it.
  bool owns(int64_t node) const { return node >= first && node < first + count; }
  /// In-degree (without self loops) of an owned or halo node; throws for any other node.
  int64_t degree_of(int64_t node) const;
};

/// Rounds the owned feature rows to bf16 (nearest even) into features_bf16 and frees the fp32 rows: half the
/// memory, and every reader widens a row back to the fp32 value of its rounding.
void store_features_in_bf16(PartitionedGraph& graph);
/// A copy of the owned feature rows in fp32 (widened where they are stored in bf16).
std::vector<float> owned_features_f32(const PartitionedGraph& graph);

/// What load_partitioned reads besides the graph's rows.
struct PartitionedLoadOptions {
  /// Where /partition/NAME is read from (a file of tessera partition --output, checked by the caller with
  /// check_partition_file); empty: the graph file itself.
  std::string partition_file;
  /// Whether the file must have labels and a labeled training node (a node task; a link task trains on
  /// its link splits instead).
  bool require_labels = true;
  /// Lists of the file's node ids (any nodes, each rank its own lists) rewritten in place to the ids the
  /// partition gives them, as the graph is loaded (a link task's pairs).
  std::vector<std::vector<int64_t>*> renumber;
  /// Divide each feature row by its sum (normalize_feature_rows) as it is read.
  bool normalize_rows = false;
  /// How the owned feature rows are held: bf16 rows are rounded by the rank that reads them (after any
  /// normalization) and travel and are kept in half the bytes; the load's peak holds the read block in fp32
  /// and the rows in bf16.
  StorageDtype feature_dtype = StorageDtype::F32;
};

/// Collective. partition: a name under /partition/ (one part per rank), or "block" for contiguous
/// ranges of file ids (no renumbering), cut so each rank holds about the same bytes of features and
/// neighbour lists (balanced_row_begins; at least one node each). Throws CollectiveError naming the file
/// on a missing or mismatched partition, on any value validate_graph would refuse (checked as the rows are
/// read) and on files the trainer cannot use (no train split, no labels). `partition_file`: where
/// /partition/NAME is read from (a file of tessera partition --output, checked by the caller with
/// check_partition_file); empty: the graph file itself.
PartitionedGraph load_partitioned(const Communicator& comm, const std::string& path,
                                  const std::string& partition, const std::string& partition_file = "");
/// load_partitioned with the options: without require_labels, a file without labels or training nodes
/// loads (its labels -1).
PartitionedGraph load_partitioned(const Communicator& comm, const std::string& path,
                                  const std::string& partition, const PartitionedLoadOptions& options);

}  // namespace tessera
