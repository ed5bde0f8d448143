// SPDX-License-Identifier: BSD-3-Clause
// The Tessera graph file (HDF5, docs/architecture.md §3): CSR by destination, float32 features, int64 labels
// (-1 = unlabeled), OGB-named splits. Schema version 2 adds multi-label graphs (a label matrix of 1, 0 and -1
// = unobserved per node and task), per-edge features and link-prediction splits (/link: the node pairs a
// link task scores, and the negatives they are ranked against); a file with none of them is written as
// version 1, so single-label files are unchanged. Schema version 3 stores the node features in bf16 (16-bit
// integers holding bf16 bits, dataset attribute dtype = "bf16"), read back widened to fp32. Written
// collectively to a temporary name and renamed on commit, so a failed write never leaves a file behind; read
// collectively, each rank its own rows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/shared_output.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/csr.hpp"
#include "tessera/graph/hdf5_io.hpp"

namespace tessera {

/// The root attribute `format` of a graph file.
inline constexpr const char* kGraphFormat = "tessera-graph";
/// The newest schema version this Tessera reads and writes (it reads every version from 1).
inline constexpr int64_t kGraphVersion = 3;
/// The root attribute `task` of a multi-label graph file (version 2; absent: single-label).
inline constexpr const char* kMultiLabelTask = "multi-label";

/// A graph file's root attributes.
struct GraphMeta {
  std::string name;          ///< the dataset's name
  std::string source;        ///< free text: where the graph came from
  int64_t num_nodes = 0;     ///< nodes
  int64_t num_edges = 0;     ///< stored (directed) edges
  int64_t num_features = 0;  ///< feature columns
  int64_t num_classes = 0;   ///< label classes; of a multi-label graph, its tasks (label columns)
  bool symmetric = false;    ///< every edge's reverse is stored
  /// /node/labels is a matrix [num_nodes, num_classes] of 1, 0 and -1 (unobserved): a binary task per
  /// column (schema version 2), not one class per node.
  bool multi_label = false;
  int64_t num_edge_features = 0;  ///< columns of /edge/features (version 2; 0: the file has none)
  bool link_splits = false;       ///< the file has /link (version 2): link-prediction splits
  int64_t link_train_pairs = 0;   ///< rows of /link/train/edges (0: none)
  /// How /node/features stores its values: fp32, or bf16 (version 3; read back widened to fp32)
  StorageDtype feature_dtype = StorageDtype::F32;
  /// The schema version a file with this content is written as: the lowest that holds it.
  int64_t version() const {
    if (feature_dtype == StorageDtype::Bf16) return 3;
    return multi_label || num_edge_features > 0 || link_splits ? 2 : 1;
  }
};

/// One link-prediction split of a graph file (/link/NAME, version 2): positive node pairs to score and the
/// negatives they are ranked against, all [rows, columns] int64 node ids.
struct LinkSplitInfo {
  std::string name;                ///< "train", "valid" or "test"
  int64_t edges = 0;               ///< rows of /link/NAME/edges: positive pairs (source, target)
  int64_t shared_negatives = 0;    ///< rows of /link/NAME/negatives: pairs every positive is ranked against
  int64_t negatives_per_edge = 0;  ///< columns of /link/NAME/negative_targets: per positive, its source's
                                   ///< negative targets (rows = edges); 0: none
};

class RowBlockCheck;

/// The rows [first_row, first_row + rows) of a graph file: in-edges, features and labels.
struct GraphSlice {
  int64_t first_row = 0;                  ///< the first row's node id
  CsrMatrix<float, HostSpace> adjacency;  ///< local rows, global column (source) ids, pattern only
  HostMatrix<float> features;             ///< rows x num_features (empty where read as bf16)
  HostMatrix<uint16_t> features_bf16;     ///< rows x num_features as bf16 bits, where read so; else empty
  /// rows: the class of each row, -1 unlabeled; of a multi-label graph, 0 where the row has an observed
  /// task label and -1 where it has none (the row-level "labeled" every split and count uses)
  HostVector<int64_t> labels;
  HostMatrix<int8_t> label_matrix;  ///< multi-label graphs: rows x tasks of 1, 0, -1 (unobserved); else empty
};

/// [begin, end) of the rows rank `rank` of `ranks` owns in a block distribution of `n` rows.
std::pair<int64_t, int64_t> block_range(int64_t n, int rank, int ranks);
/// The rank whose block_range holds `index` (0 <= index < n).
int block_owner(int64_t n, int64_t index, int ranks);

/// Writes a graph file collectively, each rank its own ranges.
class GraphFileWriter {
 public:
  /// Collective over comm. Creates `path` under a temporary name with every dataset sized from `meta`
  /// and `split_sizes` (num_edges may grow later through set_num_edges).
  GraphFileWriter(const Communicator& comm, std::string path, const GraphMeta& meta,
                  const std::map<std::string, int64_t>& split_sizes);
  /// Without commit(), the temporary file is removed.
  ~GraphFileWriter();
  GraphFileWriter(const GraphFileWriter&) = delete;
  GraphFileWriter& operator=(const GraphFileWriter&) = delete;

