// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/parallel3d/pmm.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "tessera/comm/collectives.hpp"
#include "tessera/kernels/gemm.hpp"

namespace tessera {

LayerComms layer_comms(const ProcessGrid& grid, int layer, int overlap_chunks, PhaseTimers* timers,
                       CommDtype dtype) {
  const AxisRoles r = roles_for_layer(layer);
  return {&grid.axis(r.a), &grid.axis(r.b), &grid.axis(r.c), overlap_chunks, timers, dtype};
}

void sum_over(const Communicator& comm, float* data, int64_t count, const std::string& phase,
              CommDtype dtype) {
  if (comm.size() == 1) return;
  Kokkos::fence();
  if (dtype == CommDtype::Bf16)
    all_reduce_bf16(comm, data, count, phase);
  else
    all_reduce(comm, data, count, ReduceOp::Sum, phase);
}

namespace {
int64_t size_of(const Matrix<float>& m) {
  return int64_t(m.extent(0) * m.extent(1));
}

// Runs fn and adds its time (after a fence) to `phase` when timers are on.
template <class Fn>
void timed(PhaseTimers* timers, const char* phase, const Fn& fn) {
  if (!timers) return fn();
  Stopwatch watch;
  fn();
  Kokkos::fence();
  timers->add(phase, watch.seconds());
}

// y = op x summed over comm; with chunks > 1 the rows go in chunks, each chunk's all-reduce in flight while
// the next chunk computes (MPI_Test between chunks lets MPI progress without a progress thread).
void spmm_then_sum(const CsrSpmm<float>& op, const Matrix<const float>& x, const Matrix<float>& y,
                   const LayerComms& comms, const Communicator& comm, const std::string& phase) {
  const int chunks = comms.overlap_chunks;
  PhaseTimers* timers = comms.timers;
  if (chunks <= 1 || comm.size() == 1) {
    timed(timers, "spmm", [&] { op.apply(x, y); });
    sum_over(comm, y.data(), size_of(y), phase, comms.dtype);
    return;
  }
  // Chunks are cut by row count, not by this rank's nonzeros: every rank of the reduction holds the same
  // rows and must post the same sequence of all-reduces.
  const int64_t rows = int64_t(y.extent(0)), width = int64_t(y.extent(1));
  std::vector<Request> pending;
  std::vector<Bf16AllReduce> pending_bf16;
  pending_bf16.reserve(size_t(chunks));
  for (int c = 0; c < chunks; ++c) {
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    timed(timers, "spmm", [&] { op.apply_rows(x, y, r0, r1); });
    Kokkos::fence();
    float* block = y.data() + r0 * width;
    if (comms.dtype == CommDtype::Bf16) {
      // Chunk c - 1's second stage starts here, at the same point of the sequence on every rank.
      pending_bf16.emplace_back(comm, block, (r1 - r0) * width, phase);
      if (c > 0) pending_bf16[size_t(c - 1)].start_gather();
    } else {
      pending.push_back(iall_reduce(comm, block, (r1 - r0) * width, ReduceOp::Sum, phase));
    }
    for (Request& r : pending) r.test();
    for (Bf16AllReduce& r : pending_bf16) r.test();
  }
  wait_all(pending);
  for (Bf16AllReduce& r : pending_bf16) r.wait();
}
}  // namespace

void pmm_forward(const AdjacencyBlock& a, const LayerComms& comms, const Matrix<const float>& h,
                 const Matrix<const float>& w, const Matrix<float>& agg, const Matrix<float>& out,
                 bool agg_ready) {
  if (!agg_ready) spmm_then_sum(a.forward, h, agg, comms, *comms.a, "forward allreduce a");
  timed(comms.timers, "gemm", [&] { gemm<float>(Trans::No, Trans::No, 1.0f, agg, w, 0.0f, out); });
  sum_over(*comms.b, out.data(), size_of(out), "forward allreduce b", comms.dtype);
}

void pmm_backward(const AdjacencyBlock& a, const LayerComms& comms, const Matrix<const float>& agg,
                  const Matrix<const float>& w, const Matrix<const float>& g_out, const Matrix<float>& g_w,
                  const Matrix<float>& g_agg, const Matrix<float>& g_h) {
  timed(comms.timers, "gemm", [&] { gemm<float>(Trans::Yes, Trans::No, 1.0f, agg, g_out, 0.0f, g_w); });
  sum_over(*comms.c, g_w.data(), size_of(g_w), "backward allreduce c (weights)");
  if (g_h.extent(0) == 0) return;
  timed(comms.timers, "gemm", [&] { gemm<float>(Trans::No, Trans::Yes, 1.0f, g_out, w, 0.0f, g_agg); });
  sum_over(*comms.a, g_agg.data(), size_of(g_agg), "backward allreduce a", comms.dtype);
  spmm_then_sum(a.transpose, g_agg, g_h, comms, *comms.c, "backward allreduce c (inputs)");
}

void pmm_forward_transform_first(const AdjacencyBlock& a, const LayerComms& comms,
                                 const Matrix<const float>& h, const Matrix<const float>& w,
                                 const Matrix<float>& t, const Matrix<float>& y, const Matrix<float>& out) {
  timed(comms.timers, "gemm", [&] { gemm<float>(Trans::No, Trans::No, 1.0f, h, w, 0.0f, t); });
  sum_over(*comms.b, t.data(), size_of(t), "forward allreduce b", comms.dtype);
  if (comms.a->size() == 1) {  // out is all of y
    timed(comms.timers, "spmm", [&] { a.forward.apply(t, out); });
    return;
  }
  spmm_then_sum(a.forward, t, y, comms, *comms.a, "forward allreduce a");
  const int64_t width = int64_t(out.extent(1)), first = comms.a->rank() * width;
  Kokkos::deep_copy(out, Kokkos::subview(y, Kokkos::ALL(), std::make_pair(first, first + width)));
}

void pmm_backward_transform_first(const AdjacencyBlock& a, const LayerComms& comms,
                                  const Matrix<const float>& h, const Matrix<const float>& w,
                                  const Matrix<const float>& g_out, const Vector<float>& gathered,
                                  const Matrix<float>& g_y, const Matrix<float>& g_t,
                                  const Matrix<float>& g_w, const Matrix<float>& g_h) {
  const int64_t rows = int64_t(g_out.extent(0)), width = int64_t(g_out.extent(1));
  const int ga = comms.a->size();
  if (ga > 1) {
    Kokkos::fence();
    all_gather(*comms.a, g_out.data(), rows * width, gathered.data(), "backward allgather a");
    for (int k = 0; k < ga; ++k) {
      const Matrix<const float> block(gathered.data() + k * rows * width, size_t(rows), size_t(width));
      Kokkos::deep_copy(Kokkos::subview(g_y, Kokkos::ALL(), std::make_pair(k * width, (k + 1) * width)),
                        block);
    }
  }
  // With one rank along a, g_out already holds every column.
  spmm_then_sum(a.transpose, ga > 1 ? Matrix<const float>(g_y) : g_out, g_t, comms, *comms.c,
                "backward allreduce c (inputs)");
  timed(comms.timers, "gemm", [&] { gemm<float>(Trans::Yes, Trans::No, 1.0f, h, g_t, 0.0f, g_w); });
  sum_over(*comms.a, g_w.data(), size_of(g_w), "backward allreduce a (weights)");
  if (g_h.extent(0) == 0) return;
  timed(comms.timers, "gemm", [&] { gemm<float>(Trans::No, Trans::Yes, 1.0f, g_t, w, 0.0f, g_h); });
}

namespace {

using Exec = ExecSpace;

// Per selected row: max over the real local classes, then over a (other rows: 0; the loss skips them).
Vector<float> row_max(const LayerComms& comms, const Matrix<const float>& x, int64_t col_begin,
                      int64_t classes, const Vector<const int64_t>& labels,
                      const Vector<const uint8_t>& mask) {
  const int64_t cols = int64_t(x.extent(1));
  const int64_t local = std::max<int64_t>(0, std::min(cols, classes - col_begin));
  Vector<float> m("row_max", x.extent(0));
  Kokkos::parallel_for(
      "tessera::row_max", Kokkos::RangePolicy<Exec>(0, int64_t(x.extent(0))), KOKKOS_LAMBDA(int64_t i) {
        if (mask(i) == 0 || labels(i) < 0) {
          m(i) = 0.0f;
          return;
        }
        float top = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < local; ++j) top = x(i, j) > top ? x(i, j) : top;
        m(i) = top;
      });
  Kokkos::fence();
  if (comms.a->size() > 1)
    all_reduce(*comms.a, m.data(), int64_t(m.extent(0)), ReduceOp::Max, "loss allreduce a");
  return m;
}

}  // namespace

