// SPDX-License-Identifier: BSD-3-Clause
// GraphRows: reading a rank's block of a graph file, and checking rows an application hands over.
#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "graph3d_impl.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

GraphRows read_graph_rows(const GraphFileReader& reader, const Communicator& comm) {
  return read_graph_rows(reader, comm, RowCosts{});
}

GraphRows read_graph_rows(const GraphFileReader& reader, const Communicator& comm, const RowCosts& costs,
                          StorageDtype features) {
  const GraphMeta& meta = reader.meta();
  const int me = comm.rank();
  const std::vector<int64_t> begins = balanced_row_begins(reader, comm, costs);
  const int64_t begin = begins[size_t(me)], end = begins[size_t(me) + 1];
  GraphRows r;
  r.name = reader.path();
  r.num_nodes = meta.num_nodes;
  r.num_features = meta.num_features;
  r.num_classes = meta.num_classes;
  r.first_row = begin;
  // Every value is checked as it is read (validate_graph's checks, so the file is read once); the reads are
  // collective, so each is made whatever was found, and the ranks agree before anything uses the rows.
  RowBlockCheck values(reader, begin, end - begin);
  r.indptr = reader.read_indptr(begin, end - begin + 1);
  const auto [lo, hi] = values.offsets(r.indptr);
  r.indices = reader.read_indices(lo, hi - lo);
  values.sources(r.indices.data());
  if (features == StorageDtype::Bf16) {
    r.features_bf16 = reader.read_features_bf16(begin, end - begin, &values);
  } else {
    r.features = reader.read_features(begin, end - begin);
    values.features(r.features.data());
  }
  r.multi_label = meta.multi_label;
  if (r.multi_label) {
    r.label_matrix = reader.read_label_matrix(begin, end - begin);
    values.label_matrix(r.label_matrix.data());
    r.labels = observed_rows(r.label_matrix.data(), end - begin, meta.num_classes);
  } else {
    r.labels = reader.read_labels(begin, end - begin);
    values.labels(r.labels.data());
  }
  reader.check(values.problem().empty(), values.problem());
  for (int64_t& offset : r.indptr) offset -= lo;
  // Split lists are read in blocks, so each split id first goes to the rank that holds that node's row.
  const std::vector<uint32_t> marks = read_split_marks(reader, comm, begins);
  const char* names[] = {"train", "valid", "test"};
  r.splits.assign(size_t(end - begin), 0);
  for (size_t i = 0; i < marks.size(); ++i)
    for (int s = 0; s < 3 && marks[i] != 0; ++s)
      if (reader.splits()[marks[i] - 1].name == names[s]) r.splits[i] = uint8_t(1 << s);
  return r;
}

