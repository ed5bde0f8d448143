// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/training/prediction_file.hpp"

#include <algorithm>
#include <cmath>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/hdf5_io.hpp"

namespace tessera {

namespace {

const char* const kSplits[3] = {"train", "valid", "test"};

void write_attributes(hid_t root, const nlohmann::json& attributes) {
  for (const auto& [key, value] : attributes.items()) {
    if (value.is_string())
      h5_write_attr(root, key, value.get<std::string>());
    else if (value.is_number_integer())
      h5_write_attr(root, key, value.get<int64_t>());
    else if (value.is_number())
      h5_write_attr(root, key, value.get<double>());
  }
}

// What this rank writes: its selected nodes' rows, in node order.
struct Selected {
  std::vector<int64_t> nodes, classes;
  std::vector<float> probabilities, embeddings;
};

void write_hdf5(const Communicator& comm, const std::string& path, const Selected& s, int64_t classes,
                int64_t embedding_width, const nlohmann::json& attributes) {
  const int64_t rows = int64_t(s.nodes.size());
  // Named, not a structured binding: lambdas capture those only from C++20 (nvcc warns).
  const auto placement = offset_in_rank_order(comm, rows);
  const int64_t first = placement.first, total = placement.second;
  write_hdf5_output(comm, path, "predictions", [&](int64_t file) {
    write_attributes(file, attributes);
    const auto table = [&](const char* name, hid_t stored, hid_t memory, std::vector<int64_t> dims,
                           const void* data) {
      H5Handle d = h5_create_dataset(file, name, stored, dims, 0, false);
      h5_write_rows(d.get(), memory, first, rows, data);
    };
    table("/nodes", H5T_STD_I64LE, H5T_NATIVE_INT64, {total}, s.nodes.data());
    table("/predictions", H5T_STD_I64LE, H5T_NATIVE_INT64, {total}, s.classes.data());
    if (classes > 0)
      table("/probabilities", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {total, classes}, s.probabilities.data());
    if (embedding_width > 0)
      table("/embeddings", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {total, embedding_width}, s.embeddings.data());
  });
}

// Softmax of one logits row, in double.
void append_probabilities(const float* z, int64_t c, int64_t top, std::vector<float>& out) {
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) sum += std::exp(double(z[j]) - double(z[top]));
  for (int64_t j = 0; j < c; ++j) out.push_back(float(std::exp(double(z[j]) - double(z[top])) / sum));
}

}  // namespace

BlockTruth read_block_truth(const GraphFileReader& reader, const Communicator& comm) {
  const int64_t n = reader.meta().num_nodes;
  const auto [begin, end] = block_range(n, comm.rank(), comm.size());
  BlockTruth truth;
  truth.labels = reader.read_labels(begin, end - begin);
  for (int s = 0; s < 3; ++s) {
    truth.in[s].assign(size_t(end - begin), 0);
    truth.has[s] = reader.has_split(kSplits[s]);
    if (!truth.has[s]) continue;
    int64_t size = 0;
    for (const SplitInfo& info : reader.splits()) size = info.name == kSplits[s] ? info.size : size;
    const auto [first, last] = block_range(size, comm.rank(), comm.size());
    std::vector<std::vector<int64_t>> to(static_cast<size_t>(comm.size()));
    bool ok = true;
    for (int64_t v : reader.read_split(kSplits[s], first, last - first)) {
      if (v < 0 || v >= n)
        ok = false;
      else
        to[size_t(block_owner(n, v, comm.size()))].push_back(v);
    }
    reader.check(ok, reader.path() + ": /split/" + kSplits[s] + " holds a node id outside [0, " +
                         std::to_string(n) + ")");
    for (int64_t v : exchange_buckets(comm, to, "outputs")) truth.in[s][size_t(v - begin)] = 1;
  }
  return truth;
}

BlockTruth truth_in_output_order(const Communicator& comm, const BlockTruth& truth,
                                 const OutputOrder& order) {
  if (!order.reordered) return truth;
  // A row of four floats per node (label, in train, valid, test): exact, labels being below 2^24.
  BlockRows rows;
  rows.width = 4;
  rows.present.assign(truth.labels.size(), 1);
  for (size_t k = 0; k < truth.labels.size(); ++k)
    rows.values.insert(rows.values.end(), {float(truth.labels[k]), float(truth.in[0][k]),
                                           float(truth.in[1][k]), float(truth.in[2][k])});
  const BlockRows moved = to_output_order(comm, rows, order);
  BlockTruth out;
  for (int s = 0; s < 3; ++s) out.has[s] = truth.has[s], out.in[s].resize(moved.present.size());
  out.labels.resize(moved.present.size());
  for (size_t k = 0; k < moved.present.size(); ++k) {
    const float* row = moved.values.data() + 4 * k;
    out.labels[k] = int64_t(row[0]);
    for (int s = 0; s < 3; ++s) out.in[s][k] = uint8_t(row[1 + s]);
  }
  return out;
}

Accuracy write_prediction_file(const Communicator& comm, const BlockRows& logits, const BlockRows& embeddings,
                               const BlockTruth& truth, const PredictionWrite& what, int64_t& rows) {
  const int64_t c = logits.width;
  Selected s;
  double counts[6] = {0, 0, 0, 0, 0, 0};  // correct and labeled per split
  const bool with_embeddings = embeddings.width > 0;
  for (size_t i = 0; i < logits.present.size(); ++i) {
    require(logits.present[i], "predict: no logits for node ", logits.begin + int64_t(i));
    const float* z = logits.values.data() + i * size_t(c);
    const int64_t predicted = std::max_element(z, z + c) - z;  // the first largest, as argmax_3d
    const int64_t label = truth.labels[i];
    for (int t = 0; t < 3; ++t)
      if (truth.in[t][i] && label >= 0) counts[2 * t] += predicted == label, counts[2 * t + 1] += 1;
    if (what.split >= 0 && !truth.in[what.split][i]) continue;
    s.nodes.push_back(logits.begin + int64_t(i));
    s.classes.push_back(predicted);
    if (what.probabilities) append_probabilities(z, c, predicted, s.probabilities);
    if (with_embeddings) {
      const auto row = embeddings.values.begin() + std::ptrdiff_t(i * size_t(embeddings.width));
      s.embeddings.insert(s.embeddings.end(), row, row + embeddings.width);
    }
  }
  all_reduce(comm, counts, 6, ReduceOp::Sum, "outputs");
  rows = all_reduce_value(comm, int64_t(s.nodes.size()), ReduceOp::Sum, "outputs");
  if (!what.path.empty())
    write_hdf5(comm, what.path, s, what.probabilities ? c : 0, embeddings.width, what.attributes);
  if (!what.csv.empty()) {
    std::string text = comm.rank() == 0 ? "node,prediction\n" : "";
    for (size_t k = 0; k < s.nodes.size(); ++k)
      text += std::to_string(s.nodes[k]) + ',' + std::to_string(s.classes[k]) + '\n';
    write_text_in_rank_order(comm, what.csv, text, "predictions");
  }
  Accuracy a;
  a.train = counts[1] > 0 ? counts[0] / counts[1] : 0.0;
  a.valid = counts[3] > 0 ? counts[2] / counts[3] : 0.0;
  a.test = counts[5] > 0 ? counts[4] / counts[5] : 0.0;
  return a;
}

}  // namespace tessera
