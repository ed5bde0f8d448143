// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/activation.hpp"

#include "tessera/core/error.hpp"
#include "tessera/models/nn/random_streams.hpp"

namespace tessera {

namespace {
// The leading rows x cols of `capacity` (see grown_capacity).
Matrix<float> leading_block(Matrix<float>& capacity, size_t rows, size_t cols) {
  if (capacity.extent(0) < rows || capacity.extent(1) != cols)
    capacity = Matrix<float>("activation.out",
                             size_t(grown_capacity(int64_t(capacity.extent(0)), int64_t(rows))), cols);
  return Kokkos::subview(capacity, std::make_pair(size_t(0), rows), Kokkos::ALL());
}

// A copy of `in` in the leading rows of `capacity`.
Matrix<float> copy_into(Matrix<float>& capacity, const Matrix<const float>& in) {
  const Matrix<float> out = leading_block(capacity, in.extent(0), in.extent(1));
  Kokkos::deep_copy(out, in);
  return out;
}

}  // namespace

Dropout::Dropout(LayerSlot& slot, float rate)
    : rate_(rate), at_(slot.layout()), kernels_(slot.run().kernels) {
  require(rate >= 0 && rate < 1, "dropout must be in [0, 1), not ", rate);
}

std::string Dropout::describe() const {
  return (at_.after_layer < 0 ? "input dropout " : "dropout ") + std::to_string(rate_).substr(0, 4);
}

DropoutMask Dropout::mask(const PassInfo& pass) const {
  const uint64_t stream = at_.after_layer < 0 ? streams::input_dropout(pass.epoch)
                                              : streams::dropout(pass.epoch, at_.after_layer);
  return DropoutMask(rate_, pass.seed, stream, 0, at_.col_begin).with_row_ids(rows_);
}

Matrix<const float> Dropout::forward(const Matrix<const float>& in, const GraphBatch& batch,
                                     const PassInfo& pass) {
  if (!pass.training || rate_ == 0) return in;
  rows_ = rows_at(batch, at_).output_ids;
  if (batch.scratch_input != nullptr && batch.scratch_input == in.data() && in.span_is_contiguous())
    out_ = Matrix<float>(const_cast<float*>(in.data()), in.extent(0), in.extent(1));  // lent for the step
  else
    out_ = copy_into(out_capacity_, in);
  bias_relu_dropout_forward<float>(out_, Vector<const float>(), false, mask(pass), kernels_);
  return out_;
}

Matrix<float> Dropout::backward(const Matrix<float>& grad_out, bool, const PassInfo& pass) {
  if (pass.training && rate_ > 0)
    bias_relu_dropout_backward<float>(grad_out, out_, false, mask(pass), kernels_);
  return grad_out;
}

ReLU::ReLU(LayerSlot& slot) : kernels_(slot.run().kernels) {}

Matrix<const float> ReLU::forward(const Matrix<const float>& in, const GraphBatch&, const PassInfo&) {
  out_ = copy_into(out_capacity_, in);
  bias_relu_dropout_forward<float>(out_, Vector<const float>(), true, DropoutMask(), kernels_);
  return out_;
}

Matrix<float> ReLU::backward(const Matrix<float>& grad_out, bool, const PassInfo&) {
  bias_relu_dropout_backward<float>(grad_out, out_, true, DropoutMask(), kernels_);
  return grad_out;
}

}  // namespace tessera
