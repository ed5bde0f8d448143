// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/parallel3d/pmm.hpp"

#include <functional>
#include <type_traits>
#include <vector>

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/device_collectives.hpp"
#include "tessera/core/kernel_profile.hpp"
#include "tessera/kernels/gemm.hpp"

namespace tessera {

LayerComms layer_comms(const ProcessGrid& grid, int layer, int overlap_chunks, PhaseTimers* timers,
                       CommDtype dtype, KernelPath kernels) {
  const AxisRoles r = roles_for_layer(layer);
  return {&grid.axis(r.a), &grid.axis(r.b), &grid.axis(r.c), overlap_chunks, timers, dtype, kernels};
}

std::vector<const AdjacencyBlock*> LayerOperators::terms() const {
  std::vector<const AdjacencyBlock*> out;
  if (aggregate) out.push_back(aggregate);
  if (self) out.push_back(self);
  return out;
}

void sum_over(const Communicator& comm, float* data, int64_t count, const std::string& phase,
              CommDtype dtype) {
  if (comm.size() == 1) return;
  if (dtype == CommDtype::Bf16)
    all_reduce_bf16(comm, data, count, phase);
  else
    device_all_reduce(comm, data, count, ReduceOp::Sum, phase);
}

void sum_over(const Communicator& comm, double* data, int64_t count, const std::string& phase) {
  if (comm.size() > 1) device_all_reduce(comm, data, count, ReduceOp::Sum, phase);
}

namespace {

int64_t size_of(const Matrix<float>& m) {
  return int64_t(m.extent(0) * m.extent(1));
}

template <class T>
Matrix<T> rows_of(const Matrix<T>& m, int64_t begin, int64_t end) {
  return Kokkos::subview(m, std::make_pair(begin, end), Kokkos::ALL());
}

// Block t of T equal blocks stacked by rows.
template <class View>
View term_block(const View& stacked, size_t t, size_t terms) {
  const int64_t rows = int64_t(stacked.extent(0) / terms);
  return rows_of(stacked, int64_t(t) * rows, int64_t(t + 1) * rows);
}

// Runs fn and adds its time to `phase` when timers are on: events on a device stream (no host wait).
template <class Fn>
void timed(PhaseTimers* timers, const char* phase, const Fn& fn) {
  if (!timers) return fn();
  time_phase(*timers, phase, fn);
}

// Computes rows [r0, r1) of y.
using RowProduct = std::function<void(int64_t r0, int64_t r1)>;

// y = the product, summed over comm; with overlap chunks the rows go in chunks, each chunk's all-reduce in
// flight while the next chunk computes (MPI_Test between chunks lets MPI progress without a progress thread).
void product_then_sum(const RowProduct& product, const Matrix<float>& y, const LayerComms& comms,
                      const Communicator& comm, const char* phase) {
  const int chunks = comms.overlap_chunks;
  const int64_t rows = int64_t(y.extent(0)), width = int64_t(y.extent(1));
  if (chunks <= 1 || comm.size() == 1) {
    timed(comms.timers, "spmm", [&] { product(0, rows); });
    sum_over(comm, y.data(), size_of(y), phase, comms.dtype);
    return;
  }
  // Chunks are cut by row count, not by this rank's nonzeros: every rank of the reduction holds the same
  // rows and must post the same sequence of all-reduces.
  std::vector<Request> pending;
  std::vector<Bf16AllReduce> pending_bf16;
  pending_bf16.reserve(size_t(chunks));
  for (int c = 0; c < chunks; ++c) {
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    timed(comms.timers, "spmm", [&] { product(r0, r1); });
    Kokkos::fence();
    float* block = y.data() + r0 * width;
    if (comms.dtype == CommDtype::Bf16) {
      // Chunk c - 1's second stage starts here, at the same point of the sequence on every rank.
      pending_bf16.emplace_back(comm, block, (r1 - r0) * width, phase);
      if (c > 0) pending_bf16[size_t(c - 1)].start_gather();
    } else {
      pending.push_back(idevice_all_reduce(comm, block, (r1 - r0) * width, phase));
    }
    for (Request& r : pending) r.test();
    for (Bf16AllReduce& r : pending_bf16) r.test();
  }
  wait_all(pending);
  for (Bf16AllReduce& r : pending_bf16) r.wait();
}

// Rows [r0, r1) of y (T blocks stacked) = op_t x: each term's operator into its own block. x holds floats
// or bf16 bits (widened as the product reads them).
template <class In>
RowProduct stacked_product(const std::vector<const CsrSpmm<float>*>& ops, const Matrix<const In>& x,
                           const Matrix<float>& y, KernelPath kernels) {
  return [=](int64_t r0, int64_t r1) {
    const size_t terms = ops.size();
    const int64_t block = int64_t(y.extent(0) / terms);
    for (size_t t = 0; t < terms; ++t) {
      const int64_t lo = std::max(r0, int64_t(t) * block) - int64_t(t) * block;
      const int64_t hi = std::min(r1, int64_t(t + 1) * block) - int64_t(t) * block;
      if (hi <= lo) continue;
      if constexpr (std::is_same<In, float>::value)
        ops[t]->apply_rows(x, term_block(y, t, terms), lo, hi, 1.0f, 0.0f, kernels);
      else
        ops[t]->apply_rows_bf16(x, term_block(y, t, terms), lo, hi, 1.0f, 0.0f, kernels);
    }
  };
}

// Rows [r0, r1) of y = sum_t op_t x_t, x holding the T inputs stacked.
RowProduct summed_product(const std::vector<const CsrSpmm<float>*>& ops, const Matrix<const float>& x,
                          const Matrix<float>& y, KernelPath kernels) {
  return [=](int64_t r0, int64_t r1) {
    for (size_t t = 0; t < ops.size(); ++t)
      ops[t]->apply_rows(term_block(x, t, ops.size()), y, r0, r1, 1.0f, t == 0 ? 0.0f : 1.0f, kernels);
  };
}

std::vector<const CsrSpmm<float>*> forward_ops(const LayerOperators& ops) {
  std::vector<const CsrSpmm<float>*> out;
  for (const AdjacencyBlock* b : ops.terms()) out.push_back(&b->forward);
  return out;
}

std::vector<const CsrSpmm<float>*> transpose_ops(const LayerOperators& ops) {
  std::vector<const CsrSpmm<float>*> out;
  for (const AdjacencyBlock* b : ops.terms()) {
    require(b->has_transpose,
            "a layer's backward multiplies by its block's transpose, and the graph was loaded without "
            "(Graph3DOptions::transposes is for forward-only use)");
    out.push_back(&b->transpose);
  }
  return out;
}

void gemm_timed(const LayerComms& comms, Trans ta, Trans tb, const Matrix<const float>& a,
                const Matrix<const float>& b, float beta, const Matrix<float>& c) {
  timed(comms.timers, "gemm", [&] { gemm<float>(ta, tb, 1.0f, a, b, beta, c, comms.kernels); });
}

}  // namespace

void pmm_aggregate(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& h,
                   const Matrix<float>& agg, const char* phase) {
  product_then_sum(stacked_product(forward_ops(ops), h, agg, comms.kernels), agg, comms, *comms.a, phase);
}

void pmm_aggregate(const LayerOperators& ops, const LayerComms& comms, const Matrix<const uint16_t>& h,
                   const Matrix<float>& agg, const char* phase) {
  product_then_sum(stacked_product(forward_ops(ops), h, agg, comms.kernels), agg, comms, *comms.a, phase);
}

void pmm_forward(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& h,
                 const Matrix<const float>& w, const Matrix<float>& agg, const Matrix<float>& out,
                 bool agg_ready) {
  if (!agg_ready) pmm_aggregate(ops, comms, h, agg, phase::kForwardA);
  pmm_transform(ops, comms, w, agg, out);
}

void pmm_forward(const LayerOperators& ops, const LayerComms& comms, const Matrix<const uint16_t>& h,
                 const Matrix<const float>& w, const Matrix<float>& agg, const Matrix<float>& out,
                 bool agg_ready) {
  if (!agg_ready) pmm_aggregate(ops, comms, h, agg, phase::kForwardA);
  pmm_transform(ops, comms, w, agg, out);
}

void pmm_transform(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& w,
                   const Matrix<const float>& agg, const Matrix<float>& out) {
  const std::vector<const CsrSpmm<float>*> terms = forward_ops(ops);
  for (size_t t = 0; t < terms.size(); ++t)
    gemm_timed(comms, Trans::No, Trans::No, term_block(agg, t, terms.size()), term_block(w, t, terms.size()),
               t == 0 ? 0.0f : 1.0f, out);
  sum_over(*comms.b, out.data(), size_of(out), phase::kForwardB, comms.dtype);
}

void pmm_transform(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& w,
                   const Matrix<const uint16_t>& agg, const Matrix<float>& out) {
  require(gemm_reads_bf16_bits(comms.kernels),
          "pmm_transform: bf16 bits are read only where the GEMM rounds to bf16 itself");
  const std::vector<const CsrSpmm<float>*> terms = forward_ops(ops);
  for (size_t t = 0; t < terms.size(); ++t)
    timed(comms.timers, "gemm", [&] {
      gemm_bf16_operand(Trans::No, Trans::No, 1.0f, term_block(agg, t, terms.size()),
                        term_block(w, t, terms.size()), t == 0 ? 0.0f : 1.0f, out, Matrix<float>(),
                        comms.kernels);
    });
  sum_over(*comms.b, out.data(), size_of(out), phase::kForwardB, comms.dtype);
}

namespace {

// pmm_backward after the weight gradients' local products: their sum over c, then the input gradient.
void backward_after_weight_products(const LayerOperators& ops, const LayerComms& comms,
                                    const Matrix<const float>& w, const Matrix<const float>& g_out,
                                    const Matrix<float>& g_w, bool want_input_grad,
                                    const Matrix<float>& g_agg, const Matrix<float>& g_h) {
  const size_t terms = ops.terms().size();
  sum_over(*comms.c, g_w.data(), size_of(g_w), phase::kBackwardWeightsC);
  if (!want_input_grad) return;
  for (size_t t = 0; t < terms; ++t)
    gemm_timed(comms, Trans::No, Trans::Yes, g_out, term_block(w, t, terms), 0.0f,
               term_block(g_agg, t, terms));
  sum_over(*comms.a, g_agg.data(), size_of(g_agg), phase::kBackwardA, comms.dtype);
  product_then_sum(summed_product(transpose_ops(ops), g_agg, g_h, comms.kernels), g_h, comms, *comms.c,
                   phase::kBackwardInputsC);
}

}  // namespace

void pmm_backward(const LayerOperators& ops, const LayerComms& comms, const Matrix<const float>& agg,
                  const Matrix<const float>& w, const Matrix<const float>& g_out, const Matrix<float>& g_w,
                  bool want_input_grad, const Matrix<float>& g_agg, const Matrix<float>& g_h) {
  const size_t terms = ops.terms().size();
  for (size_t t = 0; t < terms; ++t)
    gemm_timed(comms, Trans::Yes, Trans::No, term_block(agg, t, terms), g_out, 0.0f,
               term_block(g_w, t, terms));
  backward_after_weight_products(ops, comms, w, g_out, g_w, want_input_grad, g_agg, g_h);
}

void pmm_backward(const LayerOperators& ops, const LayerComms& comms, const Matrix<const uint16_t>& agg,
                  const Matrix<float>& widened, const Matrix<const float>& w,
                  const Matrix<const float>& g_out, const Matrix<float>& g_w, bool want_input_grad,
                  const Matrix<float>& g_agg, const Matrix<float>& g_h) {
  const size_t terms = ops.terms().size();
  for (size_t t = 0; t < terms; ++t)
    timed(comms.timers, "gemm", [&] {
      gemm_bf16_operand(Trans::Yes, Trans::No, 1.0f, term_block(agg, t, terms), g_out, 0.0f,
                        term_block(g_w, t, terms), term_block(widened, t, terms), comms.kernels);
    });
  backward_after_weight_products(ops, comms, w, g_out, g_w, want_input_grad, g_agg, g_h);
}

void pmm_forward_transform_first(const LayerOperators& ops, const LayerComms& comms,
                                 const Matrix<const float>& h, const Matrix<const float>& w,
                                 const Matrix<float>& t, const Matrix<float>& y, const Matrix<float>& out) {
  const std::vector<const CsrSpmm<float>*> terms = forward_ops(ops);
  for (size_t k = 0; k < terms.size(); ++k)
    gemm_timed(comms, Trans::No, Trans::No, h, term_block(w, k, terms.size()), 0.0f,
               term_block(t, k, terms.size()));
  sum_over(*comms.b, t.data(), size_of(t), phase::kForwardB, comms.dtype);
  if (comms.a->size() == 1) {  // out is all of y
    timed(comms.timers, "spmm",
          [&] { summed_product(terms, t, out, comms.kernels)(0, int64_t(out.extent(0))); });
    return;
  }
  product_then_sum(summed_product(terms, t, y, comms.kernels), y, comms, *comms.a, phase::kForwardA);
  const int64_t width = int64_t(out.extent(1)), first = comms.a->rank() * width;
  Kokkos::deep_copy(out, Kokkos::subview(y, Kokkos::ALL(), std::make_pair(first, first + width)));
}

void pmm_backward_transform_first(const LayerOperators& ops, const LayerComms& comms,
                                  const Matrix<const float>& h, const Matrix<const float>& w,
                                  const Matrix<const float>& g_out, const Vector<float>& gathered,
                                  const Matrix<float>& g_y, const Matrix<float>& g_t,
                                  const Matrix<float>& g_w, bool want_input_grad, const Matrix<float>& g_h) {
  const int64_t rows = int64_t(g_out.extent(0)), width = int64_t(g_out.extent(1));
  const int ga = comms.a->size();
  if (ga > 1) {
    Kokkos::fence();
    device_all_gather(*comms.a, g_out.data(), rows * width, gathered.data(), phase::kBackwardGatherA);
    for (int k = 0; k < ga; ++k) {
      const Matrix<const float> block(gathered.data() + k * rows * width, size_t(rows), size_t(width));
      Kokkos::deep_copy(Kokkos::subview(g_y, Kokkos::ALL(), std::make_pair(k * width, (k + 1) * width)),
                        block);
    }
  }
  // With one rank along a, g_out already holds every column.
  const Matrix<const float> whole = ga > 1 ? Matrix<const float>(g_y) : g_out;
  product_then_sum(stacked_product(transpose_ops(ops), whole, g_t, comms.kernels), g_t, comms, *comms.c,
                   phase::kBackwardInputsC);
  const size_t terms = ops.terms().size();
  for (size_t t = 0; t < terms; ++t)
    gemm_timed(comms, Trans::Yes, Trans::No, h, term_block(Matrix<const float>(g_t), t, terms), 0.0f,
               term_block(g_w, t, terms));
  sum_over(*comms.a, g_w.data(), size_of(g_w), phase::kBackwardWeightsA);
  if (!want_input_grad) return;
  for (size_t t = 0; t < terms; ++t)
    gemm_timed(comms, Trans::No, Trans::Yes, term_block(Matrix<const float>(g_t), t, terms),
               term_block(w, t, terms), t == 0 ? 0.0f : 1.0f, g_h);
}

}  // namespace tessera