std::pair<double, int64_t> softmax_cross_entropy_3d(const LayerComms& comms, const Matrix<const float>& x,
                                                    int64_t col_begin, int64_t classes,
                                                    const Vector<const int64_t>& labels,
                                                    const Vector<const uint8_t>& mask, float grad_scale,
                                                    const Matrix<float>& grad) {
  const int64_t rows = int64_t(x.extent(0)), cols = int64_t(x.extent(1));
  const int64_t local = std::max<int64_t>(0, std::min(cols, classes - col_begin));
  const Vector<float> top = row_max(comms, x, col_begin, classes, labels, mask);
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
  if (comms.a->size() > 1) all_reduce(*comms.a, parts.data(), 2 * rows, ReduceOp::Sum, "loss allreduce a");
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
  if (comms.c->size() > 1) all_reduce(*comms.c, totals, 2, ReduceOp::Sum, "loss allreduce c");
  return {totals[0], int64_t(totals[1])};
}

Vector<int64_t> argmax_3d(const LayerComms& comms, const Matrix<const float>& x, int64_t col_begin,
                          int64_t classes) {
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
  if (comms.a->size() > 1) {
    // MPI_MAXLOC keeps the lowest index among equal values, as the one-rank argmax does.
    Stopwatch watch;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, best.data(), mpi_count(rows, "MPI_Allreduce"), MPI_FLOAT_INT,
                            MPI_MAXLOC, comms.a->get()),
              "MPI_Allreduce");
    comms.a->stats().record("accuracy allreduce a", Collective::AllReduce, rows * int64_t(sizeof(ValueIndex)),
                            watch.seconds());
  }
  HostVector<int64_t> out("argmax", size_t(rows));
  for (int64_t i = 0; i < rows; ++i) out(i) = best(i).index;
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), out);
}

std::pair<int64_t, int64_t> count_correct_3d(const LayerComms& comms, const Matrix<const float>& x,
                                             int64_t col_begin, int64_t classes,
                                             const Vector<const int64_t>& labels,
                                             const Vector<const uint8_t>& mask) {
  const Vector<int64_t> pred = argmax_3d(comms, x, col_begin, classes);
  int64_t correct = 0, count = 0;
  Kokkos::parallel_reduce(
      "tessera::correct_3d", Kokkos::RangePolicy<Exec>(0, int64_t(x.extent(0))),
      KOKKOS_LAMBDA(int64_t i, int64_t & hits, int64_t & n) {
        if (mask(i) == 0 || labels(i) < 0) return;
        hits += pred(i) == labels(i) ? 1 : 0;
        n += 1;
      },
      correct, count);
  int64_t totals[2] = {correct, count};
  if (comms.c->size() > 1) all_reduce(*comms.c, totals, 2, ReduceOp::Sum, "accuracy allreduce c");
  return {totals[0], totals[1]};
}

}  // namespace tessera
