// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/training/node_outputs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <type_traits>

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/shared_output.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/hdf5_io.hpp"

namespace tessera {

std::pair<int64_t, int64_t> offset_in_rank_order(const Communicator& comm, int64_t mine) {
  std::vector<int64_t> counts(size_t(comm.size()));
  all_gather(comm, &mine, 1, counts.data(), "outputs");
  int64_t offset = 0, total = 0;
  for (int r = 0; r < comm.size(); ++r) offset += r < comm.rank() ? counts[size_t(r)] : 0;
  for (int64_t c : counts) total += c;
  return {offset, total};
}

void write_text_in_rank_order(const Communicator& comm, const std::string& path, const std::string& text,
                              const std::string& what) {
  // Each rank writes its text at the offset the lower ranks' text ends at.
  const int64_t bytes = int64_t(text.size());
  const int64_t offset = offset_in_rank_order(comm, bytes).first;
  SharedOutput output(comm, path, what);
  MPI_File file;
  const int opened = MPI_File_open(comm.get(), output.temporary().c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY,
                                   MPI_INFO_NULL, &file);
  comm.check(opened == MPI_SUCCESS, path + ": cannot write " + what);
  check_mpi(MPI_File_set_size(file, 0), "MPI_File_set_size");
  // In rounds of at most the MPI chunk limit, as many on every rank (the write is collective).
  const int64_t piece = mpi_chunk_bytes();
  const int64_t rounds = all_reduce_value(comm, (bytes + piece - 1) / piece, ReduceOp::Max, "outputs");
  int wrote = MPI_SUCCESS;
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t at = std::min(round * piece, bytes), length = std::min(piece, bytes - at);
    MPI_Status status;
    const int result =
        MPI_File_write_at_all(file, offset + at, text.data() + at, int(length), MPI_CHAR, &status);
    if (wrote == MPI_SUCCESS) wrote = result;
  }
  MPI_File_close(&file);
  const std::string problem =
      comm.first_problem(wrote == MPI_SUCCESS, path + ": writing " + what + " failed (disk full?)");
  if (!problem.empty()) {
    output.abandon();
    throw CollectiveError(problem);
  }
  output.commit();
}

static_assert(std::is_same<hid_t, int64_t>::value, "write_hdf5_output passes a hid_t as int64_t");

void write_hdf5_output(const Communicator& comm, const std::string& path, const std::string& what,
                       const std::function<void(int64_t file)>& fill) {
  prepare_hdf5();
  SharedOutput output(comm, path, what);  // removes its temporary unless committed
  {
    H5Handle file = h5_create_file(comm, output.temporary());
    fill(file.get());
  }
  output.commit();
}

namespace {

// Classes travel as floats, exact below 2^24 (the graph reader's bound on num_classes).
BlockRows prediction_table(const Communicator& comm, int64_t num_nodes, const NodeClasses& mine,
                           const OutputOrder& order) {
  NodeRowBlock rows;
  rows.nodes = mine.nodes;
  rows.cols = 1;
  rows.values.assign(mine.classes.begin(), mine.classes.end());
  return to_output_order(comm, assemble_block_rows(comm, num_nodes, 1, rows), order);
}

}  // namespace

void output_predictions(const Communicator& comm, const NodeOutputPaths& paths, int64_t num_nodes,
                        const NodeClasses& mine, const OutputOrder& order) {
  const BlockRows table = prediction_table(comm, num_nodes, mine, order);
  std::vector<int64_t> classes(table.present.size());
  for (size_t k = 0; k < classes.size(); ++k) classes[k] = table.present[k] ? int64_t(table.values[k]) : -1;
  if (!paths.predictions.empty()) {
    std::string text;
    for (const int64_t c : classes) text += std::to_string(c) + '\n';
    write_text_in_rank_order(comm, paths.predictions, text, "predictions");
  }
  if (paths.arrays == nullptr) return;
  paths.arrays->begin = table.begin;
  paths.arrays->classes = std::move(classes);
}

OutputOrder read_output_order(const Communicator& comm, const std::string& path) {
  if (path.empty()) return OutputOrder{};
  return read_output_order(GraphFileReader(comm, path), comm);
}

