// SPDX-License-Identifier: BSD-3-Clause
// Not installed: how tessera predict turns the pieces of rows an inference engine left on the ranks into
// one file. Rows move to the rank whose block of node ids (block_range) they fall in, where each node's
// logits row is whole: its class (a multi-label graph: its positive tasks), probabilities and the split
// metric's entries are computed there, from the labels and splits that rank reads of the graph file for its
// block (the metric itself is the library's, gathered over the ranks as in training), and every rank then
// writes its selected rows at their offset in the output (parallel HDF5, MPI-IO for the CSV). No rank holds
// every node.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/models/nn/link_loss.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/models/training/batch_source.hpp"
#include "tessera/models/training/node_outputs.hpp"

namespace tessera {

class GraphFileReader;  // graph/graph_file.hpp

/// Labels and split membership of this rank's block of nodes, read from the graph file.
struct BlockTruth {
  std::vector<int64_t> labels;          ///< per node of the block (-1: unlabeled; multi-label: 0 observed)
  int64_t tasks = 0;                    ///< multi-label graphs: the label matrix's columns; else 0
  std::vector<int8_t> targets;          ///< multi-label: per node of the block x tasks (1, 0, -1 unobserved)
  std::vector<uint8_t> in[3];           ///< per node: in train, valid, test
  bool has[3] = {false, false, false};  ///< the file has that split
};

/// Collective: the truth of [begin, begin + count) (block_range of this rank).
BlockTruth read_block_truth(const GraphFileReader& reader, const Communicator& comm);

/// Collective: `truth` (of this rank's block of the file's node ids) moved to the blocks of the nodes' ids
/// in `order` (a reordered graph's original ids); returned as it is when the file is not reordered.
BlockTruth truth_in_output_order(const Communicator& comm, const BlockTruth& truth, const OutputOrder& order);

/// What to write (empty paths: not written) and of which nodes.
struct PredictionWrite {
  std::string path;            ///< HDF5: /nodes, /predictions, /probabilities, /embeddings
  std::string csv;             ///< "node,prediction" lines (multi-label: node,task0,task1,... of 0 and 1)
  int split = -1;              ///< -1: every node; 0, 1, 2: train, valid, test only
  bool probabilities = false;  ///< write /probabilities
  MetricKind metric = MetricKind::Auto;  ///< what the splits are scored by (make_metric)
  nlohmann::json attributes;             ///< root attributes (strings and numbers)
};

/// Collective: predictions of the block's nodes (every node's logits must have come): the first largest
/// logit, or for a multi-label graph (truth.tasks > 0) each task whose logit is above 0; their
/// probabilities (softmax, or each task's sigmoid); the metric on each split over every rank, also written
/// as root attributes metric and metric_train, metric_valid, metric_test; and the file(s). `embeddings` of
/// width 0: none written. Returns the metric's values and sets `rows` to the nodes written.
Accuracy write_prediction_file(const Communicator& comm, const BlockRows& logits, const BlockRows& embeddings,
                               const BlockTruth& truth, const PredictionWrite& what, int64_t& rows);

/// Collective: the node pairs of a text file (`edges` of tessera predict): one pair per line, two node ids
/// separated by a comma or blanks; blank lines and lines starting with # skipped. Rank 0 reads it and every
/// rank gets the pairs; throws CollectiveError naming the file and line of an unreadable line or an id
/// outside [0, num_nodes), or a file without a pair.
NodePairs read_node_pairs(const std::string& path, int64_t num_nodes, const Communicator& comm);

/// Collective: the scores of a link-prediction checkpoint's pairs (every rank holds them; rank 0 writes):
/// HDF5 /edges int64 [E, 2], /scores float32 [E] (h_u . h_v), /probabilities float32 [E] (their sigmoid),
/// root `attributes`; CSV lines "source,target,score,probability". Empty paths: not written.
void write_link_predictions(const Communicator& comm, const NodePairs& pairs,
                            const std::vector<double>& scores, const std::string& path,
                            const std::string& csv, const nlohmann::json& attributes);

}  // namespace tessera
