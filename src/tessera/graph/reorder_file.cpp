// SPDX-License-Identifier: BSD-3-Clause
// tessera prep reorder: a graph file renumbered by a locality ordering (reorder.hpp).
#include <algorithm>
#include <map>
#include <numeric>

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/hdf5_io.hpp"
#include "tessera/graph/partition.hpp"
#include "tessera/graph/reorder.hpp"

namespace tessera {

namespace {

// Every array of the input, each value checked as `tessera info` checks it.
// One /link/SPLIT/PART dataset, whole.
struct LinkRows {
  std::string split;
  LinkDataset dataset;
  std::vector<int64_t> ids;  // rows x columns node ids
};

struct WholeGraph {
  std::vector<int64_t> indptr, indices, labels, original;
  std::vector<float> features, edge_features;  // edge features: num_edges x width, in the indices' order
  std::vector<int8_t> label_matrix;            // multi-label graphs: nodes x tasks
  std::map<std::string, std::vector<int64_t>> splits;
  std::vector<LinkRows> links;  // every /link dataset
};

WholeGraph read_whole_graph(const GraphFileReader& reader, const Communicator& self) {
  const int64_t n = reader.meta().num_nodes;
  WholeGraph g;
  RowBlockCheck check(reader, 0, n);
  g.indptr = reader.read_indptr(0, n + 1);
  const auto [lo, hi] = check.offsets(g.indptr);
  g.indices = reader.read_indices(lo, hi - lo);
  check.sources(g.indices.data());
  if (reader.meta().multi_label) {
    g.label_matrix = reader.read_label_matrix(0, n);
    check.label_matrix(g.label_matrix.data());
  } else {
    g.labels = reader.read_labels(0, n);
    check.labels(g.labels.data());
  }
  g.features = reader.read_features(0, n);
  check.features(g.features.data());
  reader.check(check.problem().empty(), check.problem());
  read_split_marks(reader, self, {0, n});  // ids in range, none twice, no node in two splits
  check_original_ids(reader, self);
  for (const SplitInfo& s : reader.splits()) g.splits[s.name] = reader.read_split(s.name, 0, s.size);
  if (reader.has_original_ids()) g.original = reader.read_original_ids(0, n);
  check_link_splits(reader, self);
  for (const LinkSplitInfo& link : reader.link_splits())
    for (const LinkDataset& d : link_datasets(link))
      g.links.push_back({link.name, d, reader.read_link_rows(link.name, d.part, 0, d.rows)});
  check_edge_features(reader, self);
  if (reader.meta().num_edge_features > 0)
    g.edge_features = reader.read_edge_features(0, reader.meta().num_edges);
  return g;
}

// The names under /partition in the input: partitions of the old numbering, which the output does not carry.
std::vector<std::string> partition_names(const std::string& path) {
  const H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  return file.valid() ? h5_group_members(file.get(), "/partition") : std::vector<std::string>();
}

std::vector<int64_t> compute_order(const ReorderOptions& o, const WholeGraph& g) {
  const int64_t n = int64_t(g.indptr.size()) - 1;
  switch (o.ordering) {
    case NodeOrdering::Rcm:
      return rcm_order(symmetric_pattern(g.indptr, g.indices));
    case NodeOrdering::Degree:
      return degree_order(g.indptr);
    case NodeOrdering::Metis:
      break;
  }
  require(o.part_nodes > 0, "`part-nodes` must be positive, not ", o.part_nodes);
  const int64_t parts = std::max<int64_t>(1, (n + o.part_nodes - 1) / o.part_nodes);
  if (parts == 1) return order_by_part(std::vector<int32_t>(size_t(n), 0));
  return order_by_part(compute_partition(o.input, parts, PartitionMethod::Metis, 1));
}

// The renumbered adjacency: row i is the old row order[i], its sources renamed and ascending; old_edge[k]
// is the input's index of output edge k (what carries its features).
void renumber_edges(const WholeGraph& g, const std::vector<int64_t>& order,
                    const std::vector<int64_t>& new_of_old, std::vector<int64_t>& indptr,
                    std::vector<int64_t>& indices, std::vector<int64_t>& old_edge) {
  const size_t n = order.size();
  indptr.assign(n + 1, 0);
  indices.resize(g.indices.size());
  old_edge.resize(g.indices.size());
  for (size_t i = 0; i < n; ++i) {
    const int64_t old = order[i], begin = indptr[i],
                  degree = g.indptr[size_t(old) + 1] - g.indptr[size_t(old)];
    const auto first = old_edge.begin() + begin, last = first + degree;
    std::iota(first, last, g.indptr[size_t(old)]);
    const auto source = [&](int64_t k) { return new_of_old[size_t(g.indices[size_t(k)])]; };
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return source(a) < source(b); });
    for (int64_t k = begin; k < begin + degree; ++k) indices[size_t(k)] = source(old_edge[size_t(k)]);
    indptr[i + 1] = begin + degree;
  }
}

