// SPDX-License-Identifier: BSD-3-Clause
// GraphFileReader and the row blocks of a file (graph_file.hpp); the writer is graph_file_writer.cpp.
#include "tessera/graph/graph_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/impl/graph_file_layout.hpp"

namespace tessera {

std::pair<int64_t, int64_t> block_range(int64_t n, int rank, int ranks) {
  const int64_t base = n / ranks, extra = n % ranks;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

int block_owner(int64_t n, int64_t index, int ranks) {
  const int64_t base = n / ranks, extra = n % ranks, boundary = extra * (base + 1);
  return int(index < boundary ? index / (base + 1) : extra + (index - boundary) / base);
}

std::vector<int64_t> block_begins(int64_t n, int ranks) {
  std::vector<int64_t> begins;
  for (int r = 0; r < ranks; ++r) begins.push_back(block_range(n, r, ranks).first);
  begins.push_back(n);
  return begins;
}

namespace {

using graph_file_layout::kFeatureDtypeAttr;

// The attributes version 2 added (task, num_edge_features) into `meta`; a problem, or empty.
std::string read_version_2_attributes(const std::string& path, hid_t root, int64_t version, GraphMeta& meta) {
  std::string task;
  if (h5_read_attr(root, "task", task)) {
    if (version < 2)
      return path + ": root attribute 'task' in a version " + std::to_string(version) + " file";
    if (task != kMultiLabelTask && task != "single-label")
      return path + ": root attribute task is '" + task + "', expected 'single-label' or '" +
             kMultiLabelTask + "'";
    meta.multi_label = task == kMultiLabelTask;
  }
  if (h5_read_attr(root, "num_edge_features", meta.num_edge_features) && version < 2)
    return path + ": root attribute 'num_edge_features' in a version " + std::to_string(version) + " file";
  if (meta.num_edge_features < 0 || meta.num_edge_features > (int64_t(1) << 24))
    return path + ": root attribute num_edge_features is " + std::to_string(meta.num_edge_features) +
           " (0 to 2^24)";
  return "";
}

// Bytes of one stored value of `dataset`.
size_t h5_value_bytes(hid_t dataset) {
  const hid_t type = H5Dget_type(dataset);
  const size_t bytes = type < 0 ? 0 : H5Tget_size(type);
  if (type >= 0) H5Tclose(type);
  return bytes;
}

// How an open /node/features stores its values (into `dtype`); a problem, or empty. fp32: floats. bf16:
// 16-bit integers with the dtype attribute, in a version 3 file.
std::string read_feature_dtype(hid_t features, int64_t version, StorageDtype& dtype) {
  std::string marked;
  const bool has_mark = h5_read_attr(features, kFeatureDtypeAttr, marked);
  if (h5_type_class(features) == H5T_FLOAT) {
    dtype = StorageDtype::F32;
    return has_mark && marked != "f32" ? "dataset /node/features holds floats but says dtype '" + marked + "'"
                                       : "";
  }
  if (h5_type_class(features) != H5T_INTEGER || h5_value_bytes(features) != 2 || !has_mark ||
      marked != "bf16")
    return "dataset /node/features must hold floats, or bf16 bits (16-bit integers with attribute dtype = "
           "'bf16')";
  if (version < 3)
    return "dataset /node/features holds bf16 in a version " + std::to_string(version) +
           " file (bf16 features are version 3)";
  dtype = StorageDtype::Bf16;
  return "";
}

}  // namespace

// A view of the caller's communicator, not a reference to it: a reader built from a temporary such as
// Communicator::world() stays usable (its later collective checks once called through a dangling one).
GraphFileReader::GraphFileReader(const Communicator& comm, std::string path)
    : comm_(comm.get(), false, comm.shared_stats()), path_(std::move(path)) {
  prepare_hdf5();
  comm_.run_on(0, [&] { require_hdf5_signature(path_, "cannot read", "not an HDF5 file"); });
  file_ = h5_open_file(comm_, path_, false);
  comm_.check(file_.valid(), path_ + ": HDF5 cannot open the file (corrupt or truncated?)");

  // Every rank reads the same metadata, so each check below fails on all ranks alike.
  std::string problem;
  auto expect = [&](bool ok, const std::string& what) {
    if (ok || !problem.empty()) return;
    problem = path_ + ": " + what;
  };
  const hid_t root = file_.get();
  std::string format;
  int64_t version = 0, symmetric = 0;
  const bool has_format = h5_read_attr(root, "format", format);  // read before the message is built
  expect(has_format && format == kGraphFormat,
         "not a Tessera graph file: " + describe_format(format) +
             (format.empty() ? "" : " (root attribute format is '" + format + "')"));
  expect(h5_read_attr(root, "version", version), "root attribute 'version' is missing or not one integer");
  expect(version >= 1 && version <= kGraphVersion, "schema version " + std::to_string(version) +
                                                       ", this Tessera reads versions 1 to " +
                                                       std::to_string(kGraphVersion));
  if (problem.empty()) problem = read_version_2_attributes(path_, root, version, meta_);
  for (auto [name, value] : {std::pair<const char*, int64_t*>{"num_nodes", &meta_.num_nodes},
                             {"num_edges", &meta_.num_edges},
                             {"num_features", &meta_.num_features},
                             {"num_classes", &meta_.num_classes},
                             {"symmetric", &symmetric}})
    expect(h5_read_attr(root, name, *value),
           std::string("root attribute '") + name + "' is missing or not one integer");
  h5_read_attr(root, "name", meta_.name);
  h5_read_attr(root, "source", meta_.source);
  meta_.symmetric = symmetric != 0;
  // Bounds far past any real graph that keep every size the reader computes (n + 1, rows x features) inside
  // int64 and every row it reads inside memory.
  expect(meta_.num_nodes > 0 && meta_.num_nodes <= (int64_t(1) << 40) && meta_.num_edges >= 0 &&
             meta_.num_edges <= (int64_t(1) << 48) && meta_.num_features > 0 &&
             meta_.num_features <= (int64_t(1) << 24) && meta_.num_classes >= 0 &&
             meta_.num_classes <= (int64_t(1) << 24),
         "root attributes give impossible sizes (num_nodes " + std::to_string(meta_.num_nodes) +
             ", num_edges " + std::to_string(meta_.num_edges) + ", num_features " +
             std::to_string(meta_.num_features) + ", num_classes " + std::to_string(meta_.num_classes) +
             "; at most 2^40 nodes, 2^48 edges, 2^24 "
             "features and classes)");
  expect(!meta_.multi_label || meta_.num_classes > 0, "a multi-label graph with num_classes 0 (no task)");
  check(problem.empty(), problem);

  struct Expected {
    H5Handle* handle;
    const char* name;
    std::vector<int64_t> dims;
    H5T_class_t type;
  };
  const int64_t n = meta_.num_nodes;
  // A multi-label graph's labels are a matrix of tasks (named before the list: nvcc's front end crashed on a
  // conditional between two braced Expected inside it).
  std::vector<int64_t> label_dims{n};
  if (meta_.multi_label) label_dims.push_back(meta_.num_classes);
  for (const Expected& e : {Expected{&indptr_, "/graph/indptr", {n + 1}, H5T_INTEGER},
                            Expected{&indices_, "/graph/indices", {meta_.num_edges}, H5T_INTEGER},
                            Expected{&labels_, "/node/labels", label_dims, H5T_INTEGER}}) {
    if (!problem.empty()) break;
    if (!h5_exists(root, e.name)) {
      expect(false, std::string("dataset ") + e.name + " is missing");
      break;
    }
    *e.handle = h5_open_dataset(root, path_, e.name);
    const std::vector<int64_t> dims = h5_shape(e.handle->get());
    expect(dims == e.dims, std::string("dataset ") + e.name + " has shape " + h5_shape_text(dims) +
                               ", expected " + h5_shape_text(e.dims));
    expect(h5_type_class(e.handle->get()) == e.type,
           std::string("dataset ") + e.name +
               (e.type == H5T_FLOAT ? " must hold floats" : " must hold integers"));
  }
  // Features hold floats or bf16 bits (version 3), told apart by their type and attribute.
  if (problem.empty()) {
    expect(h5_exists(root, "/node/features"), "dataset /node/features is missing");
    if (problem.empty()) {
      features_ = h5_open_dataset(root, path_, "/node/features");
      const std::vector<int64_t> dims = h5_shape(features_.get()), want{n, meta_.num_features};
      expect(dims == want,
             "dataset /node/features has shape " + h5_shape_text(dims) + ", expected " + h5_shape_text(want));
      const std::string dtype_problem = read_feature_dtype(features_.get(), version, meta_.feature_dtype);
      expect(dtype_problem.empty(), dtype_problem);
    }
  }
  if (problem.empty() && meta_.num_edge_features > 0) {
    expect(h5_exists(root, "/edge/features"), "dataset /edge/features is missing (num_edge_features is " +
                                                  std::to_string(meta_.num_edge_features) + ")");
    if (problem.empty()) {
      edge_features_ = h5_open_dataset(root, path_, "/edge/features");
      const std::vector<int64_t> dims = h5_shape(edge_features_.get());
      const std::vector<int64_t> want{meta_.num_edges, meta_.num_edge_features};
      expect(dims == want && h5_type_class(edge_features_.get()) == H5T_FLOAT,
             "dataset /edge/features must be floats of shape " + h5_shape_text(want) + ", has shape " +
                 h5_shape_text(dims));
    }
  }
  if (problem.empty() && h5_exists(root, "/node/original_id")) {
    original_ids_ = h5_open_dataset(root, path_, "/node/original_id");
    const std::vector<int64_t> dims = h5_shape(original_ids_.get());
    expect(dims == std::vector<int64_t>{n} && h5_type_class(original_ids_.get()) == H5T_INTEGER,
           "dataset /node/original_id must be num_nodes integers, has shape " + h5_shape_text(dims));
  }
  if (problem.empty()) link_splits_ = read_link_layout(root, path_, version, problem);
  meta_.link_splits = !link_splits_.empty();
  for (const LinkSplitInfo& s : link_splits_)
    if (s.name == "train") meta_.link_train_pairs = s.edges;
  if (problem.empty()) {
    for (const std::string& name : h5_group_members(root, "/split")) {
      if (!problem.empty()) break;
      H5Handle dataset = h5_open_dataset(root, path_, "/split/" + name);
      const std::vector<int64_t> dims = h5_shape(dataset.get());
      expect(dims.size() == 1 && dims[0] <= n && h5_type_class(dataset.get()) == H5T_INTEGER,
             "dataset /split/" + name + " must be a 1D integer array of at most num_nodes ids, has shape " +
                 h5_shape_text(dims));
      if (problem.empty()) splits_.push_back(SplitInfo{name, dims[0]});
    }
  }
  check(problem.empty(), problem);
}

bool GraphFileReader::has_split(const std::string& name) const {
  for (const SplitInfo& s : splits_)
    if (s.name == name) return true;
  return false;
}

std::vector<int64_t> GraphFileReader::read_indptr(int64_t first, int64_t count) const {
  std::vector<int64_t> out(static_cast<size_t>(count));
  h5_read_rows(indptr_.get(), H5T_NATIVE_INT64, first, count, out.data());
  return out;
}

std::vector<int64_t> GraphFileReader::read_indices(int64_t first, int64_t count) const {
  std::vector<int64_t> out(static_cast<size_t>(count));
  h5_read_rows(indices_.get(), H5T_NATIVE_INT64, first, count, out.data());
  return out;
}

std::vector<float> GraphFileReader::read_features(int64_t first_row, int64_t rows) const {
  std::vector<float> out(size_t(rows * meta_.num_features));
  read_features_into(first_row, rows, out.data());
  return out;
}

void GraphFileReader::read_features_into(int64_t first_row, int64_t rows, float* out) const {
  if (meta_.feature_dtype == StorageDtype::F32)
    return h5_read_rows(features_.get(), H5T_NATIVE_FLOAT, first_row, rows, out);
  const std::vector<uint16_t> bits = read_features_bf16(first_row, rows);
  widen_bf16(bits.data(), out, bits.size());
}

std::vector<uint16_t> GraphFileReader::read_features_bf16(int64_t first_row, int64_t rows,
                                                          RowBlockCheck* check) const {
  std::vector<uint16_t> out(size_t(rows * meta_.num_features));
  read_bf16_into(first_row, rows, out.data(), check);
  return out;
}

void GraphFileReader::read_bf16_into(int64_t first_row, int64_t rows, uint16_t* out,
                                     RowBlockCheck* check) const {
  const int64_t f = meta_.num_features;
  if (meta_.feature_dtype == StorageDtype::Bf16) {
    h5_read_rows(features_.get(), H5T_NATIVE_UINT16, first_row, rows, out);
    if (check) check->features_bf16(out);
    return;
  }
  // An fp32 file through a buffer of 1 MiB of rows at most, so that the rows never exist as fp32 whole.
  // The reads are collective: every rank makes as many as the rank with the most chunks (empty ones after
  // its own rows).
  const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 18) / std::max<int64_t>(1, f));
  const int64_t reads = all_reduce_value(comm_, (rows + chunk - 1) / chunk, ReduceOp::Max, "read features");
  std::vector<float> values(size_t(std::min(rows, chunk) * f));
  for (int64_t k = 0, done = 0; k < reads; ++k, done = std::min(rows, done + chunk)) {
    const int64_t n = std::min(chunk, rows - done);
    h5_read_rows(features_.get(), H5T_NATIVE_FLOAT, first_row + done, n, values.data());
    if (check) check->features(values.data(), done, n);
    round_to_bf16(values.data(), out + done * f, size_t(n * f));
  }
}

