// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/link_decoder.hpp"

#include <algorithm>
#include <cstdio>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/gemm.hpp"
#include "tessera/models/nn/random_streams.hpp"

namespace tessera {

namespace {

std::vector<double> host_copy(const Vector<float>& v) {
  const auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.extent(0));
}

void set_from_host(const Vector<float>& v, const std::vector<double>& values) {
  const auto h = Kokkos::create_mirror_view(HostSpace(), v);
  for (size_t i = 0; i < values.size(); ++i) h(i) = float(values[i]);
  Kokkos::deep_copy(v, h);
}

// A rows x cols host matrix over `v`, where the library's GEMM reads it (the same memory on a host build).
Matrix<const double> readable(const std::vector<double>& v, int64_t rows, int64_t cols) {
  const HostMatrix<const double> h(v.data(), size_t(rows), size_t(cols));
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), h);
}

// op(a) * op(b) (m x n) in double on the library's GEMM (BLAS on the host, the vendor's on a device).
std::vector<double> product(Trans ta, Trans tb, const Matrix<const double>& a, const Matrix<const double>& b,
                            int64_t m, int64_t n) {
  std::vector<double> out(size_t(m * n), 0.0);
  const HostMatrix<double> host(out.data(), size_t(m), size_t(n));
  const Matrix<double> c = Kokkos::create_mirror_view(DeviceSpace(), host);
  gemm<double>(ta, tb, 1.0, a, b, 0.0, c);
  Kokkos::deep_copy(host, c);
  return out;
}

std::vector<double> relu(std::vector<double> x) {
  for (double& v : x) v = std::max(v, 0.0);
  return x;
}

}  // namespace

void LinkDecoderOptions::validate() const {
  require(layers >= 1 && layers <= 16, "`link-decoder-layers` must be in [1, 16], not ", layers);
  require(hidden >= 0, "`link-decoder-hidden` must not be negative, not ", hidden);
}

MlpLinkDecoder::MlpLinkDecoder(const LogitsLayout& at, int64_t local_cols, bool owner,
                               const LinkDecoderOptions& options, uint64_t seed)
    : columns_(at.classes),
      local_cols_(std::clamp<int64_t>(at.classes_total - at.col_begin, 0, local_cols)),
      hidden_(options.hidden > 0 ? options.hidden : at.classes_total) {
  options.validate();
  require(columns_ != nullptr && at.classes_total > 0, "MlpLinkDecoder: no embeddings");
  // The layers after the first are the same on every rank: the first rank of the columns' axis writes them.
  const bool replicated_owner = owner && columns_->rank() == 0;
  for (int l = 0; l < options.layers; ++l) {
    const int64_t in = l == 0 ? at.classes_total : hidden_, out = l + 1 == options.layers ? 1 : hidden_;
    const int64_t rows = l == 0 ? local_cols_ : in;
    const std::string name = "decoder.layer" + std::to_string(l);
    Dense d{Parameter(name + ".weight", rows, out, true), Parameter(name + ".bias", 1, out, false),
            BlockPlacement{l == 0 ? at.col_begin : 0, 0, in, out, l == 0 ? owner : replicated_owner},
            BlockPlacement{0, 0, 1, out, replicated_owner}};
    glorot_init(d.weight, d.weight_at, seed, streams::kLinkDecoder + uint64_t(l));
    layers_.push_back(std::move(d));
  }
}

std::vector<ParameterRef> MlpLinkDecoder::parameters() {
  std::vector<ParameterRef> out;
  for (Dense& d : layers_) out.push_back({&d.weight, d.weight_at}), out.push_back({&d.bias, d.bias_at});
  return out;
}

std::string MlpLinkDecoder::describe() const {
  return "mlp decoder " + std::to_string(layers_.size()) + "x" + std::to_string(hidden_);
}

