// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/fingerprint.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tessera/comm/collectives.hpp"

namespace tessera {

namespace {

constexpr int64_t kSampledRows = 64;
constexpr int64_t kEdgesPerRow = 8;

// FNV-1a over raw bytes: stable across runs and machines of one byte order.
class Fnv {
 public:
  void add(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) hash_ = (hash_ ^ p[i]) * 1099511628211ull;
  }
  template <class T>
  void add(const std::vector<T>& values) {
    add(values.data(), values.size() * sizeof(T));
  }
  void add(const std::string& text) { add(text.data(), text.size() + 1); }
  void add(int64_t value) { add(&value, sizeof(value)); }
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", (unsigned long long)hash_);
    return text;
  }

 private:
  uint64_t hash_ = 1469598103934665603ull;
};

GraphIdentity read_identity(const std::string& path) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const GraphFileReader reader(self, path);
  GraphIdentity id;
  id.meta = reader.meta();
  Fnv h;
  const GraphMeta& m = id.meta;
  for (int64_t v : {m.num_nodes, m.num_edges, m.num_features, m.num_classes, int64_t(m.symmetric)}) h.add(v);
  // Only where present, so that a version 1 file keeps the fingerprint its checkpoints carry.
  if (m.multi_label || m.num_edge_features > 0)
    h.add(std::vector<int64_t>{int64_t(m.multi_label), m.num_edge_features});
  for (const SplitInfo& s : reader.splits()) {
    id.splits[s.name] = s.size;
    h.add(s.name);
    h.add(s.size);
    if (s.size > 0) {
      h.add(reader.read_split(s.name, 0, 1));
      h.add(reader.read_split(s.name, s.size - 1, 1));
    }
  }
  // Link splits (only where present, as above): their sizes and first and last pairs.
  for (const LinkSplitInfo& s : reader.link_splits()) {
    h.add(s.name);
    h.add(std::vector<int64_t>{s.edges, s.shared_negatives, s.negatives_per_edge});
    if (s.edges > 0) {
      h.add(reader.read_link_rows(s.name, "edges", 0, 1));
      h.add(reader.read_link_rows(s.name, "edges", s.edges - 1, 1));
    }
  }
  const int64_t samples = std::min(kSampledRows, m.num_nodes);
  for (int64_t k = 0; k < samples; ++k) {
    const int64_t row = samples > 1 ? k * (m.num_nodes - 1) / (samples - 1) : 0;
    h.add(reader.read_features(row, 1));
    if (m.multi_label) {
      const std::vector<int8_t> tasks = reader.read_label_matrix(row, 1);
      h.add(std::vector<int64_t>(tasks.begin(), tasks.end()));
    } else {
      h.add(reader.read_labels(row, 1));
    }
    const std::vector<int64_t> offsets = reader.read_indptr(row, 2);
    h.add(offsets);
    const int64_t edges = std::min(kEdgesPerRow, std::max<int64_t>(0, offsets[1] - offsets[0]));
    if (edges > 0 && offsets[0] >= 0 && offsets[0] + edges <= m.num_edges)
      h.add(reader.read_indices(offsets[0], edges));
  }
  id.fingerprint = h.hex();
  return id;
}

}  // namespace

GraphIdentity graph_identity(const Communicator& comm, const std::string& path) {
  GraphIdentity id;
  std::string text;
  comm.run_on(0, [&] {
    id = read_identity(path);
    nlohmann::json j = {{"name", id.meta.name},
                        {"nodes", id.meta.num_nodes},
                        {"edges", id.meta.num_edges},
                        {"features", id.meta.num_features},
                        {"classes", id.meta.num_classes},
                        {"symmetric", id.meta.symmetric},
                        {"multi_label", id.meta.multi_label},
                        {"edge_features", id.meta.num_edge_features},
                        {"link_splits", id.meta.link_splits},
                        {"splits", id.splits},
                        {"fingerprint", id.fingerprint}};
    text = j.dump();
  });
  int64_t size = int64_t(text.size());
  broadcast(comm, &size, 1, 0, "graph identity");
  text.resize(size_t(size));
  broadcast(comm, text.data(), size, 0, "graph identity");
  if (comm.rank() == 0) return id;
  const nlohmann::json j = nlohmann::json::parse(text);
  id.meta.name = j["name"];
  id.meta.num_nodes = j["nodes"];
  id.meta.num_edges = j["edges"];
  id.meta.num_features = j["features"];
  id.meta.num_classes = j["classes"];
  id.meta.symmetric = j["symmetric"];
  id.meta.multi_label = j["multi_label"];
  id.meta.num_edge_features = j["edge_features"];
  id.meta.link_splits = j["link_splits"];
  id.splits = j["splits"].get<std::map<std::string, int64_t>>();
  id.fingerprint = j["fingerprint"];
  return id;
}

}  // namespace tessera
