// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/partitioned.hpp"

#include <algorithm>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/partition.hpp"

namespace tessera {

int PartitionedGraph::owner(int64_t node) const {
  return int(std::upper_bound(owner_begin.begin(), owner_begin.end(), node) - owner_begin.begin()) - 1;
}

std::vector<int64_t> PartitionedGraph::halo() const {
  std::vector<int64_t> out;
  for (int64_t u : col)
    if (!owns(u)) out.push_back(u);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

// Owned new ids of one split, sorted.
std::vector<int64_t> owned_split(const GraphFileReader& reader, const std::string& name,
                                 const std::vector<int64_t>& new_of_old, const PartitionedGraph& g) {
  std::vector<int64_t> out;
  for (const SplitInfo& s : reader.splits())
    if (s.name == name)
      for (int64_t v : reader.read_split(name, 0, s.size)) {
        const int64_t id = new_of_old.empty() ? v : new_of_old[size_t(v)];
        if (g.owns(id)) out.push_back(id);
      }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

PartitionedGraph load_partitioned(const Communicator& comm, const std::string& path,
                                  const std::string& partition) {
  const GraphFileReader reader(comm, path);
  const GraphMeta& meta = reader.meta();
  comm.check(reader.has_split("train"), path + ": no split named 'train' (the trainer needs /split/train)");
  comm.check(meta.num_classes > 0, path + ": num_classes is 0 (the file has no labels to train on)");
  comm.check(meta.num_nodes >= comm.size(), path + ": " + std::to_string(meta.num_nodes) +
                                                " nodes cannot be "
                                                "split over " +
                                                std::to_string(comm.size()) + " ranks");
  const int ranks = comm.size();
  PartitionedGraph g;
  g.path = path;
  g.num_nodes = meta.num_nodes;
  g.num_features = meta.num_features;
  g.num_classes = meta.num_classes;

  std::vector<int32_t> part;
  Renumbering numbering;
  if (partition == "block") {
    g.owner_begin.resize(size_t(ranks + 1));
    for (int r = 0; r < ranks; ++r) g.owner_begin[size_t(r + 1)] = block_range(g.num_nodes, r, ranks).second;
  } else {
    part = read_partition(comm, path, partition, ranks);
    numbering = renumber_by_part(part, ranks);
    g.owner_begin = numbering.begin;
  }
  g.first = g.owner_begin[size_t(comm.rank())];
  g.count = g.owner_begin[size_t(comm.rank() + 1)] - g.first;
  auto new_id = [&](int64_t old) { return part.empty() ? old : numbering.new_of_old[size_t(old)]; };

  // Read a block of file rows; send each row (header: new id, label, file id, degree; then neighbours)
  // and its features to its owner.
  const auto [begin, end] = block_range(g.num_nodes, comm.rank(), ranks);
  const GraphSlice slice = reader.read_rows(begin, end - begin);     // every value checked as it is read
  read_split_marks(reader, comm, block_begins(g.num_nodes, ranks));  // ids checked before owned_split
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(ranks));
  std::vector<std::vector<float>> feats(static_cast<size_t>(ranks));
  const int64_t f = g.num_features;
  for (int64_t i = 0; i < end - begin; ++i) {
    const int64_t old = begin + i, id = new_id(old);
    const int dest = g.owner(id);
    std::vector<int64_t>& out = rows[size_t(dest)];
    const size_t header = out.size();
    out.insert(out.end(), {id, slice.labels(i), old, 0});
    for (int64_t k = slice.adjacency.row_ptr(i); k < slice.adjacency.row_ptr(i + 1); ++k)
      if (slice.adjacency.col_idx(k) != old) out.push_back(new_id(slice.adjacency.col_idx(k)));
    out[header + 3] = int64_t(out.size() - header - 4);
    feats[size_t(dest)].insert(feats[size_t(dest)].end(), &slice.features(i, 0), &slice.features(i, 0) + f);
  }
  const std::vector<int64_t> got = exchange_buckets(comm, rows, "load rows");
  const std::vector<float> got_features = exchange_buckets(comm, feats, "load features");
  rows.clear();
  feats.clear();

  std::vector<int64_t> at(size_t(g.count), -1);  // where owned row i's record starts in `got`
  std::vector<int64_t> order_of_record;          // record r -> owned row
  for (size_t k = 0; k < got.size(); k += size_t(4 + got[k + 3])) {
    const int64_t i = got[k] - g.first;
    require(i >= 0 && i < g.count && at[size_t(i)] < 0, path, ": row ", got[k], " sent to the wrong rank");
    at[size_t(i)] = int64_t(k);
    order_of_record.push_back(i);
  }
  g.row_ptr.assign(size_t(g.count + 1), 0);
  for (int64_t i = 0; i < g.count; ++i)
    g.row_ptr[size_t(i + 1)] = g.row_ptr[size_t(i)] + got[size_t(at[size_t(i)] + 3)];
  g.col.resize(size_t(g.row_ptr.back()));
  g.labels.resize(size_t(g.count));
  g.file_id.resize(size_t(g.count));
  g.features.resize(size_t(g.count * f));
  for (int64_t i = 0; i < g.count; ++i) {
    const int64_t* rec = &got[size_t(at[size_t(i)])];
    g.labels[size_t(i)] = rec[1];
    g.file_id[size_t(i)] = rec[2];
    std::copy(rec + 4, rec + 4 + rec[3], g.col.begin() + g.row_ptr[size_t(i)]);
    std::sort(g.col.begin() + g.row_ptr[size_t(i)], g.col.begin() + g.row_ptr[size_t(i + 1)]);
  }
  for (size_t r = 0; r < order_of_record.size(); ++r)
    std::copy(got_features.begin() + int64_t(r) * f, got_features.begin() + int64_t(r + 1) * f,
              g.features.begin() + order_of_record[r] * f);

  std::vector<int64_t> my_degree(static_cast<size_t>(g.count)), counts(static_cast<size_t>(ranks));
  for (int64_t i = 0; i < g.count; ++i)
    my_degree[size_t(i)] = g.row_ptr[size_t(i + 1)] - g.row_ptr[size_t(i)];
  for (int r = 0; r < ranks; ++r) counts[size_t(r)] = g.owner_begin[size_t(r + 1)] - g.owner_begin[size_t(r)];
  g.degree.resize(size_t(g.num_nodes));
  all_gather_v(comm, my_degree.data(), counts, g.degree.data(), "load degrees");

  g.train = owned_split(reader, "train", numbering.new_of_old, g);
  g.valid = owned_split(reader, "valid", numbering.new_of_old, g);
  g.test = owned_split(reader, "test", numbering.new_of_old, g);
  int64_t labeled_train = 0;
  for (int64_t v : g.train) labeled_train += g.labels[size_t(v - g.first)] >= 0;
  comm.check(all_reduce_value(comm, labeled_train, ReduceOp::Sum, "load") > 0,
             path + ": no labeled node in split 'train'");
  return g;
}

}  // namespace tessera
