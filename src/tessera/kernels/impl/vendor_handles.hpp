// SPDX-License-Identifier: BSD-3-Clause
// Not installed: this process's vendor library handles (vendor builds only), bound to the Kokkos
// execution space's stream on every use, so vendor calls order with Kokkos kernels without a fence.
#pragma once

#if defined(TESSERA_VENDOR_CUDA)
#include <cublas_v2.h>
#include <cusparse.h>
#elif defined(TESSERA_VENDOR_HIP)
#include <rocsparse/rocsparse.h>
#endif

namespace tessera::impl {

#if defined(TESSERA_VENDOR_CUDA)
/// The cuSPARSE handle, on the default execution space's stream (created on first use).
cusparseHandle_t cusparse();
/// The cuBLAS handle, on the same stream, its math mode following vendor_tf32_allowed().
cublasHandle_t cublas();
/// Throws Error naming `call` unless `status` is success.
void check_cusparse(cusparseStatus_t status, const char* call);
/// Throws Error naming `call` unless `status` is success.
void check_cublas(cublasStatus_t status, const char* call);
#elif defined(TESSERA_VENDOR_HIP)
/// The rocSPARSE handle, on the default execution space's stream (created on first use).
rocsparse_handle rocsparse();
/// Throws Error naming `call` unless `status` is success.
void check_rocsparse(rocsparse_status status, const char* call);
#endif

}  // namespace tessera::impl
