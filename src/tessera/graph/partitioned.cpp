// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/partitioned.hpp"

#include <algorithm>
#include <memory>
#include <type_traits>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/flat_id_map.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/graph/partition.hpp"

namespace tessera {

void store_features_in_bf16(PartitionedGraph& graph) {
  if (graph.feature_dtype == StorageDtype::Bf16) return;
  graph.features_bf16.resize(graph.features.size());
  round_to_bf16(graph.features.data(), graph.features_bf16.data(), graph.features.size());
  std::vector<float>().swap(graph.features);
  graph.feature_dtype = StorageDtype::Bf16;
}

std::vector<float> owned_features_f32(const PartitionedGraph& graph) {
  if (graph.feature_dtype == StorageDtype::F32) return graph.features;
  std::vector<float> out(graph.features_bf16.size());
  widen_bf16(graph.features_bf16.data(), out.data(), out.size());
  return out;
}

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
  {
    // Distinct as met: the halo with every repeat was as long as the rank's edges (a hub's row on rank 0 of
    // an R-MAT graph), and its capacity outlived the load.
    FlatIdMap seen;
    for (int64_t u : g.col)
      if (!g.owns(u) && seen.try_emplace(u, 0).second) g.halo.push_back(u);
  }
  std::sort(g.halo.begin(), g.halo.end());
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

// Each of the slice's rows' owner under the new numbering.
std::vector<int> row_owners(const PartitionedGraph& g, const SliceIds& new_id, int64_t begin, int64_t rows) {
  std::vector<int> dest(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) dest[size_t(i)] = g.owner(new_id.row(begin + i));
  return dest;
}

// Where each owner's group starts in a buffer grouped by owner.
std::vector<int64_t> group_starts(const std::vector<int64_t>& counts) {
  std::vector<int64_t> at(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r) at[r] = at[r - 1] + counts[r - 1];
  return at;
}

// Each of the slice's rows as a record for its owner (new id, label, file id, degree, then the neighbours'
// new ids, self loops dropped), grouped by owner in one buffer counted first and sized exactly: a growing
// bucket per owner held up to twice the records, and the buckets and their packed copy coexisted.
std::vector<int64_t> pack_records(const GraphSlice& slice, const SliceIds& new_id,
                                  const std::vector<int>& dest, std::vector<int64_t>& counts) {
  const CsrMatrix<float, HostSpace>& a = slice.adjacency;
  const int64_t rows = int64_t(dest.size());
  std::vector<int64_t> degree(size_t(rows), 0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = a.row_ptr(i); k < a.row_ptr(i + 1); ++k)
      degree[size_t(i)] += a.col_idx(k) != slice.first_row + i;
    counts[size_t(dest[size_t(i)])] += 4 + degree[size_t(i)];
  }
  std::vector<int64_t> at = group_starts(counts);
  std::vector<int64_t> out(size_t(at.back() + counts.back()));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t old = slice.first_row + i;
    int64_t* rec = &out[size_t(at[size_t(dest[size_t(i)])])];
    rec[0] = new_id.row(old), rec[1] = slice.labels(i), rec[2] = old, rec[3] = degree[size_t(i)];
    int64_t n = 4;
    for (int64_t k = a.row_ptr(i); k < a.row_ptr(i + 1); ++k)
      if (a.col_idx(k) != old) rec[n++] = new_id.neighbour(a.col_idx(k));
    at[size_t(dest[size_t(i)])] += n;
  }
  return out;
}

// Each row of a row-major matrix (features, a multi-label graph's tasks), grouped by owner in the records'
// order.
// Out: T, or bf16 bits (uint16_t) of float rows, rounded as they are packed.
template <class T, class Out = T>
std::vector<Out> pack_rows(const HostMatrix<T>& rows, const std::vector<int>& dest,
                           std::vector<int64_t>& counts) {
  const int64_t f = int64_t(rows.extent(1));
  for (int d : dest) counts[size_t(d)] += f;
  std::vector<int64_t> at = group_starts(counts);
  std::vector<Out> out(size_t(at.back() + counts.back()));
  for (size_t i = 0; i < dest.size() && f > 0; ++i) {
    if constexpr (std::is_same_v<T, Out>)
      std::copy(&rows(i, 0), &rows(i, 0) + f, out.begin() + at[size_t(dest[i])]);
    else
      round_to_bf16(&rows(i, 0), out.data() + at[size_t(dest[i])], size_t(f));
    at[size_t(dest[i])] += f;
  }
  return out;
}

