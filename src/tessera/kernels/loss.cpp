// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/loss.hpp"

#include <cmath>

namespace tessera {

using Exec = ExecSpace;

template <class Scalar>
std::pair<double, int64_t> masked_softmax_cross_entropy(const Matrix<const Scalar>& logits,
                                                        const Vector<const int64_t>& labels,
                                                        const Vector<const uint8_t>& mask, Scalar grad_scale,
                                                        const Matrix<Scalar>& grad) {
  const int64_t classes = int64_t(logits.extent(1));
  const bool want_grad = grad.extent(0) > 0;
  double loss = 0;
  int64_t count = 0;
  Kokkos::parallel_reduce(
      "tessera::softmax_xent", Kokkos::RangePolicy<Exec>(0, int64_t(logits.extent(0))),
      KOKKOS_LAMBDA(int64_t i, double& loss_sum, int64_t& n) {
        const bool selected = mask(i) != 0 && labels(i) >= 0;
        if (!selected) {
          if (want_grad)
            for (int64_t j = 0; j < classes; ++j) grad(i, j) = Scalar(0);
          return;
        }
        Scalar top = logits(i, 0);
        for (int64_t j = 1; j < classes; ++j) top = logits(i, j) > top ? logits(i, j) : top;
        double denom = 0;
        for (int64_t j = 0; j < classes; ++j) denom += ::exp(double(logits(i, j) - top));
        const int64_t y = labels(i);
        loss_sum += ::log(denom) - double(logits(i, y) - top);
        n += 1;
        if (want_grad)
          for (int64_t j = 0; j < classes; ++j) {
            const double p = ::exp(double(logits(i, j) - top)) / denom;
            grad(i, j) = grad_scale * Scalar(p - (j == y ? 1.0 : 0.0));
          }
      },
      loss, count);
  return {loss, count};
}

template <class Scalar>
std::pair<int64_t, int64_t> count_correct(const Matrix<const Scalar>& logits,
                                          const Vector<const int64_t>& labels,
                                          const Vector<const uint8_t>& mask) {
  const int64_t classes = int64_t(logits.extent(1));
  int64_t correct = 0, count = 0;
  Kokkos::parallel_reduce(
      "tessera::count_correct", Kokkos::RangePolicy<Exec>(0, int64_t(logits.extent(0))),
      KOKKOS_LAMBDA(int64_t i, int64_t & hits, int64_t & n) {
        if (mask(i) == 0 || labels(i) < 0) return;
        int64_t best = 0;
        for (int64_t j = 1; j < classes; ++j)
          if (logits(i, j) > logits(i, best)) best = j;
        hits += best == labels(i) ? 1 : 0;
        n += 1;
      },
      correct, count);
  return {correct, count};
}

template <class Scalar>
void argmax_rows(const Matrix<const Scalar>& logits, const Vector<int64_t>& pred) {
  const int64_t classes = int64_t(logits.extent(1));
  Kokkos::parallel_for(
      "tessera::argmax", Kokkos::RangePolicy<Exec>(0, int64_t(logits.extent(0))), KOKKOS_LAMBDA(int64_t i) {
        int64_t best = 0;
        for (int64_t j = 1; j < classes; ++j)
          if (logits(i, j) > logits(i, best)) best = j;
        pred(i) = best;
      });
}

#define TESSERA_INSTANTIATE(S)                                                               \
  template std::pair<double, int64_t> masked_softmax_cross_entropy<S>(                       \
      const Matrix<const S>&, const Vector<const int64_t>&, const Vector<const uint8_t>&, S, \
      const Matrix<S>&);                                                                     \
  template std::pair<int64_t, int64_t> count_correct<S>(                                     \
      const Matrix<const S>&, const Vector<const int64_t>&, const Vector<const uint8_t>&);   \
  template void argmax_rows<S>(const Matrix<const S>&, const Vector<int64_t>&);
TESSERA_INSTANTIATE(float)
TESSERA_INSTANTIATE(double)
#undef TESSERA_INSTANTIATE

}  // namespace tessera
