// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/norm.hpp"

#include "tessera/core/error.hpp"
#include "tessera/models/nn/random_streams.hpp"
#include "tessera/parallel3d/pmm.hpp"

namespace tessera {

namespace {
constexpr const char* kNormRows = "norm allreduce c";     // BatchNorm statistics, norm parameter gradients
constexpr const char* kNormColumns = "norm allreduce a";  // RMSNorm statistics

template <class T>
Vector<T> leading(Vector<T>& capacity, const char* name, int64_t n) {
  if (int64_t(capacity.extent(0)) < n)
    capacity = Vector<T>(std::string(name), size_t(grown_capacity(int64_t(capacity.extent(0)), n)));
  return Kokkos::subview(capacity, std::make_pair(int64_t(0), n));
}

Matrix<float> leading_rows(const Matrix<float>& m, int64_t rows) {
  return Kokkos::subview(m, std::make_pair(int64_t(0), rows), Kokkos::ALL());
}
}  // namespace

FeatureNorm::FeatureNorm(LayerSlot& slot, const NormOptions& options, const char* kind)
    : options_(options),
      kind_(kind),
      prefix_(slot.name("norm.")),
      at_(slot.layout()),
      rows_comm_(&slot.grid().axis(at_.rows_axis)),
      cols_comm_(&slot.grid().axis(at_.cols_axis)),
      kernels_(slot.run().kernels),
      gamma_(slot, "norm.gamma", 1.0f),
      beta_(slot, "norm.beta", 0.0f),
      row_at_{0, at_.col_begin, 1, at_.width, at_.row_owner} {
  require(options.dropout >= 0 && options.dropout < 1, "dropout must be in [0, 1), not ", options.dropout);
}

std::vector<ParameterRef> FeatureNorm::parameters() {
  return {gamma_.ref(), beta_.ref()};
}

NormEpilogue FeatureNorm::epilogue(const PassInfo& pass) const {
  NormEpilogue e;
  e.relu = options_.relu;
  if (pass.training && options_.dropout > 0) {
    const uint64_t stream = at_.after_layer < 0 ? streams::input_dropout(pass.epoch)
                                                : streams::dropout(pass.epoch, at_.after_layer);
    e.dropout =
        DropoutMask(options_.dropout, pass.seed, stream, 0, at_.col_begin).with_row_ids(rows_.output_ids);
  }
  return e;
}

Matrix<float> FeatureNorm::output(const Matrix<const float>& in, const GraphBatch& batch) {
  rows_ = rows_at(batch, at_);
  require(int64_t(in.extent(1)) == at_.local_cols && rows_.valid_rows <= int64_t(in.extent(0)), kind_,
          " norm: the input block is ", in.extent(0), "x", in.extent(1), ", expected ", at_.local_cols,
          " columns");
  const int64_t rows = int64_t(in.extent(0));
  // The width too: a rank with no rows in its first batch must still hand on a 0 x width block.
  if (int64_t(out_capacity_.extent(0)) < rows || int64_t(out_capacity_.extent(1)) != at_.local_cols)
    out_capacity_ = Matrix<float>("norm.out", size_t(grown_capacity(int64_t(out_capacity_.extent(0)), rows)),
                                  size_t(at_.local_cols));
  z_ = Kokkos::subview(in, std::make_pair(int64_t(0), rows_.valid_rows), Kokkos::ALL());
  out_ = leading_rows(out_capacity_, rows_.valid_rows);
  return leading_rows(out_capacity_, rows);
}

void FeatureNorm::sum_rows(const Vector<double>& v) const {
  sum_over(*rows_comm_, v.data(), int64_t(v.extent(0)), kNormRows);
}

void FeatureNorm::sum_columns(const Vector<float>& v) const {
  sum_over(*cols_comm_, v.data(), int64_t(v.extent(0)), kNormColumns);
}

BatchNorm::BatchNorm(LayerSlot& slot, const NormOptions& options)
    : FeatureNorm(slot, options, "batch"),
      running_mean_(prefix_ + "running_mean", size_t(at_.local_cols)),
      running_var_(prefix_ + "running_var", size_t(at_.local_cols)),
      mean_("bn.mean", size_t(at_.local_cols)),
      invstd_("bn.invstd", size_t(at_.local_cols)),
      sums_("bn.sums", size_t(2 * at_.local_cols)) {
  Kokkos::deep_copy(running_var_, 1.0f);
}

std::vector<BufferRef> BatchNorm::buffers() {
  return {{prefix_ + "running_mean", &running_mean_, row_at_},
          {prefix_ + "running_var", &running_var_, row_at_}};
}

std::string BatchNorm::describe() const {
  return std::string("batch norm") + (options_.relu ? ", relu" : "") +
         (options_.dropout > 0 ? ", dropout " + std::to_string(options_.dropout).substr(0, 4) : "");
}

Matrix<const float> BatchNorm::forward(const Matrix<const float>& in, const GraphBatch& batch,
                                       const PassInfo& pass) {
  const Matrix<float> out = output(in, batch);
  used_batch_stats_ = pass.training;
  if (pass.training) {
    // One pass over z and one all-reduce: sums and sums of squares, in double (batch_norm_statistics).
    batch_norm_sums(z_, sums_, kernels_);
    sum_rows(sums_);
    // A rank with an empty batch (sampled mode) keeps its running statistics; the sums above still ran.
    if (rows_.num_nodes > 0)
      batch_norm_statistics(sums_, rows_.num_nodes, options_.eps, options_.momentum, mean_, invstd_,
                            running_mean_, running_var_);
  } else {
    batch_norm_running(mean_, invstd_, running_mean_, running_var_, options_.eps);
  }
  batch_norm_apply(z_, mean_, invstd_, gamma_.value(), beta_.value(), out_, epilogue(pass), kernels_);
  return out;
}

Matrix<float> BatchNorm::backward(const Matrix<float>& grad_out, bool, const PassInfo& pass) {
  require(used_batch_stats_, "BatchNorm backward after an evaluation forward");
  const Matrix<float> g = leading_rows(grad_out, rows_.valid_rows);
  batch_norm_backward_sums(g, out_, z_, mean_, invstd_, epilogue(pass), beta_.grad(), gamma_.grad(),
                           kernels_);
  beta_.sum_gradient(kNormRows);
  gamma_.sum_gradient(kNormRows);
  batch_norm_backward(g, z_, mean_, invstd_, gamma_.value(), beta_.grad(), gamma_.grad(), rows_.num_nodes,
                      kernels_);
  return grad_out;
}

RmsNorm::RmsNorm(LayerSlot& slot, const NormOptions& options) : FeatureNorm(slot, options, "rms") {}

std::string RmsNorm::describe() const {
  return std::string("rms norm") + (options_.relu ? ", relu" : "") +
         (options_.dropout > 0 ? ", dropout " + std::to_string(options_.dropout).substr(0, 4) : "");
}

Matrix<const float> RmsNorm::forward(const Matrix<const float>& in, const GraphBatch& batch,
                                     const PassInfo& pass) {
  const Matrix<float> out = output(in, batch);
  const Vector<float> rinv = leading(rinv_capacity_, "rms.rinv", rows_.valid_rows);
  row_sums_sq<float>(z_, rinv, kernels_);
  sum_columns(rinv);
  rms_norm_statistics(rinv, at_.width, options_.eps);
  rms_norm_apply(z_, rinv, gamma_.value(), beta_.value(), out_, epilogue(pass), kernels_);
  return out;
}

Matrix<float> RmsNorm::backward(const Matrix<float>& grad_out, bool, const PassInfo& pass) {
  const Matrix<float> g = leading_rows(grad_out, rows_.valid_rows);
  const Vector<float> rinv = leading(rinv_capacity_, "rms.rinv", rows_.valid_rows);
  const Vector<float> dot = leading(dot_capacity_, "rms.dot", rows_.valid_rows);
  rms_norm_backward_sums(g, out_, z_, rinv, epilogue(pass), beta_.grad(), gamma_.grad(), kernels_);
  beta_.sum_gradient(kNormRows);
  gamma_.sum_gradient(kNormRows);
  rms_norm_backward_dot(g, z_, rinv, gamma_.value(), dot, kernels_);
  sum_columns(dot);
  rms_norm_backward(g, z_, rinv, gamma_.value(), dot, at_.width, kernels_);
  return grad_out;
}

}  // namespace tessera