std::vector<double> MlpLinkDecoder::scores(std::vector<double> products, int64_t count, bool keep) {
  require(int64_t(products.size()) == count * local_cols_, "MlpLinkDecoder::scores: ", products.size(),
          " products for ", count, " pairs of ", local_cols_, " columns");
  std::vector<std::vector<double>> weights;
  for (const Dense& d : layers_) weights.push_back(host_copy(d.weight.value));
  std::vector<std::vector<double>> pre;
  std::vector<double> x;  // the input of the layers after the first
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Parameter& w = layers_[l].weight;
    std::vector<double> a = product(Trans::No, Trans::No, readable(l == 0 ? products : x, count, w.rows),
                                    readable(weights[l], w.rows, w.cols), count, w.cols);
    if (l == 0 && columns_->size() > 1)
      all_reduce(*columns_, a.data(), int64_t(a.size()), ReduceOp::Sum, "link decoder");
    const std::vector<double> bias = host_copy(layers_[l].bias.value);
    for (int64_t e = 0; e < count; ++e)
      for (int64_t j = 0; j < w.cols; ++j) a[size_t(e * w.cols + j)] += bias[size_t(j)];
    if (l + 1 == layers_.size()) {
      if (keep)
        kept_products_ = std::move(products), kept_pre_ = std::move(pre), kept_weights_ = std::move(weights),
        kept_count_ = count;
      return a;  // one column: the scores
    }
    x = relu(a);
    if (keep) pre.push_back(std::move(a));
  }
  return {};
}

std::vector<double> MlpLinkDecoder::backward(const std::vector<double>& d_scores) {
  const int64_t count = kept_count_;
  require(int64_t(d_scores.size()) == count, "MlpLinkDecoder::backward: ", d_scores.size(),
          " gradients for the ", count, " pairs last scored");
  std::vector<double> d_out = d_scores;
  for (size_t l = layers_.size(); l-- > 0;) {
    const Dense& d = layers_[l];
    const int64_t in = d.weight.rows, out = d.weight.cols;
    const std::vector<double> hidden = l == 0 ? std::vector<double>() : relu(kept_pre_[l - 1]);
    const Matrix<const double> g = readable(d_out, count, out);
    const Matrix<const double> x = readable(l == 0 ? kept_products_ : hidden, count, in);
    set_from_host(d.weight.grad, product(Trans::Yes, Trans::No, x, g, in, out));
    std::vector<double> d_bias(size_t(out), 0.0);
    for (int64_t e = 0; e < count; ++e)
      for (int64_t j = 0; j < out; ++j) d_bias[size_t(j)] += d_out[size_t(e * out + j)];
    set_from_host(d.bias.grad, d_bias);
    // d(loss)/d(input) = d_out W^T, through the ReLU of the layer before.
    std::vector<double> d_in =
        product(Trans::No, Trans::Yes, g, readable(kept_weights_[l], in, out), count, in);
    if (l > 0)
      for (size_t i = 0; i < d_in.size(); ++i) d_in[i] = kept_pre_[l - 1][i] > 0 ? d_in[i] : 0.0;
    d_out = std::move(d_in);
  }
  return d_out;
}

std::shared_ptr<MlpLinkDecoder> make_link_decoder(const Model& encoder, const LinkDecoderOptions& options) {
  const ActivationLayout& out = encoder.output_layout();
  const ProcessGrid& grid = encoder.grid();
  const LogitsLayout at{&grid.axis(out.rows_axis), &grid.axis(out.cols_axis), out.col_begin, out.width};
  return std::make_shared<MlpLinkDecoder>(at, out.local_cols, out.row_owner, options, encoder.seed());
}

LinkDecoderOptions link_decoder_options_from(const std::string& description) {
  int layers = 0, used = 0;
  long long hidden = 0;
  const int got = std::sscanf(description.c_str(), "mlp decoder %dx%lld%n", &layers, &hidden, &used);
  const LinkDecoderOptions o{layers, int64_t(hidden)};
  bool valid = got == 2 && size_t(used) == description.size();
  try {
    if (valid) o.validate();
  } catch (const Error&) {
    valid = false;  // the text names no option: say what it is instead
  }
  require(valid,
          "'" + description + "' is not a link decoder tessera builds (mlp decoder LxH, L in [1, 16])");
  return o;
}

}  // namespace tessera
