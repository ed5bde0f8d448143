// SPDX-License-Identifier: BSD-3-Clause
// Graph files the distributed tests share: a scratch directory every rank agrees on, and a small contextual
// SBM whose sizes divide by nothing in particular (padding on every grid). Collective on first use.
#pragma once

#include <unistd.h>

#include <mpi.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/graph/hdf5_io.hpp"
#include "tessera/graph/ogb.hpp"
#include "tessera/graph/partition.hpp"
#include "tessera/graph/synth.hpp"
#include "tessera/models/train.hpp"

namespace tessera::fixtures {

/// A fresh directory under /tmp made by rank 0, its name broadcast to all ranks.
inline const std::string& scratch_dir() {
  static std::string dir;
  if (dir.empty()) {
    char path[256] = {};
    if (Communicator::world().rank() == 0) {
      std::snprintf(path, sizeof(path), "/tmp/tessera-test-XXXXXX");
      if (!mkdtemp(path)) path[0] = '\0';
    }
    MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
    dir = path;
  }
  return dir;
}

#ifdef TESSERA_SHARED_DIR
/// Cora (../shared/datasets/cora, symmetrized) converted by rank 0 into the scratch directory, then `also`
/// run there on the file (a partition, say); collective over the world. Empty when the dataset is absent.
template <class Also>
std::string cora_in_scratch(const Also& also) {
  const std::string dir = TESSERA_SHARED_DIR "/datasets/cora";
  if (access((dir + "/raw/edge.csv.gz").c_str(), R_OK) != 0) return "";
  const std::string path = scratch_dir() + "/cora.h5";
  Communicator::world().run_on(0, [&] {
    OgbConvertOptions o;
    o.dataset_dir = dir;
    o.output = path;
    o.symmetrize = true;
    convert_ogb(o, Communicator(MPI_COMM_SELF, false, nullptr));
    also(path);
  });
  return path;
}
#endif

/// A synthetic graph file `name` in the scratch directory (collective over the world).
inline std::string synthetic_file(const std::string& name, const SynthOptions& options) {
  const std::string path = scratch_dir() + "/" + name;
  generate_synthetic(options, path, Communicator::world());
  return path;
}

/// 301 nodes, 1,500 edges drawn, 11 features, 5 classes, strong feature signal.
inline const std::string& small_csbm_file() {
  static std::string path;
  if (path.empty()) {
    SynthOptions o;
    o.num_nodes = 301;
    o.num_edges = 1500;
    o.num_features = 11;
    o.num_classes = 5;
    o.seed = 9;
    o.feature_signal = 0.5;
    path = synthetic_file("csbm.h5", o);
  }
  return path;
}

/// 4 nodes, 4 edges drawn, 4 features, 2 classes, half of them training and a quarter validation nodes: on
/// 4 ranks, blocks of one row or none (the empty-block tests).
inline std::string four_node_file(const std::string& name) {
  SynthOptions o;
  o.num_nodes = 4;
  o.num_edges = 4;
  o.num_features = 4;
  o.num_classes = 2;
  o.train_fraction = 0.5;
  o.valid_fraction = 0.25;
  return synthetic_file(name, o);
}

/// The GCN paper's training setup (Kipf & Welling 2017): 2 layers, 16 hidden, dropout 0.5 (input too), lr
/// 0.01, weight decay 5e-4, 200 epochs, row-normalized features; quiet.
inline TrainOptions paper_setup(const std::string& data, uint64_t seed) {
  TrainOptions o;
  o.data = data;
  o.model.layers = 2;
  o.model.hidden = 16;
  o.model.dropout = o.model.input_dropout = 0.5f;
  o.model.seed = seed;
  o.trainer.optimizer.lr = 0.01f;
  o.trainer.optimizer.weight_decay = 5e-4f;
  o.trainer.epochs = 200;
  o.normalize_features = true;
  o.outputs.quiet = true;
  return o;
}

/// Writes /partition/NAME into `path`: METIS over `parts` parts (seed 1), with its evaluation. Serial: call
/// it on the one rank that writes the file.
inline void write_metis_partition(const std::string& path, const std::string& name, int parts) {
  const std::vector<int32_t> part = compute_partition(path, parts, PartitionMethod::Metis, 1);
  write_partition(path, name, part, parts, PartitionMethod::Metis, evaluate_partition(path, part, parts));
}

/// Collective: a copy of the graph file `path` (partitions and link splits included) as `name` in the scratch
/// directory, on which rank 0 calls rewrite(file, shape, x) with the copy open for writing and its features
/// `x` (shape rows x columns) read.
template <class Rewrite>
std::string features_rewritten_copy(const std::string& path, const std::string& name,
                                    const Rewrite& rewrite) {
  const std::string out = scratch_dir() + "/" + name;
  Communicator::world().run_on(0, [&] {
    std::filesystem::copy_file(path, out, std::filesystem::copy_options::overwrite_existing);
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    const H5Handle file = h5_open_file(self, out, true);
    std::vector<int64_t> shape;
    std::vector<float> x;
    {
      const H5Handle features = h5_open_dataset(file.get(), out, "/node/features");
      shape = h5_shape(features.get());
      x.resize(size_t(shape[0] * shape[1]));
      h5_read_rows(features.get(), h5_native_type<float>(), 0, shape[0], x.data());
    }
    rewrite(file.get(), shape, x);
  });
  Communicator::world().barrier();
  return out;
}

/// A copy of the graph file `path` as `name` in the scratch directory, its features replaced by their bf16
/// roundings in fp32: what a run with bf16 feature storage must equal. Collective.
inline std::string rounded_features_copy(const std::string& path, const std::string& name) {
  return features_rewritten_copy(
      path, name, [&](hid_t file, const std::vector<int64_t>& shape, std::vector<float>& x) {
        round_through_bf16(x.data(), x.size());
        const H5Handle features = h5_open_dataset(file, name, "/node/features");
        h5_write_rows(features.get(), h5_native_type<float>(), 0, shape[0], x.data());
      });
}

/// A copy of the graph file `path` as `name` in the scratch directory whose /node/features hold the bf16 bits
/// of its values (schema version 3), written with HDF5 directly rather than by the library's writer.
/// Collective.
inline std::string bf16_features_copy(const std::string& path, const std::string& name) {
  return features_rewritten_copy(
      path, name, [&](hid_t file, const std::vector<int64_t>& shape, std::vector<float>& x) {
        H5Ldelete(file, "/node/features", H5P_DEFAULT);
        std::vector<uint16_t> bits(x.size());
        round_to_bf16(x.data(), bits.data(), bits.size());
        const H5Handle features = h5_create_dataset(file, "/node/features", H5T_STD_U16LE, shape, 64, false);
        h5_write_rows(features.get(), H5T_NATIVE_UINT16, 0, shape[0], bits.data());
        h5_write_attr(features.get(), "dtype", std::string("bf16"));
        h5_write_attr(file, "version", int64_t(3));
      });
}

}  // namespace tessera::fixtures
