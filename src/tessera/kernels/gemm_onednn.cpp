// SPDX-License-Identifier: BSD-3-Clause
// GEMM, host path through oneDNN. In fp32 (HostGemmLibrary::OneDnn, the default where the build has oneDNN):
// oneDNN's sgemm, row-major like CBLAS; on the 2-core AMD EPYC (Zen 3, AVX2) development machine it ran the
// narrow shapes of a GNN layer (169343 x 40 x 256, 169343 x 256 x 40, 256 x 40 x 169343) 1.4-2.5x faster
// than OpenBLAS 0.3.21, 169343 x 256 x 128 about 1.4x faster and the long-reduction weight gradients within
// 5% (OpenBLAS slightly ahead there; scripts/bench_fullgraph.sh's shapes, docs/BENCHMARKS.md). Under
// GemmDtype::Bf16: both operands rounded to bf16 (nearest even, in their fp32 layout), then oneDNN's matmul
// with fp32 accumulation and an fp32 result. On CPUs with AMX it runs on the tile unit (about 3.5x BLAS's
// fp32 rate on the Intel machine this was measured on); oneDNN picks the kernel. Its fpmath_mode::bf16 on
// fp32 operands would save the rounding pass, but oneDNN 2.6 (Debian) then runs the AVX-512 kernel, not AMX
// (measured: 324 against 921 GFLOP/s on 169343x256x256), so the operands are rounded first.
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <exception>
#include <memory>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "impl/gemm_kernels.hpp"
#include "tessera/core/error.hpp"

// Tessera splits tall products over the threads itself where oneDNN runs on OpenMP (gemm_onednn_f32).
#if defined(_OPENMP) && DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#define TESSERA_GEMM_THREAD_SPLIT 1
#endif

namespace tessera::impl {

namespace {

using dnnl::memory;

// A bf16 copy of an operand, kept between calls so a training step does not fault fresh pages in every
// GEMM. Plain heap memory, not a Kokkos View: the thread's copy outlives Kokkos::finalize.
struct Bf16Buffer {
  std::unique_ptr<uint16_t[]> data;
  int64_t size = 0;
};

// oneDNN's engine and stream for this thread's GEMMs, and the operands' copies.
struct Bf16Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  Bf16Buffer a, b;
};

Bf16Context& context() {
  thread_local Bf16Context c;
  return c;
}

// `rows` x `cols` row-major floats (leading dimension ld) rounded into `out` (grown when too small) by
// oneDNN's reorder: 12.8 ms for 169343 x 256 here, as fast as copying the bytes, where a plain loop took 33
// ms (and, written with to_bf16's NaN branch, 44% of a bf16 training step).
void round_to_bf16(Bf16Context& ctx, const float* x, int64_t rows, int64_t cols, int64_t ld,
                   Bf16Buffer& out) {
  if (out.size < rows * ld) {
    out.data.reset();  // the old copy goes before the larger one is allocated
    out.data.reset(new uint16_t[size_t(rows * ld)]);
    out.size = rows * ld;
  }
  const memory::desc from({rows, cols}, memory::data_type::f32, memory::dims{ld, 1});
  const memory::desc to({rows, cols}, memory::data_type::bf16, memory::dims{ld, 1});
  memory source(from, ctx.engine, const_cast<float*>(x)), target(to, ctx.engine, out.data.get());
  dnnl::reorder(source, target).execute(ctx.stream, source, target);  // in stream order before the matmul
}

// op(X) as a rows x cols matrix over X stored row-major with leading dimension ld.
memory::desc operand(Trans t, int64_t rows, int64_t cols, int64_t ld, memory::data_type type) {
  return t == Trans::No ? memory::desc({rows, cols}, type, memory::dims{ld, 1})
                        : memory::desc({rows, cols}, type, memory::dims{1, ld});
}

}  // namespace

