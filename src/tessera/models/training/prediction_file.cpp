// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/training/prediction_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

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
  std::vector<int64_t> nodes, classes;  // classes: single-label graphs
  std::vector<int8_t> positive;         // multi-label graphs: rows x tasks, 1 where a task's logit is > 0
  std::vector<float> probabilities, embeddings;
};

// The columns of what is written (0: not written); tasks > 0: a multi-label graph's.
struct Widths {
  int64_t tasks = 0, probabilities = 0, embeddings = 0;
};

void write_hdf5(const Communicator& comm, const std::string& path, const Selected& s, const Widths& w,
                const nlohmann::json& attributes) {
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
    if (w.tasks > 0)
      table("/predictions", H5T_STD_I8LE, H5T_NATIVE_INT8, {total, w.tasks}, s.positive.data());
    else
      table("/predictions", H5T_STD_I64LE, H5T_NATIVE_INT64, {total}, s.classes.data());
    if (w.probabilities > 0)
      table("/probabilities", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {total, w.probabilities},
            s.probabilities.data());
    if (w.embeddings > 0)
      table("/embeddings", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {total, w.embeddings}, s.embeddings.data());
  });
}

// Softmax of one logits row, in double.
void append_softmax(const float* z, int64_t c, int64_t top, std::vector<float>& out) {
  double sum = 0;
  for (int64_t j = 0; j < c; ++j) sum += std::exp(double(z[j]) - double(z[top]));
  for (int64_t j = 0; j < c; ++j) out.push_back(float(std::exp(double(z[j]) - double(z[top])) / sum));
}

// Each task's probability, the sigmoid of its logit, in double.
void append_sigmoids(const float* z, int64_t tasks, std::vector<float>& out) {
  for (int64_t j = 0; j < tasks; ++j) out.push_back(float(1.0 / (1.0 + std::exp(-double(z[j])))));
}

// This rank's lines of the CSV: node,prediction, or node,task0,task1,... of 0 and 1; rank 0 heads them.
std::string csv_lines(const Communicator& comm, const Selected& s, int64_t tasks) {
  std::string text;
  if (comm.rank() == 0) {
    text = tasks > 0 ? "node" : "node,prediction";
    for (int64_t j = 0; j < tasks; ++j) text += ",task" + std::to_string(j);
    text += '\n';
  }
  for (size_t k = 0; k < s.nodes.size(); ++k) {
    text += std::to_string(s.nodes[k]);
    if (tasks == 0) text += ',' + std::to_string(s.classes[k]);
    for (int64_t j = 0; j < tasks; ++j) text += s.positive[k * size_t(tasks) + size_t(j)] ? ",1" : ",0";
    text += '\n';
  }
  return text;
}

// Device copies of host values (the metric reads its batch from device views).
template <class T>
Vector<T> device_vector(const std::string& name, const std::vector<T>& values) {
  Vector<T> out(name, values.size());
  Kokkos::deep_copy(out, HostVector<const T>(values.data(), values.size()));
  return out;
}
template <class T>
Matrix<T> device_matrix(const std::string& name, const T* values, size_t rows, size_t cols) {
  Matrix<T> out(name, rows, cols);
  Kokkos::deep_copy(out, HostMatrix<const T>(values, rows, cols));
  return out;
}

// Collective: the metric on each split the file has (0 where it has none) over every rank's block, each
// rank's rows whole (the library's metric with this rank alone on the grid's axes and the ranks as `over`).
Accuracy score_splits(const Communicator& comm, const BlockRows& logits, const BlockTruth& truth,
                      MetricKind kind) {
  const size_t rows = logits.present.size(), c = size_t(logits.width), tasks = size_t(truth.tasks);
  const Matrix<float> z = device_matrix("predict.logits", logits.values.data(), rows, c);
  const Vector<int64_t> labels = device_vector("predict.labels", truth.labels);
  const Matrix<int8_t> targets =
      device_matrix("predict.targets", truth.targets.data(), tasks > 0 ? rows : 0, tasks);
  const Communicator alone(MPI_COMM_SELF, false, nullptr);
  const LogitsLayout layout{&alone, &alone, 0, logits.width};
  const std::unique_ptr<Metric> metric = make_metric(kind, tasks > 0);
  double values[3] = {0, 0, 0};
  for (int s = 0; s < 3; ++s) {
    if (!truth.has[s]) continue;  // the same on every rank: the file's splits
    const Vector<uint8_t> mask = device_vector("predict.mask", truth.in[s]);
    metric->add(LossInput{layout, z, labels, mask, targets});
    values[s] = metric->value(layout, comm);
  }
  Accuracy a{values[0], values[1], values[2]};
  a.metric = metric->name();
  return a;
}

}  // namespace

