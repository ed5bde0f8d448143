// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/parallel3d/loss3d.hpp"

#include <cmath>
#include <limits>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/timer.hpp"

namespace tessera {

namespace {

using Exec = ExecSpace;

// Per selected row: max over the real local classes, then over a (other rows: 0; the loss skips them).
Vector<float> row_max(const LogitsLayout& layout, const Matrix<const float>& x,
                      const Vector<const int64_t>& labels, const Vector<const uint8_t>& mask) {
  const int64_t col_begin = layout.col_begin, classes = layout.classes_total;
  const int64_t cols = int64_t(x.extent(1));
  const int64_t local = std::max<int64_t>(0, std::min(cols, classes - col_begin));
  Vector<float> m("row_max", x.extent(0));
  Kokkos::parallel_for(
      "tessera::row_max", Kokkos::RangePolicy<Exec>(0, int64_t(x.extent(0))), KOKKOS_LAMBDA(int64_t i) {
        if (mask(i) == 0 || labels(i) < 0) {
          m(i) = 0.0f;
          return;
        }
        float top = -HUGE_VALF;  // numeric_limits' infinity() is a host-only constexpr for nvcc
        for (int64_t j = 0; j < local; ++j) top = x(i, j) > top ? x(i, j) : top;
        m(i) = top;
      });
  Kokkos::fence();
  if (layout.classes->size() > 1)
    all_reduce(*layout.classes, m.data(), int64_t(m.extent(0)), ReduceOp::Max, "loss allreduce a");
  return m;
}

}  // namespace

std::pair<double, int64_t> softmax_cross_entropy_3d(const LogitsLayout& layout, const Matrix<const float>& x,
                                                    const Vector<const int64_t>& labels,
                                                    const Vector<const uint8_t>& mask, float grad_scale,
                                                    const Matrix<float>& grad) {
  const int64_t col_begin = layout.col_begin, classes = layout.classes_total;
  const int64_t rows = int64_t(x.extent(0)), cols = int64_t(x.extent(1));
  const int64_t local = std::max<int64_t>(0, std::min(cols, classes - col_begin));
  const Vector<float> top = row_max(layout, x, labels, mask);
  // Sum of exponentials and the label's logit, both summed over a (only one rank holds the label column).
  // Rows outside the mask (the same rows on every rank of a) cost nothing: their gradient is zero.
  Matrix<double> parts("loss_parts", size_t(rows), 2);
  Kokkos::parallel_for(
      "tessera::loss_parts", Kokkos::RangePolicy<Exec>(0, rows), KOKKOS_LAMBDA(int64_t i) {
        if (mask(i) == 0 || labels(i) < 0) {
          parts(i, 0) = 1.0, parts(i, 1) = 0.0;
          return;
        }
        double s = 0;
        for (int64_t j = 0; j < local; ++j) s += ::exp(double(x(i, j) - top(i)));
        const int64_t y = labels(i) - col_begin;
        parts(i, 0) = s;
        parts(i, 1) = y >= 0 && y < local ? double(x(i, y) - top(i)) : 0.0;
      });
  Kokkos::fence();
  if (layout.classes->size() > 1)
    all_reduce(*layout.classes, parts.data(), 2 * rows, ReduceOp::Sum, "loss allreduce a");
  const bool want_grad = grad.extent(0) > 0;
  double loss = 0;
  int64_t count = 0;
  Kokkos::parallel_reduce(
      "tessera::loss_3d", Kokkos::RangePolicy<Exec>(0, rows),
      KOKKOS_LAMBDA(int64_t i, double& sum, int64_t& n) {
        const bool selected = mask(i) != 0 && labels(i) >= 0;
        if (want_grad && !selected)
          for (int64_t j = 0; j < cols; ++j) grad(i, j) = 0.0f;
        else if (want_grad)
          for (int64_t j = 0; j < cols; ++j) {
            const double p = j < local ? ::exp(double(x(i, j) - top(i))) / parts(i, 0) : 0.0;
            grad(i, j) = grad_scale * float(p - (col_begin + j == labels(i) ? 1.0 : 0.0));
          }
        if (!selected) return;
        sum += ::log(parts(i, 0)) - parts(i, 1);
        n += 1;
      },
      loss, count);
  double totals[2] = {loss, double(count)};
  if (layout.rows->size() > 1) all_reduce(*layout.rows, totals, 2, ReduceOp::Sum, "loss allreduce c");
  return {totals[0], int64_t(totals[1])};
}

Vector<int64_t> argmax_3d(const LogitsLayout& layout, const Matrix<const float>& x) {
  const int64_t col_begin = layout.col_begin, classes = layout.classes_total;
  const int64_t rows = int64_t(x.extent(0)), cols = int64_t(x.extent(1));
  const int64_t local = std::max<int64_t>(0, std::min(cols, classes - col_begin));
  struct ValueIndex {
    float value;
    int index;
  };
  Kokkos::View<ValueIndex*, Kokkos::HostSpace> best("argmax", size_t(rows));
  const auto hx = Kokkos::create_mirror_view_and_copy(HostSpace(), x);
  for (int64_t i = 0; i < rows; ++i) {
    ValueIndex b{-std::numeric_limits<float>::infinity(), int(classes)};
    for (int64_t j = 0; j < local; ++j)
      if (hx(i, j) > b.value) b = {hx(i, j), int(col_begin + j)};
    best(i) = b;
  }
  if (layout.classes->size() > 1) {
    // MPI_MAXLOC keeps the lowest index among equal values, as the one-rank argmax does.
    Stopwatch watch;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, best.data(), mpi_count(rows, "MPI_Allreduce"), MPI_FLOAT_INT,
                            MPI_MAXLOC, layout.classes->get()),
              "MPI_Allreduce");
    layout.classes->stats().record("accuracy allreduce a", Collective::AllReduce,
                                   rows * int64_t(sizeof(ValueIndex)), watch.seconds());
  }
  HostVector<int64_t> out("argmax", size_t(rows));
  for (int64_t i = 0; i < rows; ++i) out(i) = best(i).index;
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), out);
}

std::pair<int64_t, int64_t> count_matches_3d(const LogitsLayout& layout, const Vector<const int64_t>& pred,
                                             const Vector<const int64_t>& labels,
                                             const Vector<const uint8_t>& mask) {
  int64_t correct = 0, count = 0;
  Kokkos::parallel_reduce(
      "tessera::correct_3d", Kokkos::RangePolicy<Exec>(0, int64_t(pred.extent(0))),
      KOKKOS_LAMBDA(int64_t i, int64_t & hits, int64_t & n) {
        if (mask(i) == 0 || labels(i) < 0) return;
        hits += pred(i) == labels(i) ? 1 : 0;
        n += 1;
      },
      correct, count);
  int64_t totals[2] = {correct, count};
  if (layout.rows->size() > 1) all_reduce(*layout.rows, totals, 2, ReduceOp::Sum, "accuracy allreduce c");
  return {totals[0], totals[1]};
}

std::pair<int64_t, int64_t> count_correct_3d(const LogitsLayout& layout, const Matrix<const float>& x,
                                             const Vector<const int64_t>& labels,
                                             const Vector<const uint8_t>& mask) {
  return count_matches_3d(layout, argmax_3d(layout, x), labels, mask);
}

}  // namespace tessera
