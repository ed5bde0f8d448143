// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/layers.hpp"

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/gemm.hpp"
#include "tessera/models/random_streams.hpp"

namespace tessera {

ModelKind parse_model_kind(const std::string& name) {
  if (name == "gcn") return ModelKind::Gcn;
  if (name == "sage") return ModelKind::Sage;
  fail("--model must be gcn or sage, not '", name, "'");
}

const char* model_kind_name(ModelKind kind) {
  return kind == ModelKind::Gcn ? "gcn" : "sage";
}

namespace {
// One rank holds whole rows and features: nothing to reduce.
template <class Scalar>
void local_sum(const Vector<Scalar>&) {}

template <class View>
View leading_rows(const View& m, int64_t rows) {
  return View(Kokkos::subview(m, std::make_pair(int64_t(0), rows), Kokkos::ALL()));
}
}  // namespace

template <class Scalar>
GnnLayer<Scalar>::GnnLayer(ModelKind kind, int index, LayerShape shape, NormKind norm, float dropout,
                           uint64_t seed)
    : kind_(kind),
      index_(index),
      shape_(shape),
      dropout_(dropout),
      transform_first_(shape.out < shape.in),
      weight_("layer" + std::to_string(index) + (kind == ModelKind::Sage ? ".neighbour_weight" : ".weight"),
              shape.in, shape.out, true),
      bias_("layer" + std::to_string(index) + ".bias", 1, shape.out, false),
      norm_(shape.last ? NormKind::None : norm, "layer" + std::to_string(index) + ".norm", shape.out) {
  glorot_init(weight_, seed, streams::kWeight + uint64_t(index));
  Kokkos::deep_copy(bias_.value, Scalar(0));
  if (kind_ == ModelKind::Sage) {
    root_weight_ =
        Parameter<Scalar>("layer" + std::to_string(index) + ".root_weight", shape.in, shape.out, true);
    glorot_init(root_weight_, seed, streams::kRootWeight + uint64_t(index));
  }
}

template <class Scalar>
uint64_t GnnLayer<Scalar>::dropout_stream(int64_t epoch) const {
  return streams::dropout(epoch, index_);
}

template <class Scalar>
std::vector<Parameter<Scalar>*> GnnLayer<Scalar>::parameters() {
  std::vector<Parameter<Scalar>*> out = {&weight_};
  if (kind_ == ModelKind::Sage) out.push_back(&root_weight_);
  if (norm_.kind() != NormKind::Batch) out.push_back(&bias_);  // BatchNorm's shift replaces the bias
  if (norm_.kind() != NormKind::None) {
    out.push_back(&norm_.gamma());
    out.push_back(&norm_.beta());
  }
  return out;
}

template <class Scalar>
void GnnLayer<Scalar>::ensure_buffers(int64_t rows_in, int64_t rows_out) {
  if (rows_in == rows_in_ && rows_out == rows_out_) return;
  aggregated_input_ = nullptr;
  rows_in_ = rows_in;
  rows_out_ = rows_out;
  // Sampled blocks change size every step: buffers grow with headroom and are used by leading rows.
  auto fit = [](Matrix<Scalar>& capacity, const std::string& name, int64_t rows, int64_t cols) {
    if (int64_t(capacity.extent(0)) < rows || int64_t(capacity.extent(1)) != cols)
      capacity = Matrix<Scalar>(name, size_t(rows + rows / 4), size_t(cols));
    return Matrix<Scalar>(Kokkos::subview(capacity, std::make_pair(int64_t(0), rows), Kokkos::ALL()));
  };
  const int64_t mid_width = transform_first_ ? shape_.out : shape_.in;
  const int64_t mid_rows = transform_first_ ? rows_in : rows_out;
  mid_ = fit(mid_capacity_, "layer.mid", mid_rows, mid_width);
  grad_mid_ = fit(grad_mid_capacity_, "layer.grad_mid", mid_rows, mid_width);
  out_ = fit(out_capacity_, "layer.out", rows_out, shape_.out);
  grad_in_ = fit(grad_in_capacity_, "layer.grad_in", rows_in, shape_.in);
}

template <class Scalar>
Matrix<Scalar> GnnLayer<Scalar>::forward(const GraphOps<Scalar>& ops, const Matrix<const Scalar>& in,
                                         const PassInfo& pass) {
  require(int64_t(in.extent(1)) == shape_.in, "layer ", index_, ": input has ", in.extent(1),
          " features, expected ", shape_.in);
  const int64_t rows_out = ops.aggregate.matrix().num_rows;
  require(ops.aggregate.matrix().num_cols == int64_t(in.extent(0)) && rows_out <= int64_t(in.extent(0)),
          "layer ", index_, ": the aggregation is ", rows_out, "x", ops.aggregate.matrix().num_cols,
          " but the input has ", in.extent(0), " rows");
  ensure_buffers(int64_t(in.extent(0)), rows_out);
  input_ = in;
  const Matrix<const Scalar> w = weight_.matrix();
  if (transform_first_) {  // mid = H W, out = A mid
    gemm<Scalar>(Trans::No, Trans::No, Scalar(1), in, w, Scalar(0), mid_);
    ops.aggregate.apply(mid_, out_);
  } else {  // mid = A H, out = mid W
    if (!static_input_ || aggregated_input_ != in.data()) ops.aggregate.apply(in, mid_);
    aggregated_input_ = static_input_ ? in.data() : nullptr;
    gemm<Scalar>(Trans::No, Trans::No, Scalar(1), mid_, w, Scalar(0), out_);
  }
  if (kind_ == ModelKind::Sage)  // the destination nodes are the input's leading rows
    gemm<Scalar>(Trans::No, Trans::No, Scalar(1), leading_rows(in, rows_out), root_weight_.matrix(),
                 Scalar(1), out_);

  const bool hidden = !shape_.last;
  Dropout dropout;
  if (hidden && pass.training) dropout = Dropout(dropout_, pass.seed, dropout_stream(pass.epoch));
  const Vector<const Scalar> bias = bias_.value;
  if (norm_.kind() != NormKind::None) {
    // A bias before BatchNorm is subtracted out again: its gradient is zero up to rounding, which Adam
    // would amplify to full-size steps. BatchNorm layers have no bias (beta shifts instead).
    if (norm_.kind() == NormKind::Rms) bias_relu_dropout_forward<Scalar>(out_, bias, false, Dropout());
    norm_.forward(out_, pass.training, ops.num_nodes, shape_.out, local_sum<Scalar>, local_sum<Scalar>);
    bias_relu_dropout_forward<Scalar>(out_, Vector<const Scalar>(), hidden, dropout);
  } else {
    bias_relu_dropout_forward<Scalar>(out_, bias, hidden, dropout);
  }
  return out_;
}

template <class Scalar>
Matrix<Scalar> GnnLayer<Scalar>::backward(const GraphOps<Scalar>& ops, const Matrix<Scalar>& grad_out,
                                          bool want_input_grad, const PassInfo& pass) {
  const bool hidden = !shape_.last;
  Dropout dropout;
  if (hidden && pass.training) dropout = Dropout(dropout_, pass.seed, dropout_stream(pass.epoch));
  bias_relu_dropout_backward<Scalar>(grad_out, out_, hidden, dropout);
  norm_.backward(grad_out, ops.num_nodes, shape_.out, local_sum<Scalar>, local_sum<Scalar>);
  if (norm_.kind() != NormKind::Batch) column_sums<Scalar>(grad_out, bias_.grad, Vector<Scalar>());

  const Matrix<Scalar> gw = weight_.grad_matrix();
  const Matrix<const Scalar> w = weight_.matrix();
  if (transform_first_) {  // g_mid = A^T g_out; gW = H^T g_mid; gH = g_mid W^T
    ops.aggregate_transpose.apply(grad_out, grad_mid_);
    gemm<Scalar>(Trans::Yes, Trans::No, Scalar(1), input_, grad_mid_, Scalar(0), gw);
    if (want_input_grad) gemm<Scalar>(Trans::No, Trans::Yes, Scalar(1), grad_mid_, w, Scalar(0), grad_in_);
  } else {  // gW = mid^T g_out; g_mid = g_out W^T; gH = A^T g_mid
    gemm<Scalar>(Trans::Yes, Trans::No, Scalar(1), mid_, grad_out, Scalar(0), gw);
    if (want_input_grad) {
      gemm<Scalar>(Trans::No, Trans::Yes, Scalar(1), grad_out, w, Scalar(0), grad_mid_);
      ops.aggregate_transpose.apply(grad_mid_, grad_in_);
    }
  }
  if (kind_ == ModelKind::Sage) {  // out += H_dst W_root: gW_root = H_dst^T g_out; gH_dst += g_out W_root^T
    const int64_t rows_out = int64_t(grad_out.extent(0));
    gemm<Scalar>(Trans::Yes, Trans::No, Scalar(1), leading_rows(input_, rows_out), grad_out, Scalar(0),
                 root_weight_.grad_matrix());
    if (want_input_grad)
      gemm<Scalar>(Trans::No, Trans::Yes, Scalar(1), grad_out, root_weight_.matrix(), Scalar(1),
                   leading_rows(grad_in_, rows_out));
  }
  return grad_in_;
}

template class GnnLayer<float>;
template class GnnLayer<double>;

}  // namespace tessera
