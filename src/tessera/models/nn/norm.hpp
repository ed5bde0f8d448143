// SPDX-License-Identifier: BSD-3-Clause
// Feature normalization layers: BatchNorm (per feature, statistics over the nodes) and RMSNorm (per node,
// over its features), each optionally followed by ReLU and dropout in the same passes (a hidden layer's
// epilogue, fused). Their partial sums are all-reduced over the axis that splits the rows (BatchNorm) or
// the columns (RMSNorm) of the block they get, so any grid computes what one rank computes. The
// arithmetic is kernels/norm.hpp.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/enum_names.hpp"
#include "tessera/kernels/norm.hpp"
#include "tessera/models/nn/layer.hpp"

namespace tessera {

/// Which normalization a hidden layer uses (the CLI's --norm).
enum class NormKind {
  None,   ///< no normalization
  Batch,  ///< BatchNorm
  Rms     ///< RMSNorm
};
/// The names of NormKind's values (core/enum_names.hpp): what the command line, the bindings and messages
/// use.
inline constexpr EnumName<NormKind> kNormKindNames[] = {
    {NormKind::None, "none"}, {NormKind::Batch, "batch"}, {NormKind::Rms, "rms"}};
/// none or batch or rms: the name of a value.
inline const char* norm_name(NormKind kind) {
  return name_of(kNormKindNames, kind);
}

/// A normalization layer's settings.
struct NormOptions {
  bool relu = false;      ///< ReLU after the affine step, in the same pass
  float dropout = 0.0f;   ///< then dropout on training passes
  float eps = 1e-5f;      ///< added to the variance (mean square)
  float momentum = 0.1f;  ///< BatchNorm's running statistics' update rate
};

/// What BatchNorm and RMSNorm share: gamma and beta over the block's columns, an output buffer, the
/// epilogue and the communicators.
class FeatureNorm : public Layer {
 public:
  std::vector<ParameterRef> parameters() override;

 protected:
  /// At the slot's activations; `kind` names the norm in messages and parameter names.
  FeatureNorm(LayerSlot& slot, const NormOptions& options, const char* kind);
  /// The fused ReLU / dropout of a pass.
  NormEpilogue epilogue(const PassInfo& pass) const;
  /// The output block for `rows` rows (its padding rows stay zero) and the rows a pass keeps.
  Matrix<float> output(const Matrix<const float>& in, const GraphBatch& batch);
  /// In-place sum over the axis splitting the rows (BatchNorm's statistics, counted in double).
  void sum_rows(const Vector<double>& v) const;
  /// In-place sum over the axis splitting the columns (RMSNorm's statistics).
  void sum_columns(const Vector<float>& v) const;

  NormOptions options_;            ///< as constructed
  std::string kind_;               ///< "BatchNorm" or "RMSNorm"
  std::string prefix_;             ///< parameter name prefix, "layer<l>.norm."
  ActivationLayout at_;            ///< where the input and output blocks live
  const Communicator* rows_comm_;  ///< ranks sharing this block's columns (sum over rows)
  const Communicator* cols_comm_;  ///< ranks sharing this block's rows (sum over columns)
  KernelPath kernels_;             ///< kernel path of every launch
  RowParameter gamma_;             ///< per-column scale
  RowParameter beta_;              ///< per-column shift
  BlockPlacement row_at_;          ///< the running statistics' placement
  LayerGraph rows_;                ///< the last forward's rows
  Matrix<const float> z_;          ///< its valid input rows (normalized values are recomputed from them)
  Matrix<float> out_capacity_;     ///< the output buffer at its largest size so far
  Matrix<float> out_;              ///< the valid output rows of the last forward
};

/// BatchNorm (Ioffe & Szegedy): per column, mean and variance over every node of the (sub)graph on
/// training passes (running statistics updated), the running statistics otherwise.
class BatchNorm : public FeatureNorm {
 public:
  /// At the slot's activations.
  explicit BatchNorm(LayerSlot& slot, const NormOptions& options = {});
  Matrix<const float> forward(const Matrix<const float>& in, const GraphBatch& batch,
                              const PassInfo& pass) override;
  Matrix<float> backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass) override;
  std::vector<BufferRef> buffers() override;
  std::string describe() const override;

 private:
  Vector<float> running_mean_, running_var_, mean_, invstd_;
  Vector<double> sums_;  ///< the batch's column sums, then its sums of squares
  bool used_batch_stats_ = false;
};

/// RMSNorm (Zhang & Sennrich): per node, its features divided by their root mean square.
class RmsNorm : public FeatureNorm {
 public:
  /// At the slot's activations.
  explicit RmsNorm(LayerSlot& slot, const NormOptions& options = {});
  Matrix<const float> forward(const Matrix<const float>& in, const GraphBatch& batch,
                              const PassInfo& pass) override;
  Matrix<float> backward(const Matrix<float>& grad_out, bool want_input_grad, const PassInfo& pass) override;
  std::string describe() const override;

 private:
  Vector<float> rinv_capacity_, dot_capacity_;
};

}  // namespace tessera
