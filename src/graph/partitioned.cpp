// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/partitioned.hpp"

#include <algorithm>
#include <memory>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/partition.hpp"

namespace tessera {

int PartitionedGraph::owner(int64_t node) const {
  return int(std::upper_bound(owner_begin.begin(), owner_begin.end(), node) - owner_begin.begin()) - 1;
}

int64_t PartitionedGraph::degree_of(int64_t node) const {
  if (owns(node)) return row_ptr[size_t(node - first + 1)] - row_ptr[size_t(node - first)];
  const auto at = std::lower_bound(halo.begin(), halo.end(), node);
  require(at != halo.end() && *at == node, path, ": node ", node, " is neither owned by nor next to rank ",
          owner(first), "'s nodes");
  return halo_degree[size_t(at - halo.begin())];
}

namespace {

// The halo (non-owned in-neighbours, sorted) and its degrees, asked of the owners: O(E/P) per rank where
// the all-gathered degrees of every node were 8 bytes per node on every rank.
void fetch_halo_degrees(const Communicator& comm, PartitionedGraph& g) {
  for (int64_t u : g.col)
    if (!g.owns(u)) g.halo.push_back(u);
  std::sort(g.halo.begin(), g.halo.end());
  g.halo.erase(std::unique(g.halo.begin(), g.halo.end()), g.halo.end());
  std::vector<std::vector<int64_t>> ask(size_t(comm.size()));
  for (int64_t u : g.halo) ask[size_t(g.owner(u))].push_back(u);  // by owner, in halo order
  std::vector<int64_t> asked_counts;
  const std::vector<int64_t> asked = exchange_buckets(comm, ask, "load degrees", &asked_counts);
  std::vector<std::vector<int64_t>> answer(size_t(comm.size()));
  size_t k = 0;
  for (int r = 0; r < comm.size(); ++r)
    for (int64_t j = 0; j < asked_counts[size_t(r)]; ++j, ++k)
      answer[size_t(r)].push_back(g.degree_of(asked[k]));
  g.halo_degree = exchange_buckets(comm, answer, "load degrees");  // owners ascend with ids: halo order
}

// The new ids a rank's block of rows needs: its rows' and their neighbours', asked of their blocks' ranks
// once each (O(E/P)); the file's ids themselves without a partition. Collective to build.
class SliceIds {
 public:
  SliceIds(const GraphSlice& slice, const BlockRenumbering* numbering) : numbering_(numbering) {
    if (!numbering_) return;
    const HostVector<int64_t>& col = slice.adjacency.col_idx;
    old_.assign(col.data(), col.data() + col.extent(0));
    std::sort(old_.begin(), old_.end());
    old_.erase(std::unique(old_.begin(), old_.end()), old_.end());
    new_ = numbering_->lookup(old_);
  }
  int64_t row(int64_t old) const { return numbering_ ? numbering_->of_block_node(old) : old; }
  int64_t neighbour(int64_t old) const {
    if (!numbering_) return old;
    return new_[size_t(std::lower_bound(old_.begin(), old_.end(), old) - old_.begin())];
  }

 private:
  const BlockRenumbering* numbering_;
  std::vector<int64_t> old_, new_;  // sorted neighbour ids and their new ids
};

// Owned new ids of one split, sorted: each rank reads a block of the list and sends every id, renumbered,
// to its owner (O(S/P) per rank; every rank enters the same collectives whether or not the split exists).
std::vector<int64_t> owned_split(const Communicator& comm, const GraphFileReader& reader,
                                 const std::string& name, const BlockRenumbering* numbering,
                                 const PartitionedGraph& g) {
  int64_t size = 0;
  for (const SplitInfo& s : reader.splits())
    if (s.name == name) size = s.size;
  const auto [sb, se] = block_range(size, comm.rank(), comm.size());
  std::vector<int64_t> ids =
      reader.has_split(name) ? reader.read_split(name, sb, se - sb) : std::vector<int64_t>();
  if (numbering) ids = numbering->lookup(ids);
  std::vector<std::vector<int64_t>> to_owner(size_t(comm.size()));
  for (int64_t id : ids) to_owner[size_t(g.owner(id))].push_back(id);
  std::vector<int64_t> out = exchange_buckets(comm, std::move(to_owner), "load splits");
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

  // "block" is the same option on every rank, so every rank takes the same branch (and collectives).
  std::unique_ptr<BlockRenumbering> numbering;
  if (partition == "block") {
    g.owner_begin = block_begins(g.num_nodes, ranks);
  } else {
    numbering = std::make_unique<BlockRenumbering>(comm, path, partition, g.num_nodes);
    g.owner_begin = numbering->begin();
  }
  g.first = g.owner_begin[size_t(comm.rank())];
  g.count = g.owner_begin[size_t(comm.rank() + 1)] - g.first;

  // Read a block of file rows; send each row (header: new id, label, file id, degree; then neighbours)
  // and its features to its owner.
  const auto [begin, end] = block_range(g.num_nodes, comm.rank(), ranks);
  const GraphSlice slice = reader.read_rows(begin, end - begin);     // every value checked as it is read
  read_split_marks(reader, comm, block_begins(g.num_nodes, ranks));  // ids checked before owned_split
  const SliceIds new_id(slice, numbering.get());
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(ranks));
  std::vector<std::vector<float>> feats(static_cast<size_t>(ranks));
  const int64_t f = g.num_features;
  for (int64_t i = 0; i < end - begin; ++i) {
    const int64_t old = begin + i, id = new_id.row(old);
    const int dest = g.owner(id);
    std::vector<int64_t>& out = rows[size_t(dest)];
    const size_t header = out.size();
    out.insert(out.end(), {id, slice.labels(i), old, 0});
    for (int64_t k = slice.adjacency.row_ptr(i); k < slice.adjacency.row_ptr(i + 1); ++k)
      if (slice.adjacency.col_idx(k) != old) out.push_back(new_id.neighbour(slice.adjacency.col_idx(k)));
    out[header + 3] = int64_t(out.size() - header - 4);
    feats[size_t(dest)].insert(feats[size_t(dest)].end(), &slice.features(i, 0), &slice.features(i, 0) + f);
  }
  const std::vector<int64_t> got = exchange_buckets(comm, std::move(rows), "load rows");
  const std::vector<float> got_features = exchange_buckets(comm, std::move(feats), "load features");

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

  fetch_halo_degrees(comm, g);

  g.train = owned_split(comm, reader, "train", numbering.get(), g);
  g.valid = owned_split(comm, reader, "valid", numbering.get(), g);
  g.test = owned_split(comm, reader, "test", numbering.get(), g);
  int64_t labeled_train = 0;
  for (int64_t v : g.train) labeled_train += g.labels[size_t(v - g.first)] >= 0;
  comm.check(all_reduce_value(comm, labeled_train, ReduceOp::Sum, "load") > 0,
             path + ": no labeled node in split 'train'");
  return g;
}

}  // namespace tessera
