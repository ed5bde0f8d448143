// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/ogb.hpp"

#include <sys/stat.h>

#include <dirent.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/graph/npz_input.hpp"
#include "tessera/graph/text_input.hpp"

namespace tessera {
namespace {

bool is_file(const std::string& path) {
  struct stat s {};
  return stat(path.c_str(), &s) == 0 && S_ISREG(s.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat s {};
  return stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode);
}

std::vector<std::string> subdirectories(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && is_dir(path + "/" + name)) out.push_back(name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

using EdgeBlockFn = std::function<void(const int64_t* src, const int64_t* dst, size_t n)>;

// A dataset's labels: one class per node, or a multi-label matrix (ogbn-proteins) of 1 and 0.
struct OgbLabels {
  std::vector<int64_t> classes;  // N, -1 unlabeled; empty where `tasks` is set
  std::vector<int8_t> tasks;     // N x num_tasks
  int64_t num_tasks = 0;         // 0: single-label
};

// The two raw layouts behind one interface: N, the declared edge count, full passes over the edges
// (checked against N), the feature width, feature rows in order, and labels.
class OgbRaw {
 public:
  explicit OgbRaw(const std::string& dir) : dir_(dir) {
    require(is_dir(dir), dir, ": no such directory");
    if (is_file(dir + "/raw/edge.csv.gz")) {
      npz_ = false;
      const std::vector<int64_t> nodes = read_int_column(dir + "/raw/num-node-list.csv.gz");
      require(nodes.size() == 1, dir, "/raw/num-node-list.csv.gz: expected one graph, found ", nodes.size());
      num_nodes_ = nodes[0];
      const std::vector<int64_t> edges = read_int_column(dir + "/raw/num-edge-list.csv.gz");
      require(edges.size() == 1, dir, "/raw/num-edge-list.csv.gz: expected one graph, found ", edges.size());
      declared_edges_ = edges[0];
      features_from_edges_ =
          !is_file(dir + "/raw/node-feat.csv.gz") && is_file(dir + "/raw/edge-feat.csv.gz");
      require(features_from_edges_ || is_file(dir + "/raw/node-feat.csv.gz"), dir,
              "/raw/node-feat.csv.gz: missing (Tessera needs node features, or raw/edge-feat.csv.gz to make "
              "them from)");
      require(is_file(dir + "/raw/node-label.csv.gz"), dir, "/raw/node-label.csv.gz: missing");
    } else if (is_file(dir + "/raw/data.npz")) {
      npz_ = true;
      NpyStream nodes(dir + "/raw/data.npz", "num_nodes_list");
      require(nodes.header().count() == 1, dir, "/raw/data.npz: num_nodes_list holds ",
              nodes.header().count(), " graphs, expected one");
      nodes.read(&num_nodes_, 1);
      NpyStream edges(dir + "/raw/data.npz", "edge_index");
      require(edges.header().shape.size() == 2 && edges.header().shape[0] == 2, dir,
              "/raw/data.npz: edge_index must have shape (2, E)");
      declared_edges_ = edges.header().shape[1];
      require(is_file(dir + "/raw/node-label.npz"), dir, "/raw/node-label.npz: missing");
    } else {
      fail(dir,
           ": neither raw/edge.csv.gz nor raw/data.npz found (expected an OGB node-property dataset "
           "directory, e.g. ogbn_arxiv/)");
    }
    require(num_nodes_ > 0, dir, ": the graph has no nodes");
  }

  int64_t num_nodes() const { return num_nodes_; }
  int64_t declared_edges() const { return declared_edges_; }
  std::string edge_file() const { return dir_ + (npz_ ? "/raw/data.npz" : "/raw/edge.csv.gz"); }

  // One full pass over the edges in blocks; node ids are checked against N here.
  void scan_edges(const EdgeBlockFn& fn) const {
    constexpr size_t block = size_t(1) << 16;
    std::vector<int64_t> src, dst;
    src.reserve(block);
    dst.reserve(block);
    int64_t rows = 0;
    if (!npz_) {
      GzipLineReader reader(edge_file());
      std::vector<std::string_view> fields;
      std::string_view line;
      while (reader.next(line)) {
        split_csv(line, fields);
        require(fields.size() == 2, reader.path(), ": line ", reader.line_number(),
                ": expected 2 columns, found ", fields.size());
        const int64_t u = parse_int(fields[0], reader, 0), v = parse_int(fields[1], reader, 1);
        require(u >= 0 && u < num_nodes_ && v >= 0 && v < num_nodes_, reader.path(), ": line ",
                reader.line_number(), ": node id ", (u >= 0 && u < num_nodes_) ? v : u, " out of range [0, ",
                num_nodes_, ")");
        src.push_back(u);
        dst.push_back(v);
        if (src.size() == block) fn(src.data(), dst.data(), block), src.clear(), dst.clear();
        ++rows;
      }
    } else {
      NpyStream sources(edge_file(), "edge_index"), targets(edge_file(), "edge_index");
      targets.skip(declared_edges_);
      for (int64_t done = 0; done < declared_edges_; done += int64_t(src.size())) {
        src.resize(size_t(std::min<int64_t>(block, declared_edges_ - done)));
        dst.resize(src.size());
        sources.read(src.data(), int64_t(src.size()));
        targets.read(dst.data(), int64_t(dst.size()));
        for (size_t k = 0; k < src.size(); ++k)
          require(src[k] >= 0 && src[k] < num_nodes_ && dst[k] >= 0 && dst[k] < num_nodes_, edge_file(),
                  ": edge_index column ", done + int64_t(k), ": node id out of range [0, ", num_nodes_, ")");
        fn(src.data(), dst.data(), src.size());
      }
      src.clear();
      rows = declared_edges_;
    }
    if (!src.empty()) fn(src.data(), dst.data(), src.size());
    require(rows == declared_edges_, edge_file(), ": ", rows, " edges, but the dataset declares ",
            declared_edges_, " (num-edge-list)");
  }

  int64_t num_features() const {
    if (features_from_edges_) return csv_columns(dir_ + "/raw/edge-feat.csv.gz");
    if (npz_) {
      NpyStream feats(dir_ + "/raw/data.npz", "node_feat");
      require(feats.header().shape.size() == 2 && feats.header().shape[0] == num_nodes_, dir_,
              "/raw/data.npz: node_feat must have shape (", num_nodes_, ", F)");
      return feats.header().shape[1];
    }
    return csv_columns(dir_ + "/raw/node-feat.csv.gz");
  }

  // Each node's features as the mean of its edges' rows of edge-feat.csv.gz (its in-edges; every incident
  // edge when `both_ends`, as the symmetrized graph's in-edges), read beside edge.csv.gz, in blocks.
  void scan_edge_feature_means(int64_t features, bool both_ends,
                               const std::function<void(int64_t, int64_t, const float*)>& fn) const {
    std::vector<double> sums(size_t(num_nodes_ * features), 0.0);
    std::vector<int64_t> count(size_t(num_nodes_), 0);
    GzipLineReader reader(dir_ + "/raw/edge-feat.csv.gz");
    std::vector<std::string_view> fields;
    std::string_view line;
    int64_t read = 0;
    scan_edges([&](const int64_t* src, const int64_t* dst, size_t n) {
      for (size_t k = 0; k < n; ++k, ++read) {
        require(reader.next(line), reader.path(), ": ", read, " rows, but edge.csv.gz lists more edges");
        split_csv(line, fields);
        require(int64_t(fields.size()) == features, reader.path(), ": line ", reader.line_number(),
                ": expected ", features, " columns, found ", fields.size());
        for (const int64_t v : {dst[k], src[k]}) {
          for (int64_t c = 0; c < features; ++c)
            sums[size_t(v * features + c)] += parse_finite_float(fields[size_t(c)], reader, size_t(c));
          ++count[size_t(v)];
          if (!both_ends || src[k] == dst[k]) break;
        }
      }
    });
    require(!reader.next(line), reader.path(), ": more rows than the ", read, " edges");
    const int64_t block = std::max<int64_t>(1, (int64_t(16) << 20) / (4 * features));
    std::vector<float> values;
    for (int64_t first = 0; first < num_nodes_; first += block) {
      const int64_t rows = std::min(block, num_nodes_ - first);
      values.assign(size_t(rows * features), 0.0f);
      for (int64_t i = 0; i < rows * features; ++i) {
        const int64_t edges = count[size_t(first + i / features)];
        if (edges > 0) values[size_t(i)] = float(sums[size_t(first * features + i)] / double(edges));
      }
      fn(first, rows, values.data());
    }
  }

  // Calls fn(first_row, rows, values) for consecutive blocks of feature rows.
  void scan_features(int64_t features, bool symmetrize,
                     const std::function<void(int64_t, int64_t, const float*)>& fn) const {
    if (features_from_edges_) return scan_edge_feature_means(features, symmetrize, fn);
    const int64_t block = std::max<int64_t>(1, (int64_t(16) << 20) / (4 * features));
    std::vector<float> values;
    values.reserve(size_t(block * features));
    int64_t first = 0;
    if (npz_) {
      NpyStream feats(dir_ + "/raw/data.npz", "node_feat");
      for (; first < num_nodes_; first += block) {
        const int64_t rows = std::min(block, num_nodes_ - first);
        values.resize(size_t(rows * features));
        feats.read(values.data(), int64_t(values.size()));
        for (size_t k = 0; k < values.size(); ++k)
          require(std::isfinite(values[k]), dir_, "/raw/data.npz: node_feat row ",
                  first + int64_t(k) / features, ", column ", int64_t(k) % features, " is ", values[k],
                  " (features must be finite)");
        fn(first, rows, values.data());
      }
      return;
    }
    GzipLineReader reader(dir_ + "/raw/node-feat.csv.gz");
    std::vector<std::string_view> fields;
    std::string_view line;
    int64_t rows = 0;
    while (reader.next(line)) {
      split_csv(line, fields);
      require(int64_t(fields.size()) == features, reader.path(), ": line ", reader.line_number(),
              ": expected ", features, " columns, found ", fields.size());
      require(first + rows < num_nodes_, reader.path(), ": more than ", num_nodes_, " rows");
      for (size_t c = 0; c < fields.size(); ++c) values.push_back(parse_finite_float(fields[c], reader, c));
      if (++rows == block) fn(first, rows, values.data()), first += rows, rows = 0, values.clear();
    }
    if (rows > 0) fn(first, rows, values.data());
    require(first + rows == num_nodes_, reader.path(), ": ", first + rows, " rows, expected ", num_nodes_);
  }

  bool features_from_edges() const { return features_from_edges_; }

  OgbLabels labels() const {
    OgbLabels y;
    if (npz_) {
      const std::string file = dir_ + "/raw/node-label.npz";
      NpyStream stream(file, "node_label");
      require(stream.header().count() == num_nodes_, file, ": node_label has ", stream.header().count(),
              " entries, expected ", num_nodes_, " (multi-label tasks are not supported)");
      std::vector<double> raw(static_cast<size_t>(num_nodes_));
      stream.read(raw.data(), num_nodes_);
      y.classes.resize(raw.size());
      for (size_t i = 0; i < raw.size(); ++i) {
        // OGB marks unlabeled papers100M nodes with NaN.
        require(std::isnan(raw[i]) || (raw[i] >= 0 && raw[i] == std::floor(raw[i])), file,
                ": node_label row ", i, " is ", raw[i], ", not a class id");
        y.classes[i] = std::isnan(raw[i]) ? -1 : int64_t(raw[i]);
      }
      return y;
    }
    // One column: a class per node; several (ogbn-proteins' 112): a binary task per column.
    const std::string file = dir_ + "/raw/node-label.csv.gz";
    const int64_t columns = csv_columns(file);
    y.num_tasks = columns > 1 ? columns : 0;
    GzipLineReader reader(file);
    std::vector<std::string_view> fields;
    std::string_view line;
    int64_t rows = 0;
    while (reader.next(line)) {
      split_csv(line, fields);
      require(int64_t(fields.size()) == columns, file, ": line ", reader.line_number(), ": expected ",
              columns, " columns, found ", fields.size());
      for (size_t c = 0; c < fields.size(); ++c) {
        require(fields[c] != "nan", file, ": line ", reader.line_number(), ": label is nan");
        const int64_t label = parse_int(fields[c], reader, c);
        require(label >= -1 && (columns == 1 || label <= 1), file, ": line ", reader.line_number(),
                ", column ", c + 1, ": label ", label,
                columns == 1 ? " is negative" : " (a task's labels are 1, 0 or -1)");
        if (columns == 1)
          y.classes.push_back(label);
        else
          y.tasks.push_back(int8_t(label));
      }
      ++rows;
    }
    require(rows == num_nodes_, file, ": ", rows, " rows, expected ", num_nodes_);
    return y;
  }

 private:
  std::string dir_;
  bool npz_ = false, features_from_edges_ = false;
  int64_t num_nodes_ = 0, declared_edges_ = 0;

  static int64_t csv_columns(const std::string& path) {
    GzipLineReader reader(path);
    std::string_view line;
    require(reader.next(line), reader.path(), ": empty file");
    std::vector<std::string_view> fields;
    split_csv(line, fields);
    return int64_t(fields.size());
  }
};

std::string resolve_split_dir(const std::string& dir, const std::string& wanted) {
  const std::vector<std::string> kinds = subdirectories(dir + "/split");
  require(!kinds.empty(), dir, "/split: missing (expected split/<kind>/{train,valid,test}.csv.gz)");
  if (wanted.empty()) {
    std::string all;
    for (const std::string& k : kinds) all += (all.empty() ? "" : ", ") + k;
    require(kinds.size() == 1, dir, "/split holds several splits (", all, "); choose one with `split`");
    return dir + "/split/" + kinds[0];
  }
  require(std::find(kinds.begin(), kinds.end(), wanted) != kinds.end(), dir, "/split/", wanted,
          ": no such split");
  return dir + "/split/" + wanted;
}

}  // namespace

GraphMeta convert_ogb(const OgbConvertOptions& options, const Communicator& self) {
  require(self.size() == 1, "convert_ogb runs on one process");
  const OgbRaw raw(options.dataset_dir);
  const int64_t n = raw.num_nodes();

  // Everything O(N) is read and checked before the output is created.
  const std::string split_dir = resolve_split_dir(options.dataset_dir, options.split);
  std::map<std::string, std::vector<int64_t>> splits;
  for (const char* kind : {"train", "valid", "test"}) {
    const std::string file = split_dir + "/" + kind + ".csv.gz";
    require(is_file(file), file, ": missing");
    std::vector<int64_t> ids = read_int_column(file);
    for (size_t i = 0; i < ids.size(); ++i)
      require(ids[i] >= 0 && ids[i] < n, file, ": line ", i + 1, ": node id ", ids[i], " out of range [0, ",
              n, ")");
    splits[kind] = std::move(ids);
  }
  const OgbLabels labels = raw.labels();
  const int64_t num_classes = labels.num_tasks > 0 ? labels.num_tasks
                              : labels.classes.empty()
                                  ? 0
                                  : *std::max_element(labels.classes.begin(), labels.classes.end()) + 1;
  const int64_t features = raw.num_features();

  // Pass 1: in-degree of every node (both directions when symmetrizing), which sizes the edge buckets.
  std::vector<int64_t> degree(size_t(n), 0);
  {
    Progress progress("prep: counting edges", raw.declared_edges());
    raw.scan_edges([&](const int64_t* src, const int64_t* dst, size_t count) {
      for (size_t k = 0; k < count; ++k) {
        ++degree[size_t(dst[k])];
        if (options.symmetrize && src[k] != dst[k]) ++degree[size_t(src[k])];
      }
      progress.advance(int64_t(count));
    });
  }

  GraphMeta meta;
  meta.name = options.name.empty() ? base_name(options.dataset_dir) : options.name;
  meta.source = "ogb raw layout: " + options.dataset_dir + (options.symmetrize ? " (symmetrized)" : "") +
                (raw.features_from_edges() ? "; node features: the mean of their edges' edge-feat rows" : "");
  meta.multi_label = labels.num_tasks > 0;
  meta.num_nodes = n;
  meta.num_features = features;
  meta.num_classes = num_classes;
  meta.symmetric = options.symmetrize;
  meta.feature_dtype = options.feature_dtype;
  std::map<std::string, int64_t> split_sizes;
  for (const auto& [kind, ids] : splits) split_sizes[kind] = int64_t(ids.size());
  GraphFileWriter writer(self, options.output, meta, split_sizes);

  // Edge passes: each fills the rows of a destination range whose entries fit the memory budget.
  const int64_t budget_entries = std::max<int64_t>(1, options.edge_memory_bytes / 8);
  std::vector<int64_t> indptr;
  int64_t written = 0;
  for (int64_t lo = 0; lo < n;) {
    int64_t hi = lo, entries = 0;
    while (hi < n && (hi == lo || entries + degree[size_t(hi)] <= budget_entries))
      entries += degree[size_t(hi++)];
    std::vector<int64_t> offset(size_t(hi - lo + 1), 0);
    for (int64_t v = lo; v < hi; ++v) offset[size_t(v - lo + 1)] = offset[size_t(v - lo)] + degree[size_t(v)];
    std::vector<int64_t> bucket(static_cast<size_t>(entries)), fill(offset.begin(), offset.end() - 1);
    Progress progress("prep: edges of rows [" + std::to_string(lo) + ", " + std::to_string(hi) + ")",
                      raw.declared_edges());
    raw.scan_edges([&](const int64_t* src, const int64_t* dst, size_t count) {
      for (size_t k = 0; k < count; ++k) {
        if (dst[k] >= lo && dst[k] < hi) bucket[size_t(fill[size_t(dst[k] - lo)]++)] = src[k];
        if (options.symmetrize && src[k] != dst[k] && src[k] >= lo && src[k] < hi)
          bucket[size_t(fill[size_t(src[k] - lo)]++)] = dst[k];
      }
      progress.advance(int64_t(count));
    });
    // Sort every row (a deterministic order); a symmetrized graph also drops duplicate edges.
    std::vector<int64_t> compact;
    compact.reserve(bucket.size());
    std::vector<int64_t> part_indptr(size_t(hi - lo));
    for (int64_t v = lo; v < hi; ++v) {
      auto first = bucket.begin() + offset[size_t(v - lo)],
           last = bucket.begin() + offset[size_t(v - lo + 1)];
      std::sort(first, last);
      if (options.symmetrize) last = std::unique(first, last);
      part_indptr[size_t(v - lo)] = written + int64_t(compact.size());
      compact.insert(compact.end(), first, last);
    }
    writer.write_indptr(lo, hi - lo, part_indptr.data());
    writer.set_num_edges(written + int64_t(compact.size()));
    writer.write_indices(written, int64_t(compact.size()), compact.data());
    written += int64_t(compact.size());
    lo = hi;
  }
  writer.write_indptr(n, 1, &written);
  meta.num_edges = written;

  {
    Progress progress("prep: features", n);
    raw.scan_features(features, options.symmetrize, [&](int64_t first, int64_t rows, const float* values) {
      writer.write_features(first, rows, values);
      progress.set(first + rows);
    });
  }
  if (meta.multi_label)
    writer.write_label_matrix(0, n, labels.tasks.data());
  else
    writer.write_labels(0, n, labels.classes.data());
  for (const auto& [kind, ids] : splits) writer.write_split(kind, 0, int64_t(ids.size()), ids.data());
  writer.commit();
  return meta;
}

}  // namespace tessera