// Rows of `values` (width per row) in the order `take` lists them, written through `write` in 64 MiB pieces.
template <class T, class Write>
void write_rows_in_order(const std::vector<T>& values, int64_t width, const std::vector<int64_t>& take,
                         Write write) {
  const int64_t count_all = int64_t(take.size());
  const int64_t chunk =
      std::max<int64_t>(1, (int64_t(64) << 20) / (int64_t(sizeof(T)) * std::max<int64_t>(width, 1)));
  std::vector<T> rows;
  for (int64_t first = 0; first < count_all; first += chunk) {
    const int64_t count = std::min(chunk, count_all - first);
    rows.resize(size_t(count * width));
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(values.begin() + take[size_t(first + i)] * width, width, rows.begin() + i * width);
    write(first, count, rows.data());
  }
}

// Writes the output; returns edges_within(o.window) of the new numbering.
double write_reordered(const ReorderOptions& o, const GraphMeta& meta, const WholeGraph& g,
                       const std::vector<int64_t>& order, const Communicator& self) {
  const int64_t n = meta.num_nodes, f = meta.num_features;
  std::vector<int64_t> new_of_old(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) new_of_old[size_t(order[size_t(i)])] = i;
  std::map<std::string, int64_t> split_sizes;
  for (const auto& [name, ids] : g.splits) split_sizes[name] = int64_t(ids.size());
  GraphFileWriter out(self, o.output, meta, split_sizes);
  std::vector<int64_t> indptr, indices, old_edge;
  renumber_edges(g, order, new_of_old, indptr, indices, old_edge);
  out.write_indptr(0, n + 1, indptr.data());
  out.write_indices(0, int64_t(indices.size()), indices.data());
  if (meta.num_edge_features > 0)
    write_rows_in_order(
        g.edge_features, meta.num_edge_features, old_edge,
        [&](int64_t first, int64_t count, const float* v) { out.write_edge_features(first, count, v); });
  std::vector<int64_t> per_node(static_cast<size_t>(n));
  if (meta.multi_label)
    write_rows_in_order(
        g.label_matrix, meta.num_classes, order,
        [&](int64_t first, int64_t count, const int8_t* v) { out.write_label_matrix(first, count, v); });
  else {
    for (int64_t i = 0; i < n; ++i) per_node[size_t(i)] = g.labels[size_t(order[size_t(i)])];
    out.write_labels(0, n, per_node.data());
  }
  for (int64_t i = 0; i < n; ++i)
    per_node[size_t(i)] = g.original.empty() ? order[size_t(i)] : g.original[size_t(order[size_t(i)])];
  out.write_original_ids(0, n, per_node.data());
  for (const auto& [name, ids] : g.splits) {
    std::vector<int64_t> renamed(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) renamed[k] = new_of_old[size_t(ids[k])];
    std::sort(renamed.begin(), renamed.end());
    out.write_split(name, 0, int64_t(renamed.size()), renamed.data());
  }
  write_rows_in_order(g.features, f, order, [&](int64_t first, int64_t count, const float* v) {
    out.write_features(first, count, v);
  });
  for (const LinkRows& link : g.links) {  // the same pairs, in the new numbering
    std::vector<int64_t> renamed(link.ids.size());
    for (size_t k = 0; k < link.ids.size(); ++k) renamed[k] = new_of_old[size_t(link.ids[k])];
    const LinkDataset& d = link.dataset;
    out.write_link_rows(link.split, d.part, d.rows, d.columns, 0, d.rows, renamed.data());
  }
  out.commit();
  return edges_within(indptr, indices, o.window);
}

}  // namespace

ReorderReport reorder_graph_file(const ReorderOptions& o) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  ReorderReport report;
  WholeGraph g;
  {
    const GraphFileReader reader(self, o.input);
    report.meta = reader.meta();
    g = read_whole_graph(reader, self);
  }
  report.dropped = partition_names(o.input);
  Stopwatch watch;
  const std::vector<int64_t> order = compute_order(o, g);
  report.order_seconds = watch.seconds();
  require(int64_t(order.size()) == report.meta.num_nodes, o.input, ": the ordering numbered ", order.size(),
          " of ", report.meta.num_nodes, " nodes");
  report.within_before = edges_within(g.indptr, g.indices, o.window);
  GraphMeta& meta = report.meta;
  meta.source += std::string(meta.source.empty() ? "" : "; ") + "reordered (" +
                 node_ordering_name(o.ordering) + ") by tessera prep reorder";
  report.within_after = write_reordered(o, meta, g, order, self);
  return report;
}

}  // namespace tessera