namespace impl {

namespace {

std::string check_split_names(const std::vector<std::string>& names) {
  if (names.size() > 8) return std::to_string(names.size()) + " split_names (at most 8: one bit each)";
  for (size_t k = 0; k < names.size(); ++k) {
    if (names[k].empty()) return "split_names[" + std::to_string(k) + "] is empty";
    if (std::find(names.begin(), names.begin() + long(k), names[k]) != names.begin() + long(k))
      return "split name '" + names[k] + "' appears twice";
  }
  if (std::find(names.begin(), names.end(), "train") == names.end())
    return "no split named 'train' in split_names (the loss covers its nodes)";
  return "";
}

}  // namespace

std::string check_rows(const GraphRows& r) {
  const int64_t rows = r.rows();
  std::ostringstream problem;
  if (r.num_nodes < 0 || r.num_features < 0 || r.num_classes < 0)
    problem << "negative sizes";
  else if (int64_t(r.indptr.size()) != rows + 1 || r.indptr.front() != 0)
    problem << "indptr has " << r.indptr.size() << " offsets for " << rows
            << " rows (expected rows + 1, from 0)";
  else if (r.indptr.back() != int64_t(r.indices.size()))
    problem << "indptr ends at " << r.indptr.back() << " but there are " << r.indices.size() << " indices";
  else if (!r.features_bf16.empty() && !r.features.empty())
    problem << "both features and features_bf16 (give one)";
  else if (int64_t(std::max(r.features.size(), r.features_bf16.size())) != rows * r.num_features)
    problem << std::max(r.features.size(), r.features_bf16.size()) << " feature values for " << rows
            << " rows of " << r.num_features;
  else if (r.multi_label && int64_t(r.label_matrix.size()) != rows * r.num_classes)
    problem << r.label_matrix.size() << " label matrix entries for " << rows << " rows of " << r.num_classes
            << " tasks";
  else if (int64_t(r.splits.size()) != rows)
    problem << r.splits.size() << " split entries for " << rows << " rows";
  else if (const std::string names = check_split_names(r.split_names); !names.empty())
    problem << names;
  if (!problem.str().empty()) return problem.str();
  const int bits = int(r.split_names.size());
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t v = r.first_row + i;
    if (r.indptr[size_t(i + 1)] < r.indptr[size_t(i)])
      return "row " + std::to_string(v) + ": indptr decreases";
    for (int64_t k = r.indptr[size_t(i)]; k < r.indptr[size_t(i + 1)]; ++k)
      if (r.indices[size_t(k)] < 0 || r.indices[size_t(k)] >= r.num_nodes)
        return "row " + std::to_string(v) + ": source " + std::to_string(r.indices[size_t(k)]) +
               " outside [0, " + std::to_string(r.num_nodes) + ")";
    if (r.labels[size_t(i)] < -1 || r.labels[size_t(i)] >= r.num_classes)
      return "row " + std::to_string(v) + ": label " + std::to_string(r.labels[size_t(i)]) +
             " outside [-1, " + std::to_string(r.num_classes) + ")";
    bool observed = false;  // a multi-label row's label says whether it has an observed task
    for (int64_t t = 0; r.multi_label && t < r.num_classes; ++t) {
      const int y = r.label_matrix[size_t(i * r.num_classes + t)];
      if (y < -1 || y > 1)
        return "row " + std::to_string(v) + ", task " + std::to_string(t) + ": label " + std::to_string(y) +
               " (1, 0, or -1 for unobserved)";
      observed = observed || y >= 0;
    }
    if (r.multi_label && r.labels[size_t(i)] != (observed ? 0 : -1))
      return "row " + std::to_string(v) + ": label " + std::to_string(r.labels[size_t(i)]) +
             " (a multi-label row's label is 0 where it has an observed task, -1 where it has none)";
    if (bits < 8 && (r.splits[size_t(i)] >> bits) != 0)
      return "row " + std::to_string(v) + ": split bits " + std::to_string(int(r.splits[size_t(i)])) +
             " name a split past the " + std::to_string(bits) + " split_names";
    for (int64_t j = 0; j < r.num_features; ++j) {
      const size_t at = size_t(i * r.num_features + j);
      if (r.features_bf16.empty() ? !std::isfinite(r.features[at])
                                  : !std::isfinite(from_bf16(r.features_bf16[at])))
        return "row " + std::to_string(v) + ": feature " + std::to_string(j) + " is not finite";
    }
  }
  return "";
}

void validate_rows(const GraphRows& r, const Communicator& comm) {
  const std::string local = check_rows(r);
  comm.check(local.empty(), r.name + ": " + local);
  // Every rank must name the same splits: each becomes one mask on every rank.
  std::string names;
  for (const std::string& name : r.split_names) names += name + '\n';
  const int64_t hash = int64_t(std::hash<std::string>{}(names) >> 1);
  comm.check(all_reduce_value(comm, hash, ReduceOp::Min, "load") ==
                 all_reduce_value(comm, hash, ReduceOp::Max, "load"),
             r.name + ": the ranks' split_names differ (every rank must name the same splits in one order)");
  // Blocks must tile [0, num_nodes) in rank order.
  std::vector<int64_t> firsts(size_t(comm.size())), counts(size_t(comm.size()));
  const int64_t mine[2] = {r.first_row, r.rows()};
  std::vector<int64_t> all(size_t(2 * comm.size()));
  all_gather(comm, mine, 2, all.data(), "load");
  int64_t next = 0;
  std::string layout;
  for (int k = 0; k < comm.size() && layout.empty(); ++k) {
    if (all[size_t(2 * k)] != next)
      layout = "rank " + std::to_string(k) + " starts at row " + std::to_string(all[size_t(2 * k)]) +
               ", expected " + std::to_string(next) + " (blocks must be contiguous, in rank order)";
    next += all[size_t(2 * k + 1)];
  }
  if (layout.empty() && next != r.num_nodes)
    layout = "the ranks hold " + std::to_string(next) + " rows of " + std::to_string(r.num_nodes) + " nodes";
  comm.check(layout.empty(), r.name + ": " + layout);
}

}  // namespace impl
}  // namespace tessera