namespace {

// C = alpha op(A) op(B) + beta C on bf16 operands (leading dimensions lda, ldb), fp32 sums and result.
void matmul_bf16(Bf16Context& ctx, Trans ta, Trans tb, const GemmShape& s, float alpha, const uint16_t* a,
                 int64_t lda, const uint16_t* b, int64_t ldb, float beta, const Matrix<float>& c) {
  const int64_t ldc = leading_dimension(c);
  const auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
  const memory::desc ad = operand(ta, s.m, s.k, lda, bf16), bd = operand(tb, s.k, s.n, ldb, bf16);
  const memory::desc cd({s.m, s.n}, f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attr.set_post_ops(sum);
  }
  // oneDNN caches primitives by their descriptors: a training step's repeated shapes are built once.
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, ctx.engine);
  memory am(ad, ctx.engine, const_cast<uint16_t*>(a)), bm(bd, ctx.engine, const_cast<uint16_t*>(b)),
      cm(cd, ctx.engine, c.data());
  dnnl::matmul(pd).execute(ctx.stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  ctx.stream.wait();
}

}  // namespace

void gemm_bf16(Trans ta, Trans tb, const GemmShape& s, float alpha, const Matrix<const float>& a,
               const Matrix<const float>& b, float beta, const Matrix<float>& c) {
  Bf16Context& ctx = context();
  const int64_t lda = leading_dimension(a), ldb = leading_dimension(b);
  try {
    round_to_bf16(ctx, a.data(), int64_t(a.extent(0)), int64_t(a.extent(1)), lda, ctx.a);
    round_to_bf16(ctx, b.data(), int64_t(b.extent(0)), int64_t(b.extent(1)), ldb, ctx.b);
    matmul_bf16(ctx, ta, tb, s, alpha, ctx.a.data.get(), lda, ctx.b.data.get(), ldb, beta, c);
  } catch (const dnnl::error& e) {
    fail("bf16 gemm ", s.m, "x", s.n, "x", s.k, ": oneDNN: ", e.what());
  }
}

void gemm_bf16_bits(Trans ta, Trans tb, const GemmShape& s, float alpha, const Matrix<const uint16_t>& a,
                    const Matrix<const float>& b, float beta, const Matrix<float>& c) {
  Bf16Context& ctx = context();
  const int64_t ldb = leading_dimension(b);
  try {
    round_to_bf16(ctx, b.data(), int64_t(b.extent(0)), int64_t(b.extent(1)), ldb, ctx.b);
    matmul_bf16(ctx, ta, tb, s, alpha, a.data(), leading_dimension(a), ctx.b.data.get(), ldb, beta, c);
  } catch (const dnnl::error& e) {
    fail("bf16 gemm ", s.m, "x", s.n, "x", s.k, ": oneDNN: ", e.what());
  }
}

