// SPDX-License-Identifier: BSD-3-Clause
// Deep checks of a graph file's values: RowBlockCheck for one block of rows (folded into the loaders' reads,
// and run block by block by validate_graph), and the split lists routed to the rows' owners.
#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

RowBlockCheck::RowBlockCheck(const GraphFileReader& reader, int64_t first_row, int64_t rows)
    : meta_(reader.meta()), path_(reader.path()), first_(first_row), rows_(rows) {
  counts_.min_degree = INT64_MAX;
}

template <class... Parts>
void RowBlockCheck::expect(bool ok, Parts&&... parts) {
  if (ok || !problem_.empty()) return;
  std::ostringstream s;
  s << path_ << ": ";
  (s << ... << parts);
  problem_ = s.str();
}

std::pair<int64_t, int64_t> RowBlockCheck::offsets(const std::vector<int64_t>& indptr) {
  require(int64_t(indptr.size()) == rows_ + 1, "RowBlockCheck: ", indptr.size(), " offsets for ", rows_,
          " rows");
  indptr_ = indptr;
  if (first_ == 0) expect(indptr[0] == 0, "dataset /graph/indptr: entry 0 is ", indptr[0], ", expected 0");
  for (int64_t i = 0; i < rows_; ++i)
    expect(indptr[size_t(i + 1)] >= indptr[size_t(i)], "dataset /graph/indptr: decreases at row ",
           first_ + i);
  if (first_ + rows_ == meta_.num_nodes)
    expect(indptr.back() == meta_.num_edges, "dataset /graph/indptr: ends at ", indptr.back(),
           " but num_edges is ", meta_.num_edges);
  lo_ = std::clamp<int64_t>(indptr.front(), 0, meta_.num_edges);
  hi_ = std::clamp<int64_t>(indptr.back(), lo_, meta_.num_edges);
  return {lo_, hi_};
}

void RowBlockCheck::sources(const int64_t* indices) {
  for (int64_t i = 0; i < rows_ && problem_.empty(); ++i) {
    const int64_t degree = indptr_[size_t(i + 1)] - indptr_[size_t(i)];
    counts_.min_degree = std::min(counts_.min_degree, degree);
    counts_.max_degree = std::max(counts_.max_degree, degree);
    for (int64_t k = std::max(indptr_[size_t(i)], lo_); k < std::min(indptr_[size_t(i + 1)], hi_); ++k) {
      const int64_t u = indices[k - lo_];
      expect(u >= 0 && u < meta_.num_nodes, "dataset /graph/indices: entry ", k, " (row ", first_ + i,
             ") is node ", u, ", outside [0, ", meta_.num_nodes, ")");
      if (u == first_ + i) ++counts_.self_loops;
    }
  }
}

void RowBlockCheck::labels(const int64_t* labels) {
  for (int64_t i = 0; i < rows_; ++i) {
    const int64_t y = labels[i];
    expect(y >= -1 && y < std::max<int64_t>(meta_.num_classes, 0), "dataset /node/labels: row ", first_ + i,
           " has label ", y, ", outside [-1, ", meta_.num_classes, ")");
    if (y >= 0) ++counts_.labeled_nodes;
    counts_.max_label = std::max(counts_.max_label, y);
  }
}

void RowBlockCheck::label_matrix(const int8_t* values) {
  const int64_t tasks = meta_.num_classes;
  for (int64_t i = 0; i < rows_; ++i) {
    bool observed = false;
    for (int64_t t = 0; t < tasks; ++t) {
      const int8_t y = values[i * tasks + t];
      expect(y >= -1 && y <= 1, "dataset /node/labels: row ", first_ + i, ", task ", t, " is ", int(y),
             " (1, 0, or -1 for unobserved)");
      observed = observed || y >= 0;
      counts_.observed_labels += y >= 0;
      counts_.positive_labels += y == 1;
    }
    counts_.labeled_nodes += observed;
    counts_.max_label = std::max<int64_t>(counts_.max_label, observed ? 0 : -1);
  }
}

void RowBlockCheck::features(const float* features, int64_t from_row, int64_t rows) {
  const int64_t f = meta_.num_features, count = (rows < 0 ? rows_ - from_row : rows) * f;
  for (int64_t k = 0; k < count && problem_.empty(); ++k)
    expect(std::isfinite(features[k]), "dataset /node/features: row ", first_ + from_row + k / f, ", column ",
           k % f, " is ", features[k]);
}

