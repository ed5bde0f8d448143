// SPDX-License-Identifier: BSD-3-Clause
// Builds without oneDNN (device builds, or libdnnl-dev absent): no bf16 GEMM. set_gemm_dtype refuses Bf16
// before a GEMM could get here.
#include "impl/gemm_kernels.hpp"
#include "tessera/core/error.hpp"

namespace tessera::impl {

void gemm_bf16(Trans, Trans, const GemmShape&, float, const Matrix<const float>&, const Matrix<const float>&,
               float, const Matrix<float>&) {
  fail("bf16 gemm: this build has no oneDNN");
}

bool bf16_gemm_runs() {
  return false;
}

}  // namespace tessera::impl