std::vector<int64_t> GraphFileReader::read_labels(int64_t first, int64_t count) const {
  if (meta_.multi_label)
    return observed_rows(read_label_matrix(first, count).data(), count, meta_.num_classes);
  std::vector<int64_t> out(static_cast<size_t>(count));
  h5_read_rows(labels_.get(), H5T_NATIVE_INT64, first, count, out.data());
  return out;
}

std::vector<int8_t> GraphFileReader::read_label_matrix(int64_t first_row, int64_t rows) const {
  require(meta_.multi_label, path_, ": not a multi-label graph (its /node/labels holds one class per node)");
  std::vector<int8_t> out(size_t(rows * meta_.num_classes));
  h5_read_rows(labels_.get(), H5T_NATIVE_INT8, first_row, rows, out.data());
  return out;
}

std::vector<float> GraphFileReader::read_edge_features(int64_t first, int64_t count) const {
  require(edge_features_.valid(), path_, ": the graph has no /edge/features");
  std::vector<float> out(size_t(count * meta_.num_edge_features));
  h5_read_rows(edge_features_.get(), H5T_NATIVE_FLOAT, first, count, out.data());
  return out;
}

std::vector<int64_t> observed_rows(const int8_t* matrix, int64_t rows, int64_t tasks) {
  std::vector<int64_t> labels(size_t(rows), -1);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t t = 0; t < tasks && labels[size_t(i)] < 0; ++t)
      if (matrix[i * tasks + t] >= 0) labels[size_t(i)] = 0;
  return labels;
}

