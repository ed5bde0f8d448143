// SPDX-License-Identifier: BSD-3-Clause
// Feature normalization inside a layer: BatchNorm (per feature, statistics over nodes) and RMSNorm (per
// node, over features). Forward and backward are explicit. The partial sums each needs pass through a
// caller-supplied reduction, so a distributed layer all-reduces them over the axis that shards the rows
// (BatchNorm) or the features (RMSNorm); on one rank the reduction does nothing.
#pragma once

#include <functional>
#include <string>

#include "tessera/core/views.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/parameter.hpp"

namespace tessera {

enum class NormKind { None, Batch, Rms };
NormKind parse_norm(const std::string& name);
const char* norm_name(NormKind kind);

/// Sums a vector over the ranks that share it (in place). Identity on one rank.
template <class Scalar>
using SumReducer = std::function<void(const Vector<Scalar>&)>;

/// What runs around the normalization in a hidden layer, fused into its passes (DESIGN §5, --fuse):
/// forward, RMSNorm adds `bias` inside its statistics pass and the apply pass ends with ReLU and
/// dropout; backward, the ReLU/dropout derivative is applied inside the first column reduction. The
/// results are the same, bit for bit, as running bias_relu_dropout_forward/backward around the norm.
template <class Scalar>
struct NormEpilogue {
  Vector<const Scalar> bias;  // RMSNorm only (BatchNorm's beta replaces the bias)
  bool relu = false;
  Dropout dropout;
};

template <class Scalar>
class FeatureNorm {
 public:
  /// `features` = width of this rank's block; `total_rows` / `total_features` are global counts.
  FeatureNorm(NormKind kind, const std::string& name, int64_t features, Scalar eps = Scalar(1e-5),
              Scalar momentum = Scalar(0.1));

  /// In place on z (rows x features). Training BatchNorm uses batch statistics and updates the running
  /// ones; evaluation uses the running ones.
  /// With `fused`, z comes in without its bias (RMSNorm) and leaves after ReLU and dropout.
  void forward(const Matrix<Scalar>& z, bool training, int64_t total_rows, int64_t total_features,
               const SumReducer<Scalar>& reduce_rows, const SumReducer<Scalar>& reduce_features,
               const NormEpilogue<Scalar>* fused = nullptr);
  /// grad: dL/d(out) in, dL/d(z) out. Accumulates the gradients of gamma and beta. With `fused`, grad
  /// comes in before the ReLU/dropout derivative, which is taken from the forward output `out`.
  void backward(const Matrix<Scalar>& grad, int64_t total_rows, int64_t total_features,
                const SumReducer<Scalar>& reduce_rows, const SumReducer<Scalar>& reduce_features,
                const NormEpilogue<Scalar>* fused = nullptr, const Matrix<const Scalar>& out = {});

  NormKind kind() const { return kind_; }
  Parameter<Scalar>& gamma() { return gamma_; }
  Parameter<Scalar>& beta() { return beta_; }
  Vector<Scalar>& running_mean() { return running_mean_; }
  Vector<Scalar>& running_var() { return running_var_; }

 private:
  NormKind kind_;
  Scalar eps_, momentum_;
  Parameter<Scalar> gamma_, beta_;
  Vector<Scalar> running_mean_, running_var_;
  Matrix<Scalar> normalized_;       // xhat (BatchNorm) or z * rinv (RMSNorm), kept for backward
  Vector<Scalar> stat_a_, stat_b_;  // BatchNorm: mean, invstd per feature; RMSNorm: rinv per row
  Vector<Scalar> row_dot_;          // RMSNorm backward: per-row sums, kept to avoid an allocation per step
  bool used_batch_stats_ = false;
};

}  // namespace tessera