OutputOrder read_output_order(const GraphFileReader& reader, const Communicator& comm) {
  OutputOrder order;
  order.num_nodes = reader.meta().num_nodes;
  order.reordered = reader.has_original_ids();
  if (!order.reordered) return order;
  check_original_ids(reader, comm);  // a permutation, or no output row would be certain of its place
  const auto [begin, end] = block_range(order.num_nodes, comm.rank(), comm.size());
  order.ids = reader.read_original_ids(begin, end - begin);
  return order;
}

BlockRows to_output_order(const Communicator& comm, const BlockRows& rows, const OutputOrder& order) {
  if (!order.reordered) return rows;
  NodeRowBlock moved;
  moved.cols = rows.width;
  for (size_t k = 0; k < rows.present.size(); ++k) {
    if (!rows.present[k]) continue;
    moved.nodes.push_back(order.ids[k]);
    const auto row = rows.values.begin() + int64_t(k) * rows.width;
    moved.values.insert(moved.values.end(), row, row + rows.width);
  }
  return assemble_block_rows(comm, order.num_nodes, rows.width, moved);
}

BlockRows assemble_block_rows(const Communicator& comm, int64_t num_nodes, int64_t width,
                              const NodeRowBlock& mine) {
  const int p = comm.size();
  const int64_t real = std::max<int64_t>(0, std::min(mine.cols, width - mine.col_begin));  // padding dropped
  std::vector<std::vector<int64_t>> heads(static_cast<size_t>(p));
  std::vector<std::vector<float>> rows(static_cast<size_t>(p));
  for (size_t k = 0; k < mine.nodes.size(); ++k) {
    const size_t to = size_t(block_owner(num_nodes, mine.nodes[k], p));
    heads[to].insert(heads[to].end(), {mine.nodes[k], mine.col_begin, real});
    const float* row = mine.values.data() + k * size_t(mine.cols);
    rows[to].insert(rows[to].end(), row, row + real);
  }
  const std::vector<int64_t> got_heads = exchange_buckets(comm, heads, "outputs");
  const std::vector<float> got_rows = exchange_buckets(comm, rows, "outputs");
  const auto [begin, end] = block_range(num_nodes, comm.rank(), p);
  BlockRows out;
  out.begin = begin;
  out.width = width;
  out.values.assign(size_t((end - begin) * width), 0.0f);
  out.present.assign(size_t(end - begin), 0);
  size_t at = 0;
  for (size_t k = 0; k < got_heads.size(); k += 3) {
    out.present[size_t(got_heads[k] - begin)] = 1;
    float* row = out.values.data() + (got_heads[k] - begin) * width + got_heads[k + 1];
    for (int64_t j = 0; j < got_heads[k + 2]; ++j) row[j] = got_rows[at++];
  }
  return out;
}

void write_embeddings(const Communicator& comm, const std::string& path, int64_t num_nodes, int64_t width,
                      const NodeRowBlock& mine, const std::string& model, int64_t epoch,
                      const OutputOrder& order) {
  output_embeddings(comm, NodeOutputPaths{"", path, "", nullptr}, num_nodes, width, mine, model, epoch,
                    order);
}

void output_embeddings(const Communicator& comm, const NodeOutputPaths& paths, int64_t num_nodes,
                       int64_t width, const NodeRowBlock& mine, const std::string& model, int64_t epoch,
                       const OutputOrder& order) {
  BlockRows table = to_output_order(comm, assemble_block_rows(comm, num_nodes, width, mine), order);
  if (!paths.embeddings.empty()) {
    const int64_t rows = int64_t(table.present.size());
    write_hdf5_output(comm, paths.embeddings, "embeddings", [&](int64_t file) {
      h5_write_attr(file, "format", std::string("tessera-embeddings"));
      h5_write_attr(file, "model", model);
      h5_write_attr(file, "epoch", epoch);
      H5Handle data = h5_create_dataset(file, "/embeddings", H5T_IEEE_F32LE, {num_nodes, width}, 0, false);
      h5_write_rows(data.get(), H5T_NATIVE_FLOAT, table.begin, rows, table.values.data());
    });
  }
  if (paths.arrays == nullptr) return;
  paths.arrays->begin = table.begin;
  paths.arrays->width = width;
  paths.arrays->embeddings = std::move(table.values);
}

}  // namespace tessera
