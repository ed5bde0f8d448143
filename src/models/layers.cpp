// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/layers.hpp"

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/gemm.hpp"

namespace tessera {

ModelKind parse_model_kind(const std::string& name) {
  if (name == "gcn") return ModelKind::Gcn;
  if (name == "sage") return ModelKind::Sage;
  fail("--model must be gcn or sage, not '", name, "'");
}

const char* model_kind_name(ModelKind kind) { return kind == ModelKind::Gcn ? "gcn" : "sage"; }

namespace {
// Random-stream ids: each parameter and each dropout site draws from its own stream.
constexpr uint64_t kWeightStream = 1000, kRootStream = 2000, kDropoutStream = 1ull << 40;
const SumReducer kLocal = [](const Vector<float>&) {};
}  // namespace

GnnLayer::GnnLayer(ModelKind kind, int index, LayerShape shape, NormKind norm, float dropout, uint64_t seed)
    : kind_(kind), index_(index), shape_(shape), dropout_(dropout), transform_first_(shape.out < shape.in),
      weight_("layer" + std::to_string(index) + (kind == ModelKind::Sage ? ".neighbour_weight" : ".weight"), shape.in,
              shape.out, true),
      bias_("layer" + std::to_string(index) + ".bias", 1, shape.out, false),
      norm_(shape.last ? NormKind::None : norm, "layer" + std::to_string(index) + ".norm", shape.out) {
  glorot_init(weight_, seed, kWeightStream + uint64_t(index));
  fill(bias_.value, 0.0f);
  if (kind_ == ModelKind::Sage) {
    root_weight_ = Parameter("layer" + std::to_string(index) + ".root_weight", shape.in, shape.out, true);
    glorot_init(root_weight_, seed, kRootStream + uint64_t(index));
  }
}

uint64_t GnnLayer::dropout_stream(int64_t epoch) const {
  return kDropoutStream + (uint64_t(epoch) << 8) + uint64_t(index_) + 1;
}

std::vector<Parameter*> GnnLayer::parameters() {
  std::vector<Parameter*> out = {&weight_};
  if (kind_ == ModelKind::Sage) out.push_back(&root_weight_);
  out.push_back(&bias_);
  if (norm_.kind() != NormKind::None) {
    out.push_back(&norm_.gamma());
    out.push_back(&norm_.beta());
  }
  return out;
}

void GnnLayer::ensure_buffers(int64_t rows) {
  if (int64_t(out_.extent(0)) == rows) return;
  const int64_t mid_width = transform_first_ ? shape_.out : shape_.in;
  mid_ = Matrix<float>("layer.mid", size_t(rows), size_t(mid_width));
  grad_mid_ = Matrix<float>("layer.grad_mid", size_t(rows), size_t(mid_width));
  out_ = Matrix<float>("layer.out", size_t(rows), size_t(shape_.out));
  grad_in_ = Matrix<float>("layer.grad_in", size_t(rows), size_t(shape_.in));
}

Matrix<float> GnnLayer::forward(const GraphOps& ops, const Matrix<const float>& in, const PassInfo& pass) {
  require(int64_t(in.extent(1)) == shape_.in, "layer ", index_, ": input has ", in.extent(1), " features, expected ",
          shape_.in);
  ensure_buffers(int64_t(in.extent(0)));
  input_ = in;
  const Matrix<const float> w = weight_.matrix();
  if (transform_first_) {  // mid = H W, out = A mid
    gemm<float>(Trans::No, Trans::No, 1.0f, in, w, 0.0f, mid_);
    ops.aggregate.apply(mid_, out_);
  } else {  // mid = A H, out = mid W
    ops.aggregate.apply(in, mid_);
    gemm<float>(Trans::No, Trans::No, 1.0f, mid_, w, 0.0f, out_);
  }
  if (kind_ == ModelKind::Sage) gemm<float>(Trans::No, Trans::No, 1.0f, in, root_weight_.matrix(), 1.0f, out_);

  const bool hidden = !shape_.last;
  Dropout dropout;
  if (hidden && pass.training) dropout = Dropout{dropout_, pass.seed, dropout_stream(pass.epoch), 0, 0};
  const Vector<const float> bias = bias_.value;
  if (norm_.kind() != NormKind::None) {
    bias_relu_dropout_forward<float>(out_, bias, false, Dropout{});
    norm_.forward(out_, pass.training, ops.num_nodes, shape_.out, kLocal, kLocal);
    bias_relu_dropout_forward<float>(out_, Vector<const float>(), hidden, dropout);
  } else {
    bias_relu_dropout_forward<float>(out_, bias, hidden, dropout);
  }
  return out_;
}

Matrix<float> GnnLayer::backward(const GraphOps& ops, const Matrix<float>& grad_out, bool want_input_grad,
                                 const PassInfo& pass) {
  const bool hidden = !shape_.last;
  Dropout dropout;
  if (hidden && pass.training) dropout = Dropout{dropout_, pass.seed, dropout_stream(pass.epoch), 0, 0};
  bias_relu_dropout_backward<float>(grad_out, out_, hidden, dropout);
  norm_.backward(grad_out, ops.num_nodes, shape_.out, kLocal, kLocal);
  column_sums<float>(grad_out, bias_.grad, Vector<float>());

  const Matrix<float> gw = weight_.grad_matrix();
  const Matrix<const float> w = weight_.matrix();
  if (transform_first_) {  // g_mid = A^T g_out; gW = H^T g_mid; gH = g_mid W^T
    ops.aggregate_transpose.apply(grad_out, grad_mid_);
    gemm<float>(Trans::Yes, Trans::No, 1.0f, input_, grad_mid_, 0.0f, gw);
    if (want_input_grad) gemm<float>(Trans::No, Trans::Yes, 1.0f, grad_mid_, w, 0.0f, grad_in_);
  } else {  // gW = mid^T g_out; g_mid = g_out W^T; gH = A^T g_mid
    gemm<float>(Trans::Yes, Trans::No, 1.0f, mid_, grad_out, 0.0f, gw);
    if (want_input_grad) {
      gemm<float>(Trans::No, Trans::Yes, 1.0f, grad_out, w, 0.0f, grad_mid_);
      ops.aggregate_transpose.apply(grad_mid_, grad_in_);
    }
  }
  if (kind_ == ModelKind::Sage) {  // out += H W_root: gW_root = H^T g_out; gH += g_out W_root^T
    gemm<float>(Trans::Yes, Trans::No, 1.0f, input_, grad_out, 0.0f, root_weight_.grad_matrix());
    if (want_input_grad) gemm<float>(Trans::No, Trans::Yes, 1.0f, grad_out, root_weight_.matrix(), 1.0f, grad_in_);
  }
  return grad_in_;
}

}  // namespace tessera