  /// Collective: entries [first, first + count) of /graph/indptr (each rank its own range, possibly empty).
  void write_indptr(int64_t first, int64_t count, const int64_t* values);
  /// Collective: entries [first, first + count) of /graph/indices.
  void write_indices(int64_t first, int64_t count, const int64_t* values);
  /// Collective: rows [first_row, first_row + rows) of /node/features (rounded to bf16 where the meta's
  /// feature_dtype says so).
  void write_features(int64_t first_row, int64_t rows, const float* values);
  /// Collective: entries [first, first + count) of /node/labels (a single-label graph).
  void write_labels(int64_t first, int64_t count, const int64_t* values);
  /// Collective: rows [first_row, first_row + rows) of a multi-label graph's /node/labels, rows x tasks.
  void write_label_matrix(int64_t first_row, int64_t rows, const int8_t* values);
  /// Collective: rows [first, first + count) of /edge/features (count x num_edge_features), in the order
  /// of /graph/indices.
  void write_edge_features(int64_t first, int64_t count, const float* values);
  /// Collective: entries [first, first + count) of /split/NAME.
  void write_split(const std::string& name, int64_t first, int64_t count, const int64_t* values);
  /// Collective: entries [first, first + count) of /node/original_id (created, sized num_nodes, on the first
  /// call): the id each node has in the file a reordered graph was made from (tessera prep reorder).
  void write_original_ids(int64_t first, int64_t count, const int64_t* values);
  /// Collective: rows [first, first + count) of /link/SPLIT/PART, int64 [rows, columns] (created on the first
  /// call; the file's meta must say link_splits).
  void write_link_rows(const std::string& split, const std::string& part, int64_t rows, int64_t columns,
                       int64_t first, int64_t count, const int64_t* values);
  /// Collective: resizes /graph/indices and updates the num_edges attribute.
  void set_num_edges(int64_t num_edges);

  /// Collective: closes the file and renames it to its final path.
  void commit();

 private:
  void write(const H5Handle& dataset, hid_t type, int64_t first, int64_t count, const void* values);
  Communicator comm_;  // not owned: a view of the caller's, so a temporary Communicator::world() is safe
  std::string path_, temp_path_;
  std::unique_ptr<SharedOutput> output_;  // before the handles: they close before it removes the temporary
  H5Handle file_, indptr_, indices_, features_, labels_, original_ids_, edge_features_;
  std::map<std::string, H5Handle> splits_;
  std::map<std::string, H5Handle> links_;  // /link/SPLIT/PART
  GraphMeta meta_;
  bool committed_ = false;
};

/// One of a graph file's splits.
struct SplitInfo {
  std::string name;  ///< "train", "valid", "test"
  int64_t size = 0;  ///< node ids in it
};

/// Reads a graph file collectively, each rank its own ranges.
class GraphFileReader {
 public:
  /// Collective. Checks the schema (format, version, every dataset's presence, rank and shape) and
  /// throws CollectiveError naming the file and dataset on any mismatch.
  GraphFileReader(const Communicator& comm, std::string path);

  /// The root attributes.
  const GraphMeta& meta() const { return meta_; }
  /// The file's path.
  const std::string& path() const { return path_; }
  /// Its splits.
  const std::vector<SplitInfo>& splits() const { return splits_; }
  /// Its link-prediction splits, train, valid, test as present (empty: none; link_splits.cpp).
  const std::vector<LinkSplitInfo>& link_splits() const { return link_splits_; }
  /// Whether a split of that name exists.
  bool has_split(const std::string& name) const;
  /// Whether the file is a reordered graph, whose /node/original_id gives each node's id in the file it
  /// was made from (tessera prep reorder); node outputs are written in that order.
  bool has_original_ids() const { return original_ids_.valid(); }

