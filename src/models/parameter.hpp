// SPDX-License-Identifier: BSD-3-Clause
// Trainable parameters and persistent buffers, stored flat (optimizers and checkpoints see vectors; layers
// see matrices over the same memory). Initial values come from the counter-based generator keyed by the
// parameter's id and its global (row, col), so any grid or rank count starts from the same weights.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/core/views.hpp"

namespace tessera {

/// Scalar is float for training; double instantiations exist so tests can check gradients precisely.
template <class Scalar>
struct Parameter {
  std::string name;
  int64_t rows = 0, cols = 0;
  bool decay = false;  // weight decay applies (weights yes; biases and norm parameters no)
  Vector<Scalar> value, grad;

  Parameter() = default;
  Parameter(std::string name, int64_t rows, int64_t cols, bool decay);
  int64_t size() const { return rows * cols; }
  Matrix<Scalar> matrix() const { return Matrix<Scalar>(value.data(), size_t(rows), size_t(cols)); }
  Matrix<Scalar> grad_matrix() const { return Matrix<Scalar>(grad.data(), size_t(rows), size_t(cols)); }
};

/// Glorot/Xavier uniform: U(-a, a), a = sqrt(6 / (rows + cols)), value(i, j) from key (seed, stream) at (i,
/// j).
template <class Scalar>
void glorot_init(const Parameter<Scalar>& p, uint64_t seed, uint64_t stream);

}  // namespace tessera
