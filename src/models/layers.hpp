// SPDX-License-Identifier: BSD-3-Clause
// One GNN layer on a whole (local) graph: convolution (GCN or GraphSAGE-mean), bias, optional norm, then
// ReLU and dropout on hidden layers. Forward and backward are written out; each layer owns its buffers
// and reuses them every epoch. The multiply order (aggregate then transform, or the reverse) is chosen
// so the sparse product runs on the narrower side.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/kernels/spmm.hpp"
#include "tessera/models/norm.hpp"
#include "tessera/models/parameter.hpp"

namespace tessera {

enum class ModelKind { Gcn, Sage };
ModelKind parse_model_kind(const std::string& name);
const char* model_kind_name(ModelKind kind);

/// The aggregation operator of the model and its explicit transpose (GCN: A_hat; SAGE: D^-1 A). On a
/// sampled block it is rectangular: rows are the layer's output nodes, which are the input's leading rows.
template <class Scalar>
struct GraphOps {
  CsrSpmm<Scalar> aggregate;
  CsrSpmm<Scalar> aggregate_transpose;
  int64_t num_nodes = 0;  // output rows (the norm's statistics count)
};

/// What a forward or backward pass needs to know besides its inputs.
struct PassInfo {
  bool training = false;
  uint64_t seed = 0;
  int64_t epoch = 0;
};

struct LayerShape {
  int64_t in = 0, out = 0;
  bool last = false;
};

template <class Scalar>
class GnnLayer {
 public:
  GnnLayer(ModelKind kind, int index, LayerShape shape, NormKind norm, float dropout, uint64_t seed);

  /// Returns the layer's output (owned by the layer, valid until its next forward).
  Matrix<Scalar> forward(const GraphOps<Scalar>& ops, const Matrix<const Scalar>& in, const PassInfo& pass);
  /// grad_out (dL/d output, overwritten) -> sets parameter gradients; returns dL/d input when asked.
  Matrix<Scalar> backward(const GraphOps<Scalar>& ops, const Matrix<Scalar>& grad_out, bool want_input_grad,
                          const PassInfo& pass);

  std::vector<Parameter<Scalar>*> parameters();
  FeatureNorm<Scalar>& norm() { return norm_; }

  /// Promise that every forward input with the same data pointer holds the same values (layer 0 fed the
  /// fixed features without input dropout): the aggregation A*H is then computed once and reused.
  void set_static_input(bool value) { static_input_ = value; }

  /// Dropout stream of this layer's output at an epoch (distinct per layer and epoch).
  uint64_t dropout_stream(int64_t epoch) const;

 private:
  void ensure_buffers(int64_t rows_in, int64_t rows_out);
  ModelKind kind_;
  int index_;
  LayerShape shape_;
  float dropout_;
  bool transform_first_;
  bool static_input_ = false;
  const Scalar* aggregated_input_ = nullptr;       // input whose aggregation mid_ holds (static input only)
  Parameter<Scalar> weight_, root_weight_, bias_;  // root_weight_: GraphSAGE only
  FeatureNorm<Scalar> norm_;
  Matrix<const Scalar> input_;                     // the forward input, kept for backward
  Matrix<Scalar> mid_, out_, grad_mid_, grad_in_;  // leading rows of the capacity buffers
  Matrix<Scalar> mid_capacity_, out_capacity_, grad_mid_capacity_, grad_in_capacity_;
  int64_t rows_in_ = -1, rows_out_ = -1;
};

}  // namespace tessera
