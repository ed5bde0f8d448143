// SPDX-License-Identifier: BSD-3-Clause
// A graph file's link-prediction splits (/link, schema version 2): their layout checked on open, their rows
// read, their node ids validated.
#include <algorithm>

#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {

namespace {

const char* const kLinkSplits[] = {"train", "valid", "test"};
const char* const kLinkParts[] = {"edges", "negatives", "negative_targets"};

// The shape of /link/SPLIT/PART, or a problem: [rows, columns] integers, columns as wanted (0: any >= 1).
std::vector<int64_t> link_dataset_shape(hid_t root, const std::string& path, const std::string& name,
                                        int64_t columns, std::string& problem) {
  const H5Handle dataset = h5_open_dataset(root, path, name);
  const std::vector<int64_t> dims = h5_shape(dataset.get());
  const bool ok = dims.size() == 2 && (columns > 0 ? dims[1] == columns : dims[1] >= 1) &&
                  h5_type_class(dataset.get()) == H5T_INTEGER;
  if (!ok)
    problem = path + ": dataset " + name + " must be integers of shape [rows, " +
              (columns > 0 ? std::to_string(columns) : std::string("at least 1")) + "], has shape " +
              h5_shape_text(dims);
  return ok ? dims : std::vector<int64_t>{0, 0};
}

// One split's datasets: edges required, each negative set optional.
LinkSplitInfo read_link_split(hid_t root, const std::string& path, const std::string& split,
                              std::string& problem) {
  LinkSplitInfo info;
  info.name = split;
  const std::string group = "/link/" + split + "/";
  for (const std::string& member : h5_group_members(root, "/link/" + split))
    if (problem.empty() &&
        std::find(std::begin(kLinkParts), std::end(kLinkParts), member) == std::end(kLinkParts))
      problem = path + ": /link/" + split + "/" + member +
                " is not a link dataset (edges, negatives or negative_targets)";
  if (!problem.empty()) return info;
  if (!h5_exists(root, group + "edges")) {
    problem = path + ": /link/" + split + " has no dataset edges (its positive pairs)";
    return info;
  }
  info.edges = link_dataset_shape(root, path, group + "edges", 2, problem)[0];
  if (problem.empty() && h5_exists(root, group + "negatives"))
    info.shared_negatives = link_dataset_shape(root, path, group + "negatives", 2, problem)[0];
  if (problem.empty() && h5_exists(root, group + "negative_targets")) {
    const std::vector<int64_t> dims = link_dataset_shape(root, path, group + "negative_targets", 0, problem);
    if (problem.empty() && dims[0] != info.edges)
      problem = path + ": dataset " + group + "negative_targets has " + std::to_string(dims[0]) +
                " rows, one per positive pair of " + group + "edges (" + std::to_string(info.edges) + ")";
    if (problem.empty()) info.negatives_per_edge = dims[1];
  }
  return info;
}

}  // namespace

std::vector<LinkSplitInfo> read_link_layout(hid_t root, const std::string& path, int64_t version,
                                            std::string& problem) {
  std::vector<LinkSplitInfo> splits;
  if (!h5_exists(root, "/link")) return splits;
  if (version < 2) {
    problem = path + ": /link (link-prediction splits) in a version " + std::to_string(version) + " file";
    return splits;
  }
  const std::vector<std::string> members = h5_group_members(root, "/link");
  for (const std::string& name : members)
    if (problem.empty() &&
        std::find(std::begin(kLinkSplits), std::end(kLinkSplits), name) == std::end(kLinkSplits))
      problem = path + ": /link/" + name + " is not a link split (train, valid or test)";
  for (const char* name : kLinkSplits) {
    if (!problem.empty()) break;
    if (std::find(members.begin(), members.end(), name) != members.end())
      splits.push_back(read_link_split(root, path, name, problem));
  }
  if (problem.empty() && splits.empty()) problem = path + ": /link holds no split (train, valid or test)";
  return splits;
}

std::vector<int64_t> GraphFileReader::read_link_rows(const std::string& split, const std::string& part,
                                                     int64_t first, int64_t count) const {
  const H5Handle dataset = h5_open_dataset(file_.get(), path_, "/link/" + split + "/" + part);
  const std::vector<int64_t> dims = h5_shape(dataset.get());
  std::vector<int64_t> out(size_t(count * dims[1]));
  h5_read_rows(dataset.get(), H5T_NATIVE_INT64, first, count, out.data());
  return out;
}

std::vector<LinkDataset> link_datasets(const LinkSplitInfo& split) {
  std::vector<LinkDataset> parts{{"edges", split.edges, 2}};
  if (split.shared_negatives > 0) parts.push_back({"negatives", split.shared_negatives, 2});
  if (split.negatives_per_edge > 0)
    parts.push_back({"negative_targets", split.edges, split.negatives_per_edge});
  return parts;
}

void check_link_splits(const GraphFileReader& reader, const Communicator& comm) {
  const int64_t n = reader.meta().num_nodes;
  // Every rank enters every read and check, its block possibly empty: the layout is the file's.
  for (const LinkSplitInfo& split : reader.link_splits())
    for (const LinkDataset& d : link_datasets(split)) {
      const auto [begin, end] = block_range(d.rows, comm.rank(), comm.size());
      const std::vector<int64_t> ids = reader.read_link_rows(split.name, d.part, begin, end - begin);
      const auto bad = std::find_if(ids.begin(), ids.end(), [n](int64_t v) { return v < 0 || v >= n; });
      std::string problem;
      if (bad != ids.end())
        problem = reader.path() + ": dataset /link/" + split.name + "/" + d.part + " row " +
                  std::to_string(begin + (bad - ids.begin()) / d.columns) + ": node id " +
                  std::to_string(*bad) + " outside [0, " + std::to_string(n) + ")";
      reader.check(problem.empty(), problem);
    }
}

}  // namespace tessera
