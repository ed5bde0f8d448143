// SPDX-License-Identifier: BSD-3-Clause
// GCN on the 3D grid: each layer holds its blocks of W and b (DESIGN §4 layout), runs the PMM schedule,
// then bias, norm (statistics all-reduced over the sharded axis), ReLU and dropout on its output block.
// Initialization and dropout use global coordinates and the same random streams as the one-rank model,
// so any grid computes the same numbers up to summation order.
#pragma once

#include <memory>
#include <vector>

#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/layers.hpp"
#include "tessera/models/model.hpp"
#include "tessera/parallel3d/pmm.hpp"

namespace tessera {

/// Where a parameter block sits in the global (unpadded) matrix, and which replica writes it.
struct BlockPlacement {
  int64_t row_begin = 0, col_begin = 0;  // of the local block in the global matrix
  int64_t rows = 0, cols = 0;            // global matrix shape
  bool owner = false;                    // one rank among the replicas of this block
};

/// How the 3D layers run (the numbers do not depend on it, except bf16 rounding).
struct Model3DOptions {
  int overlap_chunks = 0;                 // > 1: --overlap (see LayerComms)
  CommDtype comm_dtype = CommDtype::F32;  // --comm-dtype
  bool fuse = true;                       // bias + norm + ReLU + dropout in the norm's passes (NormEpilogue)
};

class GcnLayer3D {
 public:
  GcnLayer3D(const ProcessGrid& grid, const Graph3D& graph, int index, NormKind norm, float dropout,
             uint64_t seed, const Model3DOptions& options = {}, PhaseTimers* timers = nullptr);

  /// Runs on `view` (the full graph or a sample); backward uses the view of the last forward.
  Matrix<float> forward(const Matrix<const float>& in, const LayerGraph& view, const PassInfo& pass);
  Matrix<float> backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass);

  std::vector<Parameter<float>*> parameters();
  std::vector<BlockPlacement> placements() const;  // same order as parameters()
  FeatureNorm<float>& norm() { return norm_; }
  BlockPlacement row_placement() const;  // a 1 x out vector of this layer (bias, norm parameters, statistics)
  void set_static_input(bool value) { static_input_ = value; }
  int64_t in_col_begin() const { return in_begin_; }
  int64_t out_col_begin() const { return out_begin_; }

 private:
  Dropout output_dropout(const PassInfo& pass) const;
  Matrix<float> full_out_rows(int64_t rows) const;  // leading rows of full_out_ (empty when G_a = 1)
  const Graph3D& graph_;
  LayerGraph view_;
  int index_;
  bool last_;
  float dropout_;
  LayerComms comms_;
  int64_t in_begin_, out_begin_;
  bool transform_first_;  // Layout3D::transforms_first: A (H W) instead of (A H) W
  bool static_input_ = false, row_owner_, weight_owner_, fuse_;
  const float* aggregated_input_ = nullptr;
  Parameter<float> weight_, bias_;
  FeatureNorm<float> norm_;
  Matrix<const float> input_;
  Matrix<float> agg_, out_, grad_agg_, grad_in_;
  Matrix<float> transformed_,
      full_out_;            // transform-first: H W (then its gradient) and A H W (then its gradient)
  Vector<float> gathered_;  // transform-first: the output gradient's blocks gathered over a
};

class GcnModel3D {
 public:
  GcnModel3D(const ProcessGrid& grid, const Graph3D& graph, const ModelConfig& config,
             const Model3DOptions& options = {});

  Matrix<float> forward(const PassInfo& pass);  // logits block of the last layer, full graph
  /// On a mini-batch: input rows (layer 0's sampled feature rows, vertex ids in input_ids) and one view
  /// per layer. backward() follows whichever forward ran last.
  Matrix<float> forward(const Matrix<const float>& input, const Vector<const int64_t>& input_ids,
                        const std::vector<LayerGraph>& views, const PassInfo& pass);
  void backward(const Matrix<float>& grad_logits, const PassInfo& pass);
  std::vector<Parameter<float>*> parameters();
  std::vector<BlockPlacement> placements() const;
  /// BatchNorm running statistics by name (same names as the one-rank model) and their placements.
  std::vector<std::pair<std::string, Vector<float>*>> buffers();
  std::vector<BlockPlacement> buffer_placements() const;
  const ModelConfig& config() const { return config_; }
  /// Every parameter in global layout, concatenated in parameters() order (collective over the replica).
  std::vector<float> gather_parameters(const Communicator& comm);
  std::vector<float> gather_gradients(const Communicator& comm);  // the same for the gradients
  int64_t logits_col_begin() const { return layers_.back()->out_col_begin(); }
  /// Seconds this rank spent in "spmm" and "gemm" (fenced), for per-phase reports.
  PhaseTimers& timers() { return timers_; }

 private:
  std::vector<float> gather(const Communicator& comm, bool gradients);
  const Graph3D& graph_;
  ModelConfig config_;
  PhaseTimers timers_;
  std::vector<std::unique_ptr<GcnLayer3D>> layers_;
  std::vector<LayerGraph> full_views_;
  Matrix<float> dropped_input_;
};

}  // namespace tessera