void RowBlockCheck::features_bf16(const uint16_t* bits) {
  const int64_t count = rows_ * meta_.num_features;
  for (int64_t k = 0; k < count && problem_.empty(); ++k)
    expect((bits[k] & 0x7f80u) != 0x7f80u, "dataset /node/features: row ", first_ + k / meta_.num_features,
           ", column ", k % meta_.num_features, " is ", from_bf16(bits[k]));
}

// Split ids in range, none listed twice, no node in two splits. Each id is sent to the rank whose rows hold
// its node, which marks the split it saw there: O((S + N)/P) memory per rank, whatever the split sizes.
std::vector<uint32_t> read_split_marks(const GraphFileReader& reader, const Communicator& comm,
                                       const std::vector<int64_t>& begins) {
  const int64_t n = reader.meta().num_nodes;
  require(int(begins.size()) == comm.size() + 1 && begins.front() == 0 && begins.back() == n,
          "read_split_marks: row blocks must start at 0 and end at ", n);
  const int64_t begin = begins[size_t(comm.rank())], end = begins[size_t(comm.rank()) + 1];
  std::ostringstream problem;
  problem << reader.path() << ": dataset /split/";
  std::vector<uint32_t> marks(size_t(end - begin), 0);  // 1 + index of the split that lists the node
  bool found = false;
  for (size_t s = 0; s < reader.splits().size(); ++s) {
    const SplitInfo& split = reader.splits()[s];
    const auto [sb, se] = block_range(split.size, comm.rank(), comm.size());
    const std::vector<int64_t> ids = reader.read_split(split.name, sb, se - sb);
    std::vector<std::vector<int64_t>> to_owner(size_t(comm.size()));
    for (size_t k = 0; k < ids.size(); ++k) {
      if (ids[k] >= 0 && ids[k] < n) {
        const auto owner = std::upper_bound(begins.begin(), begins.end() - 1, ids[k]) - begins.begin() - 1;
        to_owner[size_t(owner)].push_back(ids[k]);
      } else if (!found) {
        problem << split.name << ": entry " << sb + int64_t(k) << " is node " << ids[k] << ", outside [0, "
                << n << ")";
        found = true;
      }
    }
    // Every rank exchanges for every split, whatever it found, so the collectives stay matched.
    for (const int64_t v : exchange_buckets(comm, to_owner, "read splits")) {
      uint32_t& mark = marks[size_t(v - begin)];
      if (mark != 0 && !found) {
        if (mark == s + 1)
          problem << split.name << ": node " << v << " is listed twice";
        else
          problem << split.name << ": node " << v << " is also in /split/" << reader.splits()[mark - 1u].name;
        found = true;
      }
      mark = uint32_t(s + 1);
    }
  }
  reader.check(!found, found ? problem.str() : std::string());
  return marks;
}

void check_original_ids(const GraphFileReader& reader, const Communicator& comm) {
  if (!reader.has_original_ids()) return;  // the same on every rank: read of the file's metadata
  const int64_t n = reader.meta().num_nodes;
  const auto [begin, end] = block_range(n, comm.rank(), comm.size());
  const std::vector<int64_t> ids = reader.read_original_ids(begin, end - begin);
  std::ostringstream problem;
  problem << reader.path() << ": dataset /node/original_id: ";
  bool found = false;
  std::vector<std::vector<int64_t>> to_owner(size_t(comm.size()));
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] >= 0 && ids[k] < n) {
      to_owner[size_t(block_owner(n, ids[k], comm.size()))].push_back(ids[k]);
    } else if (!found) {
      problem << "entry " << begin + int64_t(k) << " is " << ids[k] << ", outside [0, " << n << ")";
      found = true;
    }
  }
  // n ids in range with none twice: a permutation.
  std::vector<uint8_t> seen(size_t(end - begin), 0);
  for (const int64_t v : exchange_buckets(comm, to_owner, "read original ids")) {
    if (seen[size_t(v - begin)] != 0 && !found) {
      problem << "id " << v << " is listed twice (not a permutation of the nodes)";
      found = true;
    }
    seen[size_t(v - begin)] = 1;
  }
  reader.check(!found, found ? problem.str() : std::string());
}