std::vector<int64_t> GraphFileReader::read_original_ids(int64_t first, int64_t count) const {
  require(has_original_ids(), path_, ": no dataset /node/original_id (not a reordered graph)");
  std::vector<int64_t> out(static_cast<size_t>(count));
  h5_read_rows(original_ids_.get(), H5T_NATIVE_INT64, first, count, out.data());
  return out;
}

std::vector<int64_t> GraphFileReader::read_split(const std::string& name, int64_t first,
                                                 int64_t count) const {
  require(has_split(name), path_, ": no split named '", name, "'");
  H5Handle dataset = h5_open_dataset(file_.get(), path_, "/split/" + name);
  std::vector<int64_t> out(static_cast<size_t>(count));
  h5_read_rows(dataset.get(), H5T_NATIVE_INT64, first, count, out.data());
  return out;
}

void GraphFileReader::check(bool ok, const std::string& problem) const {
  h5_check(comm_, ok, problem,
           {&indptr_, &indices_, &features_, &labels_, &original_ids_, &edge_features_, &file_});
}

GraphSlice GraphFileReader::read_rows(int64_t first_row, int64_t rows, StorageDtype features) const {
  GraphSlice slice;
  slice.first_row = first_row;
  RowBlockCheck values(*this, first_row, rows);
  const std::vector<int64_t> indptr = read_indptr(first_row, rows + 1);
  const auto [begin, end] = values.offsets(indptr);
  const int64_t nnz = end - begin;
  CsrMatrix<float, HostSpace>& a = slice.adjacency;
  a.num_rows = rows;
  a.num_cols = meta_.num_nodes;
  // Read in place: a copy through a vector doubled the slice's largest array while it was read.
  a.col_idx = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), size_t(nnz));
  h5_read_rows(indices_.get(), H5T_NATIVE_INT64, begin, nnz, a.col_idx.data());
  values.sources(a.col_idx.data());
  if (features == StorageDtype::Bf16) {
    slice.features_bf16 = HostMatrix<uint16_t>(Kokkos::ViewAllocateWithoutInitializing("features_bf16"),
                                               size_t(rows), size_t(meta_.num_features));
    read_bf16_into(first_row, rows, slice.features_bf16.data(), &values);
  } else {
    slice.features = HostMatrix<float>(Kokkos::ViewAllocateWithoutInitializing("features"), size_t(rows),
                                       size_t(meta_.num_features));
    read_features_into(first_row, rows, slice.features.data());
    values.features(slice.features.data());
  }
  slice.labels = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("labels"), size_t(rows));
  if (meta_.multi_label) {
    slice.label_matrix = HostMatrix<int8_t>(Kokkos::ViewAllocateWithoutInitializing("label_matrix"),
                                            size_t(rows), size_t(meta_.num_classes));
    h5_read_rows(labels_.get(), H5T_NATIVE_INT8, first_row, rows, slice.label_matrix.data());
    values.label_matrix(slice.label_matrix.data());
    const std::vector<int64_t> observed = observed_rows(slice.label_matrix.data(), rows, meta_.num_classes);
    std::copy(observed.begin(), observed.end(), slice.labels.data());
  } else {
    h5_read_rows(labels_.get(), H5T_NATIVE_INT64, first_row, rows, slice.labels.data());
    values.labels(slice.labels.data());
  }
  check(values.problem().empty(), values.problem());
  a.row_ptr = HostVector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("row_ptr"), size_t(rows + 1));
  for (int64_t i = 0; i <= rows; ++i) a.row_ptr(i) = indptr[size_t(i)] - begin;
  return slice;
}