BlockTruth read_block_truth(const GraphFileReader& reader, const Communicator& comm) {
  const int64_t n = reader.meta().num_nodes;
  const auto [begin, end] = block_range(n, comm.rank(), comm.size());
  BlockTruth truth;
  truth.labels = reader.read_labels(begin, end - begin);
  if (reader.meta().multi_label) {
    truth.tasks = reader.meta().num_classes;
    truth.targets = reader.read_label_matrix(begin, end - begin);
  }
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
  // A row of floats per node (label, in train, valid, test, then its tasks' labels): exact, labels being
  // below 2^24.
  const size_t tasks = size_t(truth.tasks), width = 4 + tasks;
  BlockRows rows;
  rows.width = int64_t(width);
  rows.present.assign(truth.labels.size(), 1);
  for (size_t k = 0; k < truth.labels.size(); ++k) {
    rows.values.insert(rows.values.end(), {float(truth.labels[k]), float(truth.in[0][k]),
                                           float(truth.in[1][k]), float(truth.in[2][k])});
    for (size_t j = 0; j < tasks; ++j) rows.values.push_back(float(truth.targets[k * tasks + j]));
  }
  const BlockRows moved = to_output_order(comm, rows, order);
  BlockTruth out;
  out.tasks = truth.tasks;
  for (int s = 0; s < 3; ++s) out.has[s] = truth.has[s], out.in[s].resize(moved.present.size());
  out.labels.resize(moved.present.size());
  out.targets.resize(moved.present.size() * tasks);
  for (size_t k = 0; k < moved.present.size(); ++k) {
    const float* row = moved.values.data() + width * k;
    out.labels[k] = int64_t(row[0]);
    for (int s = 0; s < 3; ++s) out.in[s][k] = uint8_t(row[1 + s]);
    for (size_t j = 0; j < tasks; ++j) out.targets[k * tasks + j] = int8_t(row[4 + j]);
  }
  return out;
}

Accuracy write_prediction_file(const Communicator& comm, const BlockRows& logits, const BlockRows& embeddings,
                               const BlockTruth& truth, const PredictionWrite& what, int64_t& rows) {
  const int64_t c = logits.width, tasks = truth.tasks;
  Selected s;
  for (size_t i = 0; i < logits.present.size(); ++i) {
    require(logits.present[i], "predict: no logits for node ", logits.begin + int64_t(i));
    if (what.split >= 0 && !truth.in[what.split][i]) continue;
    const float* z = logits.values.data() + i * size_t(c);
    s.nodes.push_back(logits.begin + int64_t(i));
    if (tasks > 0) {
      for (int64_t j = 0; j < c; ++j) s.positive.push_back(z[j] > 0 ? 1 : 0);
      if (what.probabilities) append_sigmoids(z, c, s.probabilities);
    } else {
      const int64_t predicted = std::max_element(z, z + c) - z;  // the first largest, as argmax_3d
      s.classes.push_back(predicted);
      if (what.probabilities) append_softmax(z, c, predicted, s.probabilities);
    }
    if (embeddings.width > 0) {
      const auto row = embeddings.values.begin() + std::ptrdiff_t(i * size_t(embeddings.width));
      s.embeddings.insert(s.embeddings.end(), row, row + embeddings.width);
    }
  }
  const Accuracy scores = score_splits(comm, logits, truth, what.metric);
  rows = all_reduce_value(comm, int64_t(s.nodes.size()), ReduceOp::Sum, "outputs");
  if (!what.path.empty()) {
    nlohmann::json attributes = what.attributes;
    attributes["metric"] = scores.metric;
    const double values[3] = {scores.train, scores.valid, scores.test};
    for (int t = 0; t < 3; ++t)
      if (truth.has[t]) attributes[std::string("metric_") + kSplits[t]] = values[t];
    write_hdf5(comm, what.path, s, Widths{tasks, what.probabilities ? c : 0, embeddings.width}, attributes);
  }
  if (!what.csv.empty()) write_text_in_rank_order(comm, what.csv, csv_lines(comm, s, tasks), "predictions");
  return scores;
}

