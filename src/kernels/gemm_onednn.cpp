// SPDX-License-Identifier: BSD-3-Clause
// GEMM, host path through oneDNN. In fp32 (HostGemmLibrary::OneDnn, the default where the build has oneDNN):
// oneDNN's sgemm, row-major like CBLAS; on the 2-core AMD EPYC (Zen 3, AVX2) development machine it ran the
// narrow shapes of a GNN layer (169343 x 40 x 256, 169343 x 256 x 40, 256 x 40 x 169343) 1.4-2.5x faster
// than OpenBLAS 0.3.21, 169343 x 256 x 128 about 1.4x faster and the long-reduction weight gradients within
// 5% (OpenBLAS slightly ahead there; scripts/bench_fullgraph.sh's shapes, the README's Benchmarks). Under
// GemmDtype::Bf16: both operands rounded to bf16 (nearest even, in their fp32 layout), then oneDNN's matmul
// with fp32 accumulation and an fp32 result. On CPUs with AMX it runs on the tile unit (about 3.5x BLAS's
// fp32 rate on the Intel machine this was measured on); oneDNN picks the kernel. Its fpmath_mode::bf16 on
// fp32 operands would save the rounding pass, but oneDNN 2.6 (Debian) then runs the AVX-512 kernel, not AMX
// (measured: 324 against 921 GFLOP/s on 169343x256x256), so the operands are rounded first.
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>

#include "impl/gemm_kernels.hpp"
#include "tessera/core/error.hpp"

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

void gemm_bf16(Trans ta, Trans tb, const GemmShape& s, float alpha, const Matrix<const float>& a,
               const Matrix<const float>& b, float beta, const Matrix<float>& c) {
  Bf16Context& ctx = context();
  const int64_t lda = leading_dimension(a), ldb = leading_dimension(b), ldc = leading_dimension(c);
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
  try {
    round_to_bf16(ctx, a.data(), int64_t(a.extent(0)), int64_t(a.extent(1)), lda, ctx.a);
    round_to_bf16(ctx, b.data(), int64_t(b.extent(0)), int64_t(b.extent(1)), ldb, ctx.b);
    // oneDNN caches primitives by their descriptors: a training step's repeated shapes are built once.
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, ctx.engine);
    memory am(ad, ctx.engine, ctx.a.data.get()), bm(bd, ctx.engine, ctx.b.data.get()),
        cm(cd, ctx.engine, c.data());
    dnnl::matmul(pd).execute(ctx.stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    ctx.stream.wait();
  } catch (const dnnl::error& e) {
    fail("bf16 gemm ", s.m, "x", s.n, "x", s.k, ": oneDNN: ", e.what());
  }
}

void gemm_onednn_f32(Trans ta, Trans tb, const GemmShape& s, float alpha, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t status = dnnl_sgemm(ta == Trans::No ? 'N' : 'T', tb == Trans::No ? 'N' : 'T', s.m, s.n,
                                          s.k, alpha, a, lda, b, ldb, beta, c, ldc);
  require(status == dnnl_success, "gemm ", s.m, "x", s.n, "x", s.k, ": oneDNN's sgemm failed (status ",
          int(status), ")");
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