  /// Collective: entries [first, first + count) of /graph/indptr (each rank its own range).
  std::vector<int64_t> read_indptr(int64_t first, int64_t count) const;
  /// Collective: entries [first, first + count) of /graph/indices.
  std::vector<int64_t> read_indices(int64_t first, int64_t count) const;
  /// Collective: rows [first_row, first_row + rows) of /node/features, row-major (a bf16 file's widened).
  std::vector<float> read_features(int64_t first_row, int64_t rows) const;
  /// Collective: the same rows as bf16 bits (a bf16 file's as stored, an fp32 file's read a chunk of rows
  /// at a time and rounded to nearest even), each chunk checked first where `check` is given (its rows from
  /// first_row on), so the rows never exist as fp32 whole.
  std::vector<uint16_t> read_features_bf16(int64_t first_row, int64_t rows,
                                           RowBlockCheck* check = nullptr) const;
  /// Collective: entries [first, first + count) of /node/labels; of a multi-label graph, 0 for a row with
  /// an observed task label and -1 for one without (GraphSlice::labels).
  std::vector<int64_t> read_labels(int64_t first, int64_t count) const;
  /// Collective: rows [first_row, first_row + rows) of a multi-label graph's label matrix, rows x tasks
  /// (meta().multi_label must hold).
  std::vector<int8_t> read_label_matrix(int64_t first_row, int64_t rows) const;
  /// Collective: rows [first, first + count) of /edge/features, count x num_edge_features (the file must
  /// have them).
  std::vector<float> read_edge_features(int64_t first, int64_t count) const;
  /// Collective: entries [first, first + count) of /split/NAME.
  std::vector<int64_t> read_split(const std::string& name, int64_t first, int64_t count) const;

  /// Collective: rows [first, first + count) of /link/SPLIT/PART (PART: edges, negatives or
  /// negative_targets, which the split must have), row-major.
  std::vector<int64_t> read_link_rows(const std::string& split, const std::string& part, int64_t first,
                                      int64_t count) const;

  /// Collective: entries [first, first + count) of /node/original_id (has_original_ids() must hold).
  std::vector<int64_t> read_original_ids(int64_t first, int64_t count) const;

  /// Collective: rows [first_row, first_row + rows) as a GraphSlice, each value checked as validate_graph
  /// checks it (RowBlockCheck; a problem on any rank is thrown collectively). Split ids are not read.
  /// `features` Bf16 holds the features as bf16 bits only (GraphSlice::features_bf16: a bf16 file's as
  /// stored, an fp32 file's checked and rounded a chunk at a time), never as fp32 rows.
  GraphSlice read_rows(int64_t first_row, int64_t rows, StorageDtype features = StorageDtype::F32) const;

  /// Collective check of what was read (validation): when any rank failed, the file is closed on every rank
  /// and CollectiveError is thrown with the lowest failing rank's message. The reader is unusable after.
  void check(bool ok, const std::string& problem) const;

 private:
  Communicator comm_;  // not owned: the caller's MPI communicator
  std::string path_;
  GraphMeta meta_;
  std::vector<SplitInfo> splits_;
  std::vector<LinkSplitInfo> link_splits_;
  // Rows of /node/features as fp32 into `out` (rows x num_features), a bf16 file's widened.
  void read_features_into(int64_t first_row, int64_t rows, float* out) const;
  // The same rows as bf16 bits into `out`: a bf16 file's as stored, an fp32 file's read a chunk of rows at
  // a time and rounded (each chunk checked first where `check` is given: its rows from first_row on).
  void read_bf16_into(int64_t first_row, int64_t rows, uint16_t* out, RowBlockCheck* check) const;
  // Mutable for check(), which closes them on a collective error.
  mutable H5Handle file_, indptr_, indices_, features_, labels_, original_ids_, edge_features_;
};

/// What a rank spends per in-edge and per row of the rows it reads (balanced_row_begins).
struct RowCosts {
  double edge_bytes = 0;  ///< 0: 8 (the index read)
  double row_bytes = 0;   ///< 0: the row's features, label, offset and split bits as read
};

/// Collective: every rank's first row of a contiguous split of the file's rows that gives each rank about
/// the same cost (edges and rows weighted by `costs`), and num_nodes last (P + 1 entries; a rank's block
/// may be empty). Equal row counts put 40% of an R-MAT graph's edges on the first of 8 ranks (R-MAT's low
/// ids are its hubs), and with them a load's peak memory and time.
std::vector<int64_t> balanced_row_begins(const GraphFileReader& reader, const Communicator& comm,
                                         const RowCosts& costs = {});

/// What `tessera info` reports; the counts are global.
struct GraphSummary {
  int64_t min_degree = 0;       ///< smallest in-degree
  int64_t max_degree = 0;       ///< largest in-degree
  double mean_degree = 0.0;     ///< mean in-degree
  int64_t labeled_nodes = 0;    ///< nodes with a label
  int64_t self_loops = 0;       ///< stored edges v -> v
  int64_t max_label = -1;       ///< the largest label
  int64_t observed_labels = 0;  ///< multi-label graphs: entries of the label matrix that are 0 or 1
  int64_t positive_labels = 0;  ///< multi-label graphs: entries that are 1
};

/// Collective deep check of every value (offsets, node ids, labels, finite features, split ids), each
/// rank reading a block of rows; throws CollectiveError naming the file, dataset and first bad row.
/// `tessera info` and `partition` run it; the training loaders fold the same checks into their own reads
/// (RowBlockCheck, read_split_marks) and so read the file once.
GraphSummary validate_graph(const GraphFileReader& reader, const Communicator& comm);

/// validate_graph's checks of one block of rows [first_row, first_row + rows), for a loader that reads
/// those rows anyway. Feed it the pieces as they are read, offsets first; it keeps the first problem found,
/// in validate_graph's words, and communicates nothing: the caller reads every piece whatever was found
/// (the reads are collective) and then calls reader.check(problem().empty(), problem()).
class RowBlockCheck {
 public:
  /// Checks for rows [first_row, first_row + rows) of `reader`'s file (its sizes and path; reads nothing).
  RowBlockCheck(const GraphFileReader& reader, int64_t first_row, int64_t rows);
  /// The rows' offsets as stored (rows + 1 entries); returns the edges [lo, hi) that are safe to read for
  /// them (the offsets' range, clamped to the file's edges).
  std::pair<int64_t, int64_t> offsets(const std::vector<int64_t>& indptr);
  /// The rows' sources: entries [lo, hi) of /graph/indices, as offsets() returned them.
  void sources(const int64_t* indices);
  /// The rows' labels (a single-label graph).
  void labels(const int64_t* labels);
  /// The rows' label matrix (a multi-label graph), rows x tasks: each entry 1, 0 or -1.
  void label_matrix(const int8_t* values);
  /// The rows' features, row-major; `from_row`, `rows`: only those rows of the block, at `features`.
  void features(const float* features, int64_t from_row = 0, int64_t rows = -1);
  /// The rows' features as bf16 bits (a value is non-finite where its exponent bits are all set).
  void features_bf16(const uint16_t* bits);
  /// The first problem found ("FILE: dataset ...: ..."), or empty.
  const std::string& problem() const { return problem_; }
  /// This block's share of the summary (degrees, self loops, labels).
  const GraphSummary& counts() const { return counts_; }