// The slice's feature rows to their owners, as fp32 or as bf16 (half the bytes sent and held: the bits the
// slice was read as, or its fp32 rows rounded by the reader); the slice's rows are freed once packed.
void send_features(const Communicator& comm, GraphSlice& slice, const std::vector<int>& dest,
                   StorageDtype dtype, PartitionedGraph& g) {
  std::vector<int64_t> counts(size_t(comm.size()), 0);
  g.feature_dtype = dtype;
  if (dtype == StorageDtype::Bf16) {
    // A slice read as bits has no fp32 rows (and an empty slice packs nothing either way).
    std::vector<uint16_t> packed = slice.features_bf16.extent(0) > 0
                                       ? pack_rows(slice.features_bf16, dest, counts)
                                       : pack_rows<float, uint16_t>(slice.features, dest, counts);
    slice.features = HostMatrix<float>();
    slice.features_bf16 = HostMatrix<uint16_t>();
    g.features_bf16 = exchange_grouped(comm, std::move(packed), counts, "load features");
  } else {
    std::vector<float> packed = pack_rows(slice.features, dest, counts);
    slice.features = HostMatrix<float>();
    g.features = exchange_grouped(comm, std::move(packed), counts, "load features");
  }
}

// The owned rows from the records that arrived (taken, and freed on return). Records and features arrive in
// new-id order (senders are blocks of file rows in file order, and a part's new ids follow file order, see
// BlockRenumbering), so the features that arrive are the owned ones as they are, without a second copy.
void assemble_owned(std::vector<int64_t> got, PartitionedGraph& g) {
  g.row_ptr.assign(size_t(g.count + 1), 0);
  g.labels.resize(size_t(g.count));
  g.file_id.resize(size_t(g.count));
  int64_t i = 0;
  for (size_t k = 0; k < got.size(); k += size_t(4 + got[k + 3]), ++i) {
    require(i < g.count && got[k] == g.first + i, g.path, ": row ", got[k], " arrived at rank ",
            g.owner(g.first), " out of order (expected ", g.first + i, ")");
    g.labels[size_t(i)] = got[k + 1];
    g.file_id[size_t(i)] = got[k + 2];
    g.row_ptr[size_t(i + 1)] = g.row_ptr[size_t(i)] + got[k + 3];
  }
  require(i == g.count, g.path, ": ", g.count - i, " owned rows never arrived");
  g.col.resize(size_t(g.row_ptr.back()));
  i = 0;
  for (size_t k = 0; k < got.size(); k += size_t(4 + got[k + 3]), ++i) {
    const auto row = g.col.begin() + g.row_ptr[size_t(i)];
    std::copy(got.begin() + int64_t(k) + 4, got.begin() + int64_t(k) + 4 + got[k + 3], row);
    std::sort(row, g.col.begin() + g.row_ptr[size_t(i + 1)]);
  }
}

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

// The lists' ids renumbered in place: each distinct id looked up once.
void renumber_ids(const std::vector<std::vector<int64_t>*>& lists, const BlockRenumbering* numbering) {
  if (!numbering) return;  // "block": the file's ids are the new ids
  std::vector<int64_t> distinct;
  for (const std::vector<int64_t>* list : lists) distinct.insert(distinct.end(), list->begin(), list->end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const std::vector<int64_t> renumbered = numbering->lookup(distinct);
  for (std::vector<int64_t>* list : lists)
    for (int64_t& v : *list)
      v = renumbered[size_t(std::lower_bound(distinct.begin(), distinct.end(), v) - distinct.begin())];
}

}  // namespace

PartitionedGraph load_partitioned(const Communicator& comm, const std::string& path,
                                  const std::string& partition, const std::string& partition_file) {
  PartitionedLoadOptions options;
  options.partition_file = partition_file;
  return load_partitioned(comm, path, partition, options);
}

