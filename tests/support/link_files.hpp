// SPDX-License-Identifier: BSD-3-Clause
// Graph files with link splits for the link tests: a 37-node synthetic graph with /link datasets written
// into it, and rows of random pairs and of negative targets.
#pragma once

#include <map>
#include <random>
#include <string>
#include <tessera/tessera.hpp>
#include <vector>

#include "fixtures.hpp"
#include "tessera/graph/hdf5_io.hpp"

namespace tessera {

// A quiet link-task run of three epochs on `path`: a GCN 8 wide to `embedding_dim` embeddings, no dropout.
inline TrainOptions link_run_options(const std::string& path, int64_t embedding_dim) {
  TrainOptions o;
  o.data = path;
  o.task.kind = TaskKind::Link;
  o.task.embedding_dim = embedding_dim;
  o.model.hidden = 8;
  o.model.dropout = o.model.input_dropout = 0;
  o.trainer.epochs = 3;
  o.outputs.quiet = true;
  o.grid.memory_per_rank = 0;
  return o;
}

// A synthetic graph file with link splits written into it (rank 0): `parts` maps /link/SPLIT/PART to its
// rows of node ids.
inline std::string link_file(const std::string& name,
                             const std::map<std::string, std::vector<std::vector<int64_t>>>& parts) {
  SynthOptions o;
  o.num_nodes = 37;
  o.num_edges = 150;
  o.num_features = 6;
  o.num_classes = 3;
  o.seed = 2;
  const std::string path = fixtures::synthetic_file(name, o);
  Communicator::world().run_on(0, [&] {
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    const H5Handle file = h5_open_file(self, path, true);
    h5_write_attr(file.get(), "version", int64_t(2));
    for (const auto& [part, rows] : parts) {
      const int64_t columns = rows.empty() ? 2 : int64_t(rows[0].size());
      std::vector<int64_t> flat;
      for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
      const H5Handle d =
          h5_create_dataset(file.get(), part, H5T_STD_I64LE, {int64_t(rows.size()), columns}, 0, false);
      h5_write_rows(d.get(), H5T_NATIVE_INT64, 0, int64_t(rows.size()), flat.data());
    }
  });
  return path;
}

inline std::vector<std::vector<int64_t>> pair_rows(int64_t count, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::vector<int64_t>> rows;
  for (int64_t i = 0; i < count; ++i) rows.push_back({int64_t(gen() % 37), int64_t(gen() % 37)});
  return rows;
}

// Negative targets of `edges` positives, three each: e + 1, e + 2, e + 3 (node ids below 37).
inline std::vector<std::vector<int64_t>> three_targets_each(int64_t edges) {
  std::vector<std::vector<int64_t>> rows;
  for (int64_t e = 0; e < edges; ++e) rows.push_back({e + 1, e + 2, e + 3});
  return rows;
}

}  // namespace tessera
