// SPDX-License-Identifier: BSD-3-Clause
// Builds without oneDNN (device builds, or libdnnl-dev absent): no bf16 GEMM, and fp32 host GEMMs through
// BLAS only. set_gemm_dtype and set_host_gemm_library refuse before a GEMM could get here.
#include "impl/gemm_kernels.hpp"
#include "tessera/core/error.hpp"

namespace tessera::impl {

void gemm_bf16(Trans, Trans, const GemmShape&, float, const Matrix<const float>&, const Matrix<const float>&,
               float, const Matrix<float>&) {
  fail("bf16 gemm: this build has no oneDNN");
}

void gemm_bf16_bits(Trans, Trans, const GemmShape&, float, const Matrix<const uint16_t>&,
                    const Matrix<const float>&, float, const Matrix<float>&) {
  fail("bf16 gemm: this build has no oneDNN");
}

void gemm_onednn_f32(Trans, Trans, const GemmShape&, float, const float*, int64_t, const float*, int64_t,
                     float, float*, int64_t) {
  fail("gemm: this build has no oneDNN");
}

int64_t onednn_reduction_scratch_bytes(const GemmShape&) {
  return 0;
}

bool onednn_built() {
  return false;
}

bool bf16_gemm_runs() {
  return false;
}

}  // namespace tessera::impl
