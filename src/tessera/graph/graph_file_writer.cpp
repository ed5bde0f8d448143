// SPDX-License-Identifier: BSD-3-Clause
// GraphFileWriter (graph_file.hpp): a graph file written collectively into a temporary, renamed on commit.
#include <cstdio>
#include <exception>

#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/impl/graph_file_layout.hpp"

namespace tessera {

using graph_file_layout::feature_chunk_rows;
using graph_file_layout::kFeatureDtypeAttr;

GraphFileWriter::GraphFileWriter(const Communicator& comm, std::string path, const GraphMeta& meta,
                                 const std::map<std::string, int64_t>& split_sizes)
    : comm_(comm.get(), false, comm.shared_stats()), path_(std::move(path)) {
  comm_.check(meta.num_nodes > 0, path_ + ": a graph needs at least one node");
  comm_.check(meta.num_features > 0, path_ + ": a graph needs at least one feature per node");
  comm_.check(!meta.multi_label || meta.num_classes > 0,
              path_ + ": a multi-label graph needs at least one task");
  comm_.check(meta.num_edge_features >= 0, path_ + ": negative num_edge_features");
  // Fails early, with the operating system's reason, if the output cannot be created.
  output_ = std::make_unique<SharedOutput>(comm_, path_, "the graph file");
  temp_path_ = output_->temporary();
  prepare_hdf5();
  file_ = h5_create_file(comm_, temp_path_);
  const hid_t root = file_.get();
  h5_write_attr(root, "format", std::string(kGraphFormat));
  h5_write_attr(root, "version", meta.version());
  h5_write_attr(root, "name", meta.name);
  h5_write_attr(root, "source", meta.source);
  h5_write_attr(root, "num_nodes", meta.num_nodes);
  h5_write_attr(root, "num_edges", meta.num_edges);
  h5_write_attr(root, "num_features", meta.num_features);
  h5_write_attr(root, "num_classes", meta.num_classes);
  h5_write_attr(root, "symmetric", int64_t(meta.symmetric ? 1 : 0));
  if (meta.multi_label) h5_write_attr(root, "task", std::string(kMultiLabelTask));
  if (meta.num_edge_features > 0) h5_write_attr(root, "num_edge_features", meta.num_edge_features);
  const int64_t n = meta.num_nodes;
  meta_ = meta;
  indptr_ = h5_create_dataset(root, "/graph/indptr", H5T_STD_I64LE, {n + 1}, 0, false);
  indices_ =
      h5_create_dataset(root, "/graph/indices", H5T_STD_I64LE, {meta.num_edges}, int64_t(1) << 18, true);
  const bool bf16 = meta.feature_dtype == StorageDtype::Bf16;
  features_ = h5_create_dataset(root, "/node/features", bf16 ? H5T_STD_U16LE : H5T_IEEE_F32LE,
                                {n, meta.num_features}, feature_chunk_rows(meta.num_features), false);
  if (bf16) h5_write_attr(features_.get(), kFeatureDtypeAttr, std::string("bf16"));
  labels_ = meta.multi_label
                ? h5_create_dataset(root, "/node/labels", H5T_STD_I8LE, {n, meta.num_classes}, 0, false)
                : h5_create_dataset(root, "/node/labels", H5T_STD_I64LE, {n}, 0, false);
  if (meta.num_edge_features > 0)
    edge_features_ =
        h5_create_dataset(root, "/edge/features", H5T_IEEE_F32LE, {meta.num_edges, meta.num_edge_features},
                          feature_chunk_rows(meta.num_edge_features), true);
  for (const auto& [name, size] : split_sizes)
    splits_[name] = h5_create_dataset(root, "/split/" + name, H5T_STD_I64LE, {size}, 0, false);
}

GraphFileWriter::~GraphFileWriter() {
  if (committed_) return;
  if (std::uncaught_exceptions() > 0) {
    // Unwinding from an error: closing is collective and might block if other ranks are elsewhere, so
    // the handles are left to the shutdown hook (or to the abort); the file goes now.
    for (auto& [name, h] : splits_) h.release();
    for (H5Handle* h : {&indptr_, &indices_, &features_, &labels_, &original_ids_, &edge_features_, &file_})
      h->release();
    std::remove(temp_path_.c_str());
    return;
  }
  splits_.clear();
  for (H5Handle* h : {&indptr_, &indices_, &features_, &labels_, &original_ids_, &edge_features_, &file_})
    h->close();
  // output_ removes the temporary (rank 0)
}

void GraphFileWriter::write(const H5Handle& dataset, hid_t type, int64_t first, int64_t count,
                            const void* values) {
  try {
    h5_write_rows(dataset.get(), type, first, count, values);
  } catch (const Error& e) {
    // Name the file the user asked for, not its temporary name.
    std::string what = e.what();
    if (what.compare(0, temp_path_.size(), temp_path_) == 0) what = path_ + what.substr(temp_path_.size());
    throw Error(what);
  }
}

void GraphFileWriter::write_indptr(int64_t first, int64_t count, const int64_t* values) {
  write(indptr_, H5T_NATIVE_INT64, first, count, values);
}

void GraphFileWriter::write_indices(int64_t first, int64_t count, const int64_t* values) {
  write(indices_, H5T_NATIVE_INT64, first, count, values);
}

void GraphFileWriter::write_features(int64_t first_row, int64_t rows, const float* values) {
  if (meta_.feature_dtype == StorageDtype::F32)
    return write(features_, H5T_NATIVE_FLOAT, first_row, rows, values);
  std::vector<uint16_t> bits(size_t(rows * meta_.num_features));
  round_to_bf16(values, bits.data(), bits.size());
  write(features_, H5T_NATIVE_UINT16, first_row, rows, bits.data());
}

void GraphFileWriter::write_labels(int64_t first, int64_t count, const int64_t* values) {
  require(!meta_.multi_label, path_, ": write_labels on a multi-label graph (write_label_matrix)");
  write(labels_, H5T_NATIVE_INT64, first, count, values);
}

void GraphFileWriter::write_label_matrix(int64_t first_row, int64_t rows, const int8_t* values) {
  require(meta_.multi_label, path_, ": write_label_matrix on a single-label graph (write_labels)");
  write(labels_, H5T_NATIVE_INT8, first_row, rows, values);
}

void GraphFileWriter::write_edge_features(int64_t first, int64_t count, const float* values) {
  require(edge_features_.valid(), path_, ": write_edge_features on a graph declared without them");
  write(edge_features_, H5T_NATIVE_FLOAT, first, count, values);
}

void GraphFileWriter::write_split(const std::string& name, int64_t first, int64_t count,
                                  const int64_t* values) {
  auto it = splits_.find(name);
  require(it != splits_.end(), path_, ": split '", name, "' was not declared when the file was created");
  write(it->second, H5T_NATIVE_INT64, first, count, values);
}

void GraphFileWriter::write_original_ids(int64_t first, int64_t count, const int64_t* values) {
  if (!original_ids_.valid())
    original_ids_ =
        h5_create_dataset(file_.get(), "/node/original_id", H5T_STD_I64LE, {meta_.num_nodes}, 0, false);
  write(original_ids_, H5T_NATIVE_INT64, first, count, values);
}

void GraphFileWriter::set_num_edges(int64_t num_edges) {
  h5_set_extent(indices_.get(), {num_edges});
  if (edge_features_.valid()) h5_set_extent(edge_features_.get(), {num_edges, meta_.num_edge_features});
  meta_.num_edges = num_edges;
  h5_write_attr(file_.get(), "num_edges", num_edges);
}

void GraphFileWriter::write_link_rows(const std::string& split, const std::string& part, int64_t rows,
                                      int64_t columns, int64_t first, int64_t count, const int64_t* values) {
  const std::string name = "/link/" + split + "/" + part;
  H5Handle& dataset = links_[name];
  if (!dataset.valid())
    dataset = h5_create_dataset(file_.get(), name, H5T_STD_I64LE, {rows, columns}, 0, false);
  write(dataset, H5T_NATIVE_INT64, first, count, values);
}

void GraphFileWriter::commit() {
  splits_.clear();
  links_.clear();
  for (H5Handle* h : {&indptr_, &indices_, &features_, &labels_, &original_ids_, &edge_features_, &file_})
    h->close();
  output_->commit();
  committed_ = true;
}

}  // namespace tessera
