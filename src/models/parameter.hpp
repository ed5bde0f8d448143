// SPDX-License-Identifier: BSD-3-Clause
// Trainable parameters and persistent buffers, stored flat (optimizers and checkpoints see vectors; layers
// see matrices over the same memory). Initial values come from the counter-based generator keyed by the
// parameter's id and its global (row, col), so any grid or rank count starts from the same weights.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/core/views.hpp"

namespace tessera {

struct Parameter {
  std::string name;
  int64_t rows = 0, cols = 0;
  bool decay = false;  // weight decay applies (weights yes; biases and norm parameters no)
  Vector<float> value, grad;

  Parameter() = default;
  Parameter(std::string name, int64_t rows, int64_t cols, bool decay);
  int64_t size() const { return rows * cols; }
  Matrix<float> matrix() const { return Matrix<float>(value.data(), size_t(rows), size_t(cols)); }
  Matrix<float> grad_matrix() const { return Matrix<float>(grad.data(), size_t(rows), size_t(cols)); }
};

/// Glorot/Xavier uniform: U(-a, a), a = sqrt(6 / (rows + cols)), value(i, j) from key (seed, stream) at (i, j).
void glorot_init(const Parameter& p, uint64_t seed, uint64_t stream);
/// Every entry set to `value`.
void fill(const Vector<float>& v, float value);

}  // namespace tessera
