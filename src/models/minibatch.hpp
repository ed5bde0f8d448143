// SPDX-License-Identifier: BSD-3-Clause
// Mini-batches on the 4D grid (DESIGN §5, ScaleGNN): every rank of 3D replica d draws the same uniform
// sample S of B vertices for (seed, epoch, step, d) and cuts, from the static blocks it already holds,
// the rows and columns of each layer that belong to S, scaling off-diagonal entries by 1 / p with
// p = (B - 1) / (N - 1). No message is sent. build() is plain host code (the sampler thread runs it);
// upload() turns its result into device blocks and layer views on the main thread.
#pragma once

#include <memory>
#include <vector>

#include "tessera/comm/process_grid.hpp"
#include "tessera/parallel3d/graph3d.hpp"
#include "tessera/sampling/induced.hpp"
#include "tessera/sampling/uniform.hpp"

namespace tessera {

/// One rank's share of a mini-batch, in host containers.
struct HostBatch {
  std::vector<HostCsr> forward, transpose;  // per layer: A_S block and its transpose
  std::vector<SampledIndex> rows, cols;     // per layer: sampled output rows / input columns
};

/// The same on the device, ready for GcnModel3D::forward(input, input_ids, views, pass).
struct DeviceBatch {
  std::vector<std::unique_ptr<AdjacencyBlock>> blocks;  // per layer (stable addresses for the views)
  std::vector<LayerGraph> views;
  Matrix<float> input;        // layer 0's sampled feature rows
  Vector<int64_t> input_ids;  // their vertex ids
  Vector<int64_t> labels;     // last layer's sampled output rows
  Vector<uint8_t> train;
};

class MinibatchBuilder {
 public:
  /// Keeps host copies of the static blocks and ids (none on a host build: same memory).
  MinibatchBuilder(const ProcessGrid& grid, const Graph3D& graph, int64_t batch_size);
  int64_t batch_size() const { return batch_size_; }
  /// Thread-safe, no MPI, no Kokkos.
  HostBatch build(const SampleKey& key) const;
  /// Main thread: device blocks, gathered inputs, labels and masks of `batch`.
  DeviceBatch upload(const HostBatch& batch) const;

 private:
  struct HostBlock {
    HostVector<int64_t> row_ptr, col_idx;
    HostVector<float> values;
  };
  const Graph3D& graph_;
  int64_t batch_size_;
  float scale_;
  std::vector<std::pair<int64_t, int64_t>> row_range_, col_range_;  // per layer, positions of my blocks
  std::vector<HostBlock> blocks_;                                   // per layer (by layout l mod 6)
  std::vector<std::vector<int64_t>> col_ids_;                       // per layer: vertex of each local column
};

/// Device copy of a host CSR built off the main thread (values kept).
CsrMatrix<float, DeviceSpace> upload_csr(const HostCsr& a);

}  // namespace tessera
