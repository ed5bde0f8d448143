// SPDX-License-Identifier: BSD-3-Clause
// A graph distributed by a partition (DESIGN §6): each rank owns a contiguous range of renumbered node ids
// and holds their in-edges, features, labels and split membership; every rank also holds the in-degree of
// every node (GCN weights of sampled neighbours, the cache's initial fill). Loaded collectively: each rank
// reads a 1/P block of the file and an all-to-all moves every row to its owner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"

namespace tessera {

struct PartitionedGraph {
  std::string path;
  int64_t num_nodes = 0, num_features = 0, num_classes = 0;
  std::vector<int64_t> owner_begin;  // ranks + 1: rank r owns new ids [owner_begin[r], owner_begin[r + 1])
  int64_t first = 0, count = 0;      // this rank's range
  // Owned rows (new id first + i): in-neighbours in new ids, sorted, self loops dropped (GCN adds its own).
  std::vector<int64_t> row_ptr, col;
  std::vector<float> features;  // count x num_features
  std::vector<int64_t> labels;  // count, -1 = unlabeled
  std::vector<int64_t> degree;  // num_nodes: in-degree of every node (without self loops), new ids
  std::vector<int64_t> train, valid, test;  // owned new ids in each split, sorted
  std::vector<int64_t> file_id;             // count: each owned node's id in the file

  int owner(int64_t node) const;
  bool owns(int64_t node) const { return node >= first && node < first + count; }
  /// Non-owned in-neighbours of owned nodes, sorted (the cache's candidates).
  std::vector<int64_t> halo() const;
};

/// Collective. partition: a name under /partition/ (one part per rank), or "block" for contiguous
/// ranges of file ids (no renumbering). Throws CollectiveError naming the file on a missing or
/// mismatched partition and on files the trainer cannot use (no train split, no labels).
PartitionedGraph load_partitioned(const Communicator& comm, const std::string& path,
                                  const std::string& partition);

}  // namespace tessera
