// SPDX-License-Identifier: BSD-3-Clause
// Trainable parameters and persistent buffers, stored flat (optimizers and checkpoints see vectors; layers
// see matrices over the same memory), each with its placement: where the local block sits in the global
// matrix and which replica writes it. Initialization, checkpoints and resharding follow from that pair, so
// a parameter looks the same to them on one rank and on any grid.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/core/views.hpp"

namespace tessera {

/// Where a local block sits in its global (unpadded) matrix, and which replica writes it.
struct BlockPlacement {
  int64_t row_begin = 0;  ///< global row of the block's row 0
  int64_t col_begin = 0;  ///< global column of the block's column 0
  int64_t rows = 0;       ///< rows of the global matrix
  int64_t cols = 0;       ///< columns of the global matrix
  bool owner = false;     ///< exactly one rank among the block's replicas
};

/// A trainable matrix block and its gradient.
struct Parameter {
  std::string name;     ///< unique in a model ("layer0.weight"); a checkpoint's dataset name
  int64_t rows = 0;     ///< local rows
  int64_t cols = 0;     ///< local columns
  bool decay = false;   ///< weight decay applies (weights yes; biases and norm parameters no)
  Vector<float> value;  ///< rows x cols, row-major
  Vector<float> grad;   ///< same shape: the last backward's gradient

  /// No storage.
  Parameter() = default;
  /// Zero-initialized storage of its own.
  Parameter(std::string name, int64_t rows, int64_t cols, bool decay);
  /// Over storage the caller owns (a layer keeping several weights in one allocation).
  Parameter(std::string name, int64_t rows, int64_t cols, bool decay, Vector<float> value,
            Vector<float> grad);
  /// rows * cols.
  int64_t size() const { return rows * cols; }
  /// The value as a rows x cols matrix.
  Matrix<float> matrix() const { return Matrix<float>(value.data(), size_t(rows), size_t(cols)); }
  /// The gradient as a rows x cols matrix.
  Matrix<float> grad_matrix() const { return Matrix<float>(grad.data(), size_t(rows), size_t(cols)); }
};

/// A parameter with its placement: what a layer lists, and what optimizers and checkpoints take.
struct ParameterRef {
  Parameter* param = nullptr;  ///< owned by the layer
  BlockPlacement placement;    ///< where its block sits
};

/// Non-trainable state a checkpoint keeps (BatchNorm's running statistics): a 1 x n row block.
struct BufferRef {
  std::string name;                ///< unique in a model
  Vector<float>* value = nullptr;  ///< owned by the layer
  BlockPlacement placement;        ///< where its block sits in the 1 x n global row
};

/// Glorot/Xavier uniform over the global matrix: U(-a, a), a = sqrt(6 / (rows + cols)), entry (i, j) drawn
/// from key (seed, stream) at global (i, j); local entries outside the global matrix (padding) are zero.
/// Every grid draws the same global matrix.
void glorot_init(const Parameter& p, const BlockPlacement& at, uint64_t seed, uint64_t stream);

}  // namespace tessera