 private:
  template <class... Parts>
  void expect(bool ok, Parts&&... parts);
  const GraphMeta& meta_;
  std::string path_, problem_;
  int64_t first_, rows_, lo_ = 0, hi_ = 0;
  std::vector<int64_t> indptr_;
  GraphSummary counts_;
};

/// Collective: reads every split and sends each id to the rank whose rows hold its node (`begins`: every
/// rank's first row, num_nodes last), which returns, per row of its own, 1 + the index in reader.splits()
/// of the split listing that node (0: none). An id out of range, listed twice or in two splits is thrown
/// collectively (CollectiveError, validate_graph's words). O((S + N)/P) memory per rank.
std::vector<uint32_t> read_split_marks(const GraphFileReader& reader, const Communicator& comm,
                                       const std::vector<int64_t>& begins);

/// Collective: throws CollectiveError naming the file unless its /node/original_id (when it has one) is a
/// permutation of [0, num_nodes): ids in range, none listed twice. Each id goes to the rank whose block
/// holds it, O(N/P) memory per rank. validate_graph runs it.
void check_original_ids(const GraphFileReader& reader, const Communicator& comm);

/// The row-level labels of a multi-label block (rows x tasks): 0 for a row with an observed entry, else -1.
std::vector<int64_t> observed_rows(const int8_t* matrix, int64_t rows, int64_t tasks);

/// Collective: throws CollectiveError naming the file, row and column of the first /edge/features value
/// that is not finite (nothing when the file has none). validate_graph runs it.
void check_edge_features(const GraphFileReader& reader, const Communicator& comm);

/// The link splits under /link of an open graph file of schema `version`, shapes and types checked; sets
/// `problem` (naming `path` and the dataset) and returns what was read so far on the first mismatch. The
/// reader's constructor runs it.
std::vector<LinkSplitInfo> read_link_layout(hid_t root, const std::string& path, int64_t version,
                                            std::string& problem);

/// One dataset of a link split: /link/SPLIT/PART, rows x columns node ids.
struct LinkDataset {
  std::string part;     ///< "edges", "negatives" or "negative_targets"
  int64_t rows = 0;     ///< its rows
  int64_t columns = 0;  ///< its columns (2 for pairs)
};
/// The datasets `split` has, edges first.
std::vector<LinkDataset> link_datasets(const LinkSplitInfo& split);

/// Collective: throws CollectiveError naming the file, dataset and row of the first node id in /link that is
/// outside [0, num_nodes) (nothing when the file has no link splits); each rank checks a block of every
/// dataset. validate_graph runs it.
void check_link_splits(const GraphFileReader& reader, const Communicator& comm);

/// Every rank's first row of a block distribution of n rows over `ranks`, and n last.
std::vector<int64_t> block_begins(int64_t n, int ranks);

}  // namespace tessera