// Each rank binary-searches the prefix cost for its own first row, reading one offset per step; every
// rank takes the same number of steps, because every read is collective.
std::vector<int64_t> balanced_row_begins(const GraphFileReader& reader, const Communicator& comm,
                                         const RowCosts& costs) {
  const GraphMeta& meta = reader.meta();
  const int64_t n = meta.num_nodes;
  const double edge_bytes = costs.edge_bytes > 0 ? costs.edge_bytes : 8.0;
  const double row_bytes = costs.row_bytes > 0
                               ? costs.row_bytes
                               : double(storage_bytes(meta.feature_dtype) * meta.num_features) + 17.0;
  const double total = edge_bytes * double(meta.num_edges) + row_bytes * double(n);
  const double target = total * comm.rank() / comm.size();
  int64_t lo = 0, hi = n;  // the first row is the smallest k in [lo, hi] whose prefix cost reaches target
  int steps = 0;
  while ((int64_t(1) << steps) <= n) ++steps;
  for (int s = 0; s < steps; ++s) {
    const int64_t mid = lo + (hi - lo) / 2;
    const std::vector<int64_t> offset = reader.read_indptr(mid, 1);
    if (edge_bytes * double(offset[0]) + row_bytes * double(mid) >= target)
      hi = mid;
    else
      lo = std::min(mid + 1, hi);
  }
  const int64_t mine = comm.rank() == 0 ? 0 : lo;
  std::vector<int64_t> begins(size_t(comm.size()) + 1, n);
  all_gather(comm, &mine, 1, begins.data(), "load rows");
  // An offset array that decreases (a corrupt file, which validation then names) must still give ranges.
  for (size_t r = 1; r < begins.size(); ++r) begins[r] = std::max(begins[r], begins[r - 1]);
  return begins;
}

}  // namespace tessera
