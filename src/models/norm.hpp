// SPDX-License-Identifier: BSD-3-Clause
// Feature normalization inside a layer: BatchNorm (per feature, statistics over nodes) and RMSNorm (per
// node, over features). Forward and backward are explicit. The partial sums each needs pass through a
// caller-supplied reduction, so a distributed layer all-reduces them over the axis that shards the rows
// (BatchNorm) or the features (RMSNorm); on one rank the reduction does nothing.
#pragma once

#include <functional>
#include <string>

#include "tessera/core/views.hpp"
#include "tessera/models/parameter.hpp"

namespace tessera {

enum class NormKind { None, Batch, Rms };
NormKind parse_norm(const std::string& name);
const char* norm_name(NormKind kind);

/// Sums a vector over the ranks that share it (in place). Identity on one rank.
template <class Scalar>
using SumReducer = std::function<void(const Vector<Scalar>&)>;

template <class Scalar>
class FeatureNorm {
 public:
  /// `features` = width of this rank's block; `total_rows` / `total_features` are global counts.
  FeatureNorm(NormKind kind, const std::string& name, int64_t features, Scalar eps = Scalar(1e-5),
              Scalar momentum = Scalar(0.1));

  /// In place on z (rows x features). Training BatchNorm uses batch statistics and updates the running
  /// ones; evaluation uses the running ones.
  void forward(const Matrix<Scalar>& z, bool training, int64_t total_rows, int64_t total_features,
               const SumReducer<Scalar>& reduce_rows, const SumReducer<Scalar>& reduce_features);
  /// grad: dL/d(out) in, dL/d(z) out. Accumulates the gradients of gamma and beta.
  void backward(const Matrix<Scalar>& grad, int64_t total_rows, int64_t total_features,
                const SumReducer<Scalar>& reduce_rows, const SumReducer<Scalar>& reduce_features);

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