NodePairs read_node_pairs(const std::string& path, int64_t num_nodes, const Communicator& comm) {
  std::vector<int64_t> flat;
  comm.run_agreed([&] {
    if (comm.rank() != 0) return;
    std::ifstream in(path);
    require(in.good(), path, ": cannot be read (`edges`: a file of node pairs)");
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
      const size_t first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos || line[first] == '#') continue;
      std::replace(line.begin(), line.end(), ',', ' ');
      std::istringstream fields(line);
      int64_t u = -1, v = -1;
      std::string rest;
      require(bool(fields >> u >> v) && !(fields >> rest), path, ": line ", number,
              ": expected two node ids (source,target), not '", line, "'");
      require(u >= 0 && u < num_nodes && v >= 0 && v < num_nodes, path, ": line ", number, ": node ",
              u >= 0 && u < num_nodes ? v : u, " is outside the graph's ", num_nodes, " nodes");
      flat.push_back(u), flat.push_back(v);
    }
    require(!flat.empty(), path, ": no node pair in it (`edges`: one source,target pair per line)");
  });
  int64_t count = int64_t(flat.size());
  broadcast(comm, &count, 1, 0, "predict");
  flat.resize(size_t(count));
  broadcast(comm, flat.data(), count, 0, "predict");
  NodePairs pairs;
  for (size_t i = 0; i < flat.size(); i += 2)
    pairs.source.push_back(flat[i]), pairs.target.push_back(flat[i + 1]);
  return pairs;
}

void write_link_predictions(const Communicator& comm, const NodePairs& pairs,
                            const std::vector<double>& scores, const std::string& path,
                            const std::string& csv, const nlohmann::json& attributes) {
  const int64_t total = pairs.size(), rows = comm.rank() == 0 ? total : 0;
  std::vector<int64_t> edges;
  std::vector<float> score, probability;
  for (int64_t e = 0; e < rows; ++e) {
    edges.push_back(pairs.source[size_t(e)]), edges.push_back(pairs.target[size_t(e)]);
    score.push_back(float(scores[size_t(e)]));
    probability.push_back(float(1.0 / (1.0 + std::exp(-scores[size_t(e)]))));
  }
  if (!path.empty())
    write_hdf5_output(comm, path, "link predictions", [&](int64_t file) {
      write_attributes(file, attributes);
      const auto table = [&](const char* name, hid_t stored, hid_t memory, std::vector<int64_t> dims,
                             const void* data) {
        H5Handle d = h5_create_dataset(file, name, stored, dims, 0, false);
        h5_write_rows(d.get(), memory, 0, rows, data);
      };
      table("/edges", H5T_STD_I64LE, H5T_NATIVE_INT64, {total, 2}, edges.data());
      table("/scores", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {total}, score.data());
      table("/probabilities", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {total}, probability.data());
    });
  if (csv.empty()) return;
  std::string text = comm.rank() == 0 ? "source,target,score,probability\n" : "";
  char line[96];
  for (int64_t e = 0; e < rows; ++e) {
    std::snprintf(line, sizeof(line), "%lld,%lld,%.7g,%.7g\n", (long long)pairs.source[size_t(e)],
                  (long long)pairs.target[size_t(e)], double(score[size_t(e)]),
                  double(probability[size_t(e)]));
    text += line;
  }
  write_text_in_rank_order(comm, csv, text, "link predictions");
}

}  // namespace tessera