PartitionedGraph load_partitioned(const Communicator& comm, const std::string& path,
                                  const std::string& partition, const PartitionedLoadOptions& options) {
  const std::string& partition_file = options.partition_file;
  const GraphFileReader reader(comm, path);
  const GraphMeta& meta = reader.meta();
  if (options.require_labels) {
    comm.check(reader.has_split("train"), path + ": no split named 'train' (the trainer needs /split/train)");
    comm.check(meta.num_classes > 0, path + ": num_classes is 0 (the file has no labels to train on)");
  }
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
  g.multi_label = meta.multi_label;

  // Each rank reads a contiguous block of rows holding about the same bytes of features and neighbour
  // lists: equal row counts gave the first of 8 ranks 43% of an R-MAT graph's edges (its hubs), and with
  // them the load's peak. "block" owns what it read (no part empty); a partition renumbers. "block" is
  // the same option on every rank, so every rank takes the same branch (and collectives).
  std::vector<int64_t> read_begins = balanced_row_begins(reader, comm);
  std::unique_ptr<BlockRenumbering> numbering;
  if (partition == "block") {
    for (int r = 1; r < ranks; ++r)
      read_begins[size_t(r)] = std::min(std::max(read_begins[size_t(r)], read_begins[size_t(r - 1)] + 1),
                                        g.num_nodes - (ranks - r));
    g.owner_begin = read_begins;
  } else {
    numbering = std::make_unique<BlockRenumbering>(comm, partition_file.empty() ? path : partition_file,
                                                   partition, g.num_nodes, read_begins);
    g.owner_begin = numbering->begin();
  }
  g.first = g.owner_begin[size_t(comm.rank())];
  g.count = g.owner_begin[size_t(comm.rank() + 1)] - g.first;

  // Read a block of file rows and send each row (a record of its label, ids and neighbours; its features)
  // to its owner. Records first, then features, each packed late and freed early: the slice's neighbours
  // go before its features are packed, the features before theirs are exchanged, and each send buffer as it
  // is sent, so the load peaks at about two copies of the rank's features, not four.
  const int64_t begin = read_begins[size_t(comm.rank())], end = read_begins[size_t(comm.rank()) + 1];
  // bf16 storage reads bf16 bits (never the rows in fp32) unless rows are normalized, which is done in fp32.
  const StorageDtype read_as = options.normalize_rows ? StorageDtype::F32 : options.feature_dtype;
  GraphSlice slice = reader.read_rows(begin, end - begin, read_as);  // every value checked as it is read
  read_split_marks(reader, comm, read_begins);  // ids checked before owned_split, for the rows read
  const SliceIds new_id(slice, numbering.get());
  const std::vector<int> dest = row_owners(g, new_id, begin, end - begin);
  std::vector<int64_t> record_counts(size_t(ranks), 0);
  std::vector<int64_t> records = pack_records(slice, new_id, dest, record_counts);
  slice.adjacency = CsrMatrix<float, HostSpace>();
  std::vector<int64_t> got = exchange_grouped(comm, std::move(records), record_counts, "load rows");
  if (options.normalize_rows) normalize_feature_rows(slice.features);
  send_features(comm, slice, dest, options.feature_dtype, g);
  assemble_owned(std::move(got), g);
  if (g.multi_label) {  // the same on every rank: the file's metadata
    std::vector<int64_t> task_counts(size_t(ranks), 0);
    std::vector<int8_t> tasks = pack_rows(slice.label_matrix, dest, task_counts);
    g.targets = exchange_grouped(comm, std::move(tasks), task_counts, "load task labels");
  }

  fetch_halo_degrees(comm, g);

  g.train = owned_split(comm, reader, "train", numbering.get(), g);
  g.valid = owned_split(comm, reader, "valid", numbering.get(), g);
  g.test = owned_split(comm, reader, "test", numbering.get(), g);
  renumber_ids(options.renumber, numbering.get());
  if (!options.require_labels) return g;
  int64_t labeled_train = 0;
  for (int64_t v : g.train) labeled_train += g.labels[size_t(v - g.first)] >= 0;
  comm.check(all_reduce_value(comm, labeled_train, ReduceOp::Sum, "load") > 0,
             path + ": no labeled node in split 'train'");
  return g;
}

}  // namespace tessera
