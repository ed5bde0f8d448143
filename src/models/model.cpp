// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/model.hpp"

#include <sstream>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/random_streams.hpp"

namespace tessera {

std::string ModelConfig::describe() const {
  std::ostringstream s;
  s << model_kind_name(kind) << ' ' << layers << 'x' << hidden << " (in " << in << ", out " << out
    << ", norm " << norm_name(norm) << ')';
  return s.str();
}

void ModelConfig::validate() const {
  require(layers >= 1, "--layers must be at least 1, not ", layers);
  require(hidden >= 1 || layers == 1, "--hidden must be at least 1, not ", hidden);
  require(in >= 1 && out >= 1, "the model needs at least one input feature and one class (in ", in, ", out ",
          out, ")");
  require(dropout >= 0 && dropout < 1, "--dropout must be in [0, 1), not ", dropout);
  require(input_dropout >= 0 && input_dropout < 1, "input dropout must be in [0, 1), not ", input_dropout);
}

template <class Scalar>
GnnModel<Scalar>::GnnModel(const ModelConfig& config) : config_(config) {
  config_.validate();
  for (int l = 0; l < config.layers; ++l) {
    LayerShape shape{l == 0 ? config.in : config.hidden, l + 1 == config.layers ? config.out : config.hidden,
                     l + 1 == config.layers};
    layers_.push_back(
        std::make_unique<GnnLayer<Scalar>>(config.kind, l, shape, config.norm, config.dropout, config.seed));
  }
}

template <class Scalar>
Matrix<Scalar> GnnModel<Scalar>::forward(const GraphOps<Scalar>& ops, const Matrix<const Scalar>& features,
                                         const PassInfo& pass) {
  return forward(std::vector<const GraphOps<Scalar>*>(layers_.size(), &ops), features, pass);
}

template <class Scalar>
Matrix<Scalar> GnnModel<Scalar>::forward(const std::vector<const GraphOps<Scalar>*>& ops,
                                         const Matrix<const Scalar>& features, const PassInfo& pass) {
  require(ops.size() == layers_.size(), "model: ", ops.size(), " aggregation operators for ", layers_.size(),
          " layers");
  Matrix<const Scalar> h = features;
  if (pass.training && config_.input_dropout > 0) {
    const size_t rows = features.extent(0), cols = features.extent(1);
    if (dropped_input_.extent(0) < rows || dropped_input_.extent(1) != cols)
      dropped_input_ = Matrix<Scalar>("input_dropout", rows + rows / 4, cols);
    const Matrix<Scalar> dropped(
        Kokkos::subview(dropped_input_, std::make_pair(size_t(0), rows), Kokkos::ALL()));
    Kokkos::deep_copy(dropped, features);
    bias_relu_dropout_forward<Scalar>(
        dropped, Vector<const Scalar>(), false,
        Dropout(config_.input_dropout, pass.seed, streams::input_dropout(pass.epoch)));
    h = dropped;
  }
  Matrix<Scalar> out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    out = layers_[l]->forward(*ops[l], h, pass);
    h = out;
  }
  return out;
}

template <class Scalar>
void GnnModel<Scalar>::set_static_features(bool value) {
  layers_.front()->set_static_input(value && config_.input_dropout == 0);
}

template <class Scalar>
void GnnModel<Scalar>::backward(const GraphOps<Scalar>& ops, const Matrix<Scalar>& grad_logits,
                                const PassInfo& pass) {
  backward(std::vector<const GraphOps<Scalar>*>(layers_.size(), &ops), grad_logits, pass);
}

template <class Scalar>
void GnnModel<Scalar>::backward(const std::vector<const GraphOps<Scalar>*>& ops,
                                const Matrix<Scalar>& grad_logits, const PassInfo& pass) {
  Matrix<Scalar> grad = grad_logits;
  for (int l = int(layers_.size()) - 1; l >= 0; --l)
    grad = layers_[size_t(l)]->backward(*ops[size_t(l)], grad, l > 0, pass);
}

template <class Scalar>
std::vector<Parameter<Scalar>*> GnnModel<Scalar>::parameters() {
  std::vector<Parameter<Scalar>*> out;
  for (auto& layer : layers_)
    for (Parameter<Scalar>* p : layer->parameters()) out.push_back(p);
  return out;
}

template <class Scalar>
std::vector<std::pair<std::string, Vector<Scalar>*>> GnnModel<Scalar>::buffers() {
  std::vector<std::pair<std::string, Vector<Scalar>*>> out;
  for (size_t l = 0; l < layers_.size(); ++l) {
    FeatureNorm<Scalar>& norm = layers_[l]->norm();
    if (norm.kind() != NormKind::Batch) continue;
    const std::string name = "layer" + std::to_string(l) + ".norm";
    out.push_back({name + ".running_mean", &norm.running_mean()});
    out.push_back({name + ".running_var", &norm.running_var()});
  }
  return out;
}

template class GnnModel<float>;
template class GnnModel<double>;

}  // namespace tessera