namespace {

void sgemm(Trans ta, Trans tb, const GemmShape& s, float alpha, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t status = dnnl_sgemm(ta == Trans::No ? 'N' : 'T', tb == Trans::No ? 'N' : 'T', s.m, s.n,
                                          s.k, alpha, a, lda, b, ldb, beta, c, ldc);
  require(status == dnnl_success, "gemm ", s.m, "x", s.n, "x", s.k, ": oneDNN's sgemm failed (status ",
          int(status), ")");
}

#if defined(TESSERA_GEMM_THREAD_SPLIT)
// Tall products (a layer's hundreds of thousands of node rows) are split over the threads here rather than
// inside oneDNN: C's rows in chunks, or a long reduction (a weight gradient A^T B) in chunks of it, each
// chunk one sgemm, which oneDNN runs single-threaded inside a parallel region. The chunks are taken
// dynamically, so a core slowed by a neighbour does not hold the other at each of the library's internal
// barriers. Each row of C is one chunk's, and a reduction's chunks write partial products summed in chunk
// order: the bits depend on neither the thread count nor the schedule. On the 2-core Zen 3 (two threads),
// four alternated runs of the arxiv-shaped GCN step of docs/BENCHMARKS.md (169343 rows): its GEMMs 0.72-0.74 s against
// 0.74-0.84 s with oneDNN's own threading, shorter in every run.
constexpr int64_t kRowChunk = 2048, kReductionChunk = 8192;
constexpr int64_t kPartialFloats = int64_t(2) << 20;  // at most 8 MiB of partial products, kept

bool split_over_threads() {
  return omp_get_max_threads() > 1 && !omp_in_parallel();
}

// chunk(q) for q in [0, chunks), taken dynamically by the threads; an exception in any chunk is rethrown
// here, after the parallel region (it must not leave it).
template <class Chunk>
void for_each_chunk(int64_t chunks, const Chunk& chunk) {
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic)
  for (int64_t q = 0; q < chunks; ++q) {
    try {
      chunk(q);
    } catch (...) {
#pragma omp critical(tessera_gemm_error)
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

void rows_in_chunks(Trans tb, const GemmShape& s, float alpha, const float* a, int64_t lda, const float* b,
                    int64_t ldb, float beta, float* c, int64_t ldc) {
  for_each_chunk((s.m + kRowChunk - 1) / kRowChunk, [&](int64_t q) {
    const int64_t row = q * kRowChunk, rows = std::min(kRowChunk, s.m - row);
    sgemm(Trans::No, tb, {rows, s.n, s.k}, alpha, a + row * lda, lda, b, ldb, beta, c + row * ldc, ldc);
  });
}

// How many chunks a long reduction of this shape is cut into; 0: leave it to the library.
int64_t reduction_chunks(const GemmShape& s) {
  if (s.m * s.n == 0) return 0;
  const int64_t chunks =
      std::min((s.k + kReductionChunk - 1) / kReductionChunk, kPartialFloats / (s.m * s.n));
  return chunks >= 2 * omp_get_max_threads() ? chunks : 0;
}

std::vector<float>& partial_products() {
  thread_local std::vector<float> partials;  // kept: a step would otherwise fault them in every GEMM
  return partials;
}

// C = alpha A^T B + beta C with A k x m, B k x n: each chunk of k rows of A and B gives a partial product.
void reduction_in_chunks(int64_t chunks, const GemmShape& s, float alpha, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t block = s.m * s.n, length = (s.k + chunks - 1) / chunks;
  std::vector<float>& partials = partial_products();
  if (int64_t(partials.size()) < chunks * block) partials.resize(size_t(chunks * block));
  float* p = partials.data();
  for_each_chunk(chunks, [&](int64_t q) {
    const int64_t first = std::min(q * length, s.k), count = std::min(length, s.k - first);
    sgemm(Trans::Yes, Trans::No, {s.m, s.n, count}, alpha, a + first * lda, lda, b + first * ldb, ldb, 0.0f,
          p + q * block, s.n);
  });
#pragma omp parallel for
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      float sum = 0.0f;
      for (int64_t q = 0; q < chunks; ++q) sum += p[q * block + i * s.n + j];
      c[i * ldc + j] = beta == 0.0f ? sum : sum + beta * c[i * ldc + j];  // beta 0: C is not read
    }
}
#endif

}  // namespace

int64_t onednn_reduction_scratch_bytes(const GemmShape& s) {
#if defined(TESSERA_GEMM_THREAD_SPLIT)
  if (omp_get_max_threads() > 1) return reduction_chunks(s) * s.m * s.n * int64_t(sizeof(float));
#endif
  (void)s;
  return 0;
}

void gemm_onednn_f32(Trans ta, Trans tb, const GemmShape& s, float alpha, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if defined(TESSERA_GEMM_THREAD_SPLIT)
  if (split_over_threads()) {
    if (ta == Trans::No && s.m >= 2 * kRowChunk)
      return rows_in_chunks(tb, s, alpha, a, lda, b, ldb, beta, c, ldc);
    if (ta == Trans::Yes && tb == Trans::No)
      if (const int64_t chunks = reduction_chunks(s))
        return reduction_in_chunks(chunks, s, alpha, a, lda, b, ldb, beta, c, ldc);
  }
#endif
  sgemm(ta, tb, s, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool onednn_built() {
  return true;
}

bool bf16_gemm_runs() {
  // Asked once: whether oneDNN has a bf16 matmul for this CPU (it needs AVX-512 at least).
  static const bool runs = [] {
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const memory::desc x({4, 4}, memory::data_type::bf16, memory::dims{4, 1});
      const memory::desc y({4, 4}, memory::data_type::f32, memory::dims{4, 1});
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(x, x, y), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return runs;
}

}  // namespace tessera::impl