void check_edge_features(const GraphFileReader& reader, const Communicator& comm) {
  const int64_t width = reader.meta().num_edge_features;
  if (width == 0) return;  // the same on every rank: the file's metadata
  const auto [begin, end] = block_range(reader.meta().num_edges, comm.rank(), comm.size());
  const int64_t block = std::max<int64_t>(1, (int64_t(16) << 20) / (4 * width));
  const int64_t rounds = all_reduce_value(comm, (end - begin + block - 1) / block, ReduceOp::Max, "validate");
  std::ostringstream problem;
  bool found = false;
  for (int64_t round = 0; round < rounds; ++round) {  // collective reads: the same rounds on every rank
    const int64_t first = std::min(begin + round * block, end), count = std::min(block, end - first);
    const std::vector<float> values = reader.read_edge_features(first, count);
    for (int64_t k = 0; k < count * width && !found; ++k)
      if (!std::isfinite(values[size_t(k)])) {
        problem << reader.path() << ": dataset /edge/features: edge " << first + k / width << ", column "
                << k % width << " is " << values[size_t(k)];
        found = true;
      }
  }
  reader.check(!found, problem.str());
}

GraphSummary validate_graph(const GraphFileReader& reader, const Communicator& comm) {
  const GraphMeta& m = reader.meta();
  const std::vector<int64_t> begins = balanced_row_begins(reader, comm);
  const int64_t begin = begins[size_t(comm.rank())], end = begins[size_t(comm.rank()) + 1];
  std::string problem;
  GraphSummary local;
  local.min_degree = INT64_MAX;
  // Rows are read in bounded blocks so validation of a huge file needs little memory.
  const int64_t block = std::max<int64_t>(1, (int64_t(64) << 20) / (8 + 4 * m.num_features));
  // Reads are collective, so every rank runs the same number of rounds (some with empty ranges).
  const int64_t rounds = all_reduce_value(comm, (end - begin + block - 1) / block, ReduceOp::Max, "validate");
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t first = std::min(begin + round * block, end);
    const int64_t rows = std::min(block, end - first);
    RowBlockCheck check(reader, first, rows);
    const auto [lo, hi] = check.offsets(reader.read_indptr(first, rows + 1));
    check.sources(reader.read_indices(lo, hi - lo).data());
    if (m.multi_label)
      check.label_matrix(reader.read_label_matrix(first, rows).data());
    else
      check.labels(reader.read_labels(first, rows).data());
    check.features(reader.read_features(first, rows).data());
    if (problem.empty()) problem = check.problem();
    local.min_degree = std::min(local.min_degree, check.counts().min_degree);
    local.max_degree = std::max(local.max_degree, check.counts().max_degree);
    local.labeled_nodes += check.counts().labeled_nodes;
    local.self_loops += check.counts().self_loops;
    local.max_label = std::max(local.max_label, check.counts().max_label);
    local.observed_labels += check.counts().observed_labels;
    local.positive_labels += check.counts().positive_labels;
  }
  reader.check(problem.empty(), problem);
  read_split_marks(reader, comm, block_begins(m.num_nodes, comm.size()));
  check_original_ids(reader, comm);
  check_edge_features(reader, comm);
  check_link_splits(reader, comm);

  GraphSummary global;
  global.min_degree = all_reduce_value(comm, local.min_degree, ReduceOp::Min, "validate");
  global.max_degree = all_reduce_value(comm, local.max_degree, ReduceOp::Max, "validate");
  global.labeled_nodes = all_reduce_value(comm, local.labeled_nodes, ReduceOp::Sum, "validate");
  global.self_loops = all_reduce_value(comm, local.self_loops, ReduceOp::Sum, "validate");
  global.max_label = all_reduce_value(comm, local.max_label, ReduceOp::Max, "validate");
  global.observed_labels = all_reduce_value(comm, local.observed_labels, ReduceOp::Sum, "validate");
  global.positive_labels = all_reduce_value(comm, local.positive_labels, ReduceOp::Sum, "validate");
  global.mean_degree = double(m.num_edges) / double(m.num_nodes);
  return global;
}

}  // namespace tessera
