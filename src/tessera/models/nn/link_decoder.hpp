// SPDX-License-Identifier: BSD-3-Clause
// The MLP decoder of a link task (OGB's LinkPredictor): a node pair (u, v) scores MLP(h_u * h_v), the
// Hadamard product of their embeddings through `layers` linear layers with ReLU between them and one output.
// The embeddings are spread over the grid as logits are (columns over one axis), so the first layer is a
// partial product over this rank's columns, summed over the columns' axis; the layers after it are the same
// on every rank. Its parameters are trained with the encoder (Sequential::attach lists them with the
// model's, so the optimizer, gradient sums, checkpoints and best-state see them) and applied by the loss
// (LinkLoss::set_decoder), which writes their gradients.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/models/nn/sequential.hpp"
#include "tessera/parallel3d/loss3d.hpp"

namespace tessera {

/// The shape of an MLP decoder.
struct LinkDecoderOptions {
  int layers = 2;      ///< linear layers (the last gives the score), at least 1
  int64_t hidden = 0;  ///< width of the layers before the last (0: the embeddings' width)
  /// Throws Error on impossible settings.
  void validate() const;
};

/// MLP(h_u * h_v): see the file comment. Weights are Glorot-initialized from the model's seed (the same
/// global matrices on every grid), biases zero; no dropout. Computed in double: the layers' products on the
/// library's GEMM (BLAS on the host, the vendor's on a device build), the rest on the host.
class MlpLinkDecoder final : public AttachedParameters {
 public:
  /// Over embeddings at `embeddings` whose local block is `local_cols` wide (its real columns are the first
  /// layer's local rows); `owner`: this rank writes its columns' block (one rank per columns block among
  /// the replicas that hold it).
  MlpLinkDecoder(const LogitsLayout& embeddings, int64_t local_cols, bool owner,
                 const LinkDecoderOptions& options, uint64_t seed);
  std::vector<ParameterRef> parameters() override;
  /// "mlp decoder 2x16" (layers x hidden width).
  std::string describe() const override;
  /// The embeddings' columns this rank holds (the first layer's local rows).
  int64_t local_columns() const { return local_cols_; }
  /// Collective over the columns' axis: the scores of `count` pairs from this rank's columns of their
  /// Hadamard products (`products`: count x local_columns(), row-major); with `keep`, keeps what
  /// backward() needs.
  std::vector<double> scores(std::vector<double> products, int64_t count, bool keep);
  /// From d(loss)/d(score) of the pairs the last kept scores() scored: sets every parameter's gradient
  /// (overwritten) and returns d(loss)/d(products), count x local_columns(). No communication.
  std::vector<double> backward(const std::vector<double>& d_scores);

 private:
  struct Dense {  // one linear layer: weight in x out (first layer: this rank's rows), bias 1 x out
    Parameter weight, bias;
    BlockPlacement weight_at, bias_at;
  };
  const Communicator* columns_;
  int64_t local_cols_ = 0, hidden_ = 0;
  std::vector<Dense> layers_;
  // The last kept forward: the products and each layer's pre-activation (count x out), host copies of the
  // weights.
  std::vector<double> kept_products_;
  std::vector<std::vector<double>> kept_pre_;
  std::vector<std::vector<double>> kept_weights_;
  int64_t kept_count_ = 0;
};

/// The decoder over `encoder`'s output (its layout on its grid, its seed).
std::shared_ptr<MlpLinkDecoder> make_link_decoder(const Model& encoder, const LinkDecoderOptions& options);

/// "mlp decoder LxH" read back into options (throws Error on another text).
LinkDecoderOptions link_decoder_options_from(const std::string& description);

}  // namespace tessera
