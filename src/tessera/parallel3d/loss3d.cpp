// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/parallel3d/loss3d.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

#include "tessera/comm/device_collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/scratch.hpp"
#include "tessera/core/timer.hpp"

namespace tessera {

namespace {

using Exec = ExecSpace;

// Per selected row: max over the real local classes, then over a (other rows: 0; the loss skips them).
Vector<float> row_max(const LogitsLayout& layout, const Matrix<const float>& x,
                      const Vector<const int64_t>& labels, const Vector<const uint8_t>& mask) {
  const int64_t local = real_classes(layout, int64_t(x.extent(1)));
  // Scratch, not an allocation per step (scratch.hpp): the loss runs once per step.
  const Vector<float> m = scratch_vector<float>("loss.row_max", x.extent(0));
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
  if (layout.classes->size() > 1)  // device_all_reduce orders itself after the kernel (a fence for MPI)
    device_all_reduce(*layout.classes, m.data(), int64_t(m.extent(0)), ReduceOp::Max, "loss allreduce a");
  return m;
}

// d(loss)/d(logit) of one entry: (softmax - one-hot) * scale on selected rows, 0 elsewhere.
KOKKOS_INLINE_FUNCTION float logit_gradient(float x, float top, double sum_exp, bool selected,
                                            bool real_class, bool label, float scale) {
  if (!selected) return 0.0f;
  const double p = real_class ? ::exp(double(x - top)) / sum_exp : 0.0;
  return scale * float(p - (label ? 1.0 : 0.0));
}

// A thread per entry on a device (neighbouring threads on neighbouring logits; a thread per row of 40
// logits took 0.19 ms for 169k rows on an H100), a row per task on a host (no division per entry). The
// same values either way.
void write_logits_gradient(const Matrix<const float>& x, const Vector<const float>& top,
                           const Matrix<const double>& parts, const Vector<const int64_t>& labels,
                           const Vector<const uint8_t>& mask, int64_t col_begin, int64_t local, float scale,
                           const Matrix<float>& grad) {
  const int64_t rows = int64_t(x.extent(0)), cols = int64_t(x.extent(1));
  const auto entry = KOKKOS_LAMBDA(int64_t i, int64_t j) {
    grad(i, j) = logit_gradient(x(i, j), top(i), parts(i, 0), mask(i) != 0 && labels(i) >= 0, j < local,
                                col_begin + j == labels(i), scale);
  };
  if (std::is_same<DeviceSpace, HostSpace>::value) {
    Kokkos::parallel_for(
        "tessera::logits_gradient", Kokkos::RangePolicy<Exec>(0, rows), KOKKOS_LAMBDA(int64_t i) {
          for (int64_t j = 0; j < cols; ++j) entry(i, j);
        });
  } else {
    Kokkos::parallel_for(
        "tessera::logits_gradient", Kokkos::RangePolicy<Exec>(0, rows * cols), KOKKOS_LAMBDA(int64_t k) {
          const int64_t i = k / cols;
          entry(i, k - i * cols);
        });
  }
}

// One host pass per row where a rank holds every class of its rows: the maximum, the exponentials (kept
// for the gradient where the row has at most kKeptExps classes, recomputed past that), the loss and the
// gradient, with the row in cache. The same operations in the same order as the three passes above, so
// the same bits; the loss is summed over the same range of rows.
constexpr int64_t kKeptExps = 64;

std::pair<double, int64_t> one_pass_host_loss(const Matrix<const float>& x,
                                              const Vector<const int64_t>& labels,
                                              const Vector<const uint8_t>& mask, int64_t local, float scale,
                                              const Matrix<float>& grad) {
  const int64_t rows = int64_t(x.extent(0)), cols = int64_t(x.extent(1));
  const bool want_grad = grad.extent(0) > 0;
  double loss = 0;
  int64_t count = 0;
  Kokkos::parallel_reduce(
      "tessera::loss_one_pass", Kokkos::RangePolicy<Exec>(0, rows),
      KOKKOS_LAMBDA(int64_t i, double& sum, int64_t& n) {
        const bool selected = mask(i) != 0 && labels(i) >= 0;
        if (!selected) {
          if (want_grad)
            for (int64_t j = 0; j < cols; ++j)
              grad(i, j) = logit_gradient(x(i, j), 0.0f, 1.0, false, false, false, scale);
          return;
        }
        float top = -HUGE_VALF;
        for (int64_t j = 0; j < local; ++j) top = x(i, j) > top ? x(i, j) : top;
        double exps[kKeptExps];
        double s = 0;
        for (int64_t j = 0; j < local; ++j) {
          const double e = ::exp(double(x(i, j) - top));
          if (j < kKeptExps) exps[j] = e;
          s += e;
        }
        const int64_t y = labels(i);
        sum += ::log(s) - (y < local ? double(x(i, y) - top) : 0.0);
        n += 1;
        if (!want_grad) return;
        for (int64_t j = 0; j < cols; ++j) {
          if (j >= local || j >= kKeptExps) {
            grad(i, j) = logit_gradient(x(i, j), top, s, true, j < local, j == y, scale);
            continue;
          }
          grad(i, j) = scale * float(exps[j] / s - (j == y ? 1.0 : 0.0));
        }
      },
      loss, count);
  return {loss, count};
}

}  // namespace

int64_t real_classes(const LogitsLayout& layout, int64_t cols) {
  return std::max<int64_t>(0, std::min(cols, layout.classes_total - layout.col_begin));
}

// Entered by every rank holding rows alike, whatever its count.
std::pair<double, int64_t> summed_over_rows(const LogitsLayout& layout, double loss, int64_t count) {
  double totals[2] = {loss, double(count)};
  if (layout.rows->size() > 1) all_reduce(*layout.rows, totals, 2, ReduceOp::Sum, "loss allreduce c");
  return {totals[0], int64_t(totals[1])};
}

std::pair<double, int64_t> softmax_cross_entropy_3d(const LogitsLayout& layout, const Matrix<const float>& x,
                                                    const Vector<const int64_t>& labels,
                                                    const Vector<const uint8_t>& mask, float grad_scale,
                                                    const Matrix<float>& grad) {
  const int64_t col_begin = layout.col_begin;
  const int64_t rows = int64_t(x.extent(0)), cols = int64_t(x.extent(1));
  const int64_t local = real_classes(layout, cols);
  if (std::is_same<DeviceSpace, HostSpace>::value && layout.classes->size() == 1) {
    const auto [loss, count] = one_pass_host_loss(x, labels, mask, local, grad_scale, grad);
    return summed_over_rows(layout, loss, count);
  }
  const Vector<float> top = row_max(layout, x, labels, mask);
  // Sum of exponentials and the label's logit, both summed over a (only one rank holds the label column).
  // Rows outside the mask (the same rows on every rank of a) cost nothing: their gradient is zero.
  const Matrix<double> parts = scratch_matrix<double>("loss.parts", size_t(rows), 2);
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
  if (layout.classes->size() > 1)
    device_all_reduce(*layout.classes, parts.data(), 2 * rows, ReduceOp::Sum, "loss allreduce a");
  if (grad.extent(0) > 0)
    write_logits_gradient(x, top, parts, labels, mask, col_begin, local, grad_scale, grad);
  double loss = 0;
  int64_t count = 0;
  Kokkos::parallel_reduce(
      "tessera::loss_3d", Kokkos::RangePolicy<Exec>(0, rows),
      KOKKOS_LAMBDA(int64_t i, double& sum, int64_t& n) {
        if (mask(i) == 0 || labels(i) < 0) return;
        sum += ::log(parts(i, 0)) - parts(i, 1);
        n += 1;
      },
      loss, count);
  return summed_over_rows(layout, loss, count);
}

namespace {

using ScratchFloats = Kokkos::View<float*, DeviceSpace, Kokkos::MemoryUnmanaged>;

// On the device, in two all-reduces over a (so NCCL can carry them): the row maxima, then the lowest
// class index holding its row's maximum - the one-rank argmax's tie rule. Indices travel as floats, exact
// below 2^24 classes. Both live in scratch buffers kept for the process (a training step counts its
// batch's hits every step: no allocation there), valid until the next call.
ScratchFloats argmax_as_floats(const LogitsLayout& layout, const Matrix<const float>& x) {
  const int64_t col_begin = layout.col_begin, classes = layout.classes_total;
  const int64_t rows = int64_t(x.extent(0)), cols = int64_t(x.extent(1));
  const int64_t local = real_classes(layout, cols);
  require(classes < (int64_t(1) << 24), "argmax: ", classes, " classes do not fit a float index");
  const ScratchFloats top = scratch_vector<float>("argmax.top", size_t(rows));
  Kokkos::parallel_for(
      "tessera::argmax_top", Kokkos::RangePolicy<Exec>(0, rows), KOKKOS_LAMBDA(int64_t i) {
        float best = -HUGE_VALF;
        for (int64_t j = 0; j < local; ++j) best = x(i, j) > best ? x(i, j) : best;
        top(i) = best;
      });
  if (layout.classes->size() > 1)
    device_all_reduce(*layout.classes, top.data(), rows, ReduceOp::Max, "accuracy allreduce a");
  const ScratchFloats index = scratch_vector<float>("argmax.index", size_t(rows));
  Kokkos::parallel_for(
      "tessera::argmax_index", Kokkos::RangePolicy<Exec>(0, rows), KOKKOS_LAMBDA(int64_t i) {
        int64_t at = classes;  // no column here holds the maximum
        for (int64_t j = 0; j < local && at == classes; ++j)
          if (x(i, j) == top(i)) at = col_begin + j;
        index(i) = float(at);
      });
  if (layout.classes->size() > 1)
    device_all_reduce(*layout.classes, index.data(), rows, ReduceOp::Min, "accuracy allreduce a");
  return index;
}

// Rows where pred(i) equals the label, and the rows counted, over the rows' axis.
template <class Predicted>
std::pair<int64_t, int64_t> count_matches(const LogitsLayout& layout, int64_t rows, const Predicted& pred,
                                          const Vector<const int64_t>& labels,
                                          const Vector<const uint8_t>& mask) {
  int64_t correct = 0, count = 0;
  Kokkos::parallel_reduce(
      "tessera::correct_3d", Kokkos::RangePolicy<Exec>(0, rows),
      KOKKOS_LAMBDA(int64_t i, int64_t & hits, int64_t & n) {
        if (mask(i) == 0 || labels(i) < 0) return;
        hits += int64_t(pred(i)) == labels(i) ? 1 : 0;
        n += 1;
      },
      correct, count);
  int64_t totals[2] = {correct, count};
  if (layout.rows->size() > 1) all_reduce(*layout.rows, totals, 2, ReduceOp::Sum, "accuracy allreduce c");
  return {totals[0], totals[1]};
}

}  // namespace

Vector<int64_t> argmax_3d(const LogitsLayout& layout, const Matrix<const float>& x) {
  const ScratchFloats index = argmax_as_floats(layout, x);
  Vector<int64_t> out(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("argmax")),
                      index.extent(0));
  Kokkos::parallel_for(
      "tessera::argmax_out", Kokkos::RangePolicy<Exec>(0, int64_t(index.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { out(i) = int64_t(index(i)); });
  return out;
}

std::pair<int64_t, int64_t> count_matches_3d(const LogitsLayout& layout, const Vector<const int64_t>& pred,
                                             const Vector<const int64_t>& labels,
                                             const Vector<const uint8_t>& mask) {
  return count_matches(layout, int64_t(pred.extent(0)), pred, labels, mask);
}

std::pair<int64_t, int64_t> count_correct_3d(const LogitsLayout& layout, const Matrix<const float>& x,
                                             const Vector<const int64_t>& labels,
                                             const Vector<const uint8_t>& mask) {
  return count_matches(layout, int64_t(x.extent(0)), argmax_as_floats(layout, x), labels, mask);
}

}  // namespace tessera
