// SPDX-License-Identifier: BSD-3-Clause
// Row-wise softmax cross-entropy over the rows a mask selects, and accuracy counting. Rows with label -1
// (unlabeled) never count. The gradient is scaled by the caller's normalizer (1 / number of training
// rows over all ranks), so local and distributed losses are the same number.
#pragma once

#include <cstdint>

#include "tessera/core/views.hpp"

namespace tessera {

/// Returns the sum over selected rows of -log softmax(logits)(label) and their count; writes
/// grad = grad_scale * (softmax - onehot) on selected rows and 0 elsewhere (grad may be empty: no gradient).
template <class Scalar>
std::pair<double, int64_t> masked_softmax_cross_entropy(const Matrix<const Scalar>& logits,
                                                        const Vector<const int64_t>& labels,
                                                        const Vector<const uint8_t>& mask, Scalar grad_scale,
                                                        const Matrix<Scalar>& grad);

/// Number of selected, labeled rows whose argmax (lowest index on ties) equals the label, and their count.
template <class Scalar>
std::pair<int64_t, int64_t> count_correct(const Matrix<const Scalar>& logits,
                                          const Vector<const int64_t>& labels,
                                          const Vector<const uint8_t>& mask);

/// pred(i) = argmax_j logits(i, j).
template <class Scalar>
void argmax_rows(const Matrix<const Scalar>& logits, const Vector<int64_t>& pred);

}  // namespace tessera
