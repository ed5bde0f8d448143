// SPDX-License-Identifier: BSD-3-Clause
// One handle per library per process: creating a cuSPARSE or cuBLAS handle costs milliseconds and device
// memory, and every kernel of a rank runs on the one Kokkos stream anyway.
#include "impl/vendor_handles.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/views.hpp"
#include "tessera/kernels/kernel_path.hpp"

namespace tessera::impl {

namespace {
// A handle made on first use and destroyed by a Kokkos finalize hook: after Kokkos::finalize the device
// context may be gone, and a static destructor would run after that.
template <class Handle, class Create, class Destroy>
Handle& lazy_handle(Handle& slot, bool& made, Create create, Destroy destroy) {
  if (!made) {
    create(&slot);
    made = true;
    Kokkos::push_finalize_hook([&slot, &made, destroy] {
      destroy(slot);
      made = false;
    });
  }
  return slot;
}
}  // namespace

#if defined(TESSERA_VENDOR_CUDA)
void check_cusparse(cusparseStatus_t status, const char* call) {
  require(status == CUSPARSE_STATUS_SUCCESS, call, " failed: ", cusparseGetErrorString(status));
}

void check_cublas(cublasStatus_t status, const char* call) {
  require(status == CUBLAS_STATUS_SUCCESS, call, " failed: ", cublasGetStatusString(status));
}

cusparseHandle_t cusparse() {
  static cusparseHandle_t handle;
  static bool made = false;
  lazy_handle(
      handle, made, [](cusparseHandle_t* h) { check_cusparse(cusparseCreate(h), "cusparseCreate"); },
      [](cusparseHandle_t h) { cusparseDestroy(h); });
  check_cusparse(cusparseSetStream(handle, ExecSpace().cuda_stream()), "cusparseSetStream");
  return handle;
}

cublasHandle_t cublas() {
  static cublasHandle_t handle;
  static bool made = false;
  lazy_handle(
      handle, made, [](cublasHandle_t* h) { check_cublas(cublasCreate(h), "cublasCreate"); },
      [](cublasHandle_t h) { cublasDestroy(h); });
  check_cublas(cublasSetStream(handle, ExecSpace().cuda_stream()), "cublasSetStream");
  // Default math keeps fp32 products in fp32; TF32 tensor cores round inputs to 10-bit mantissas.
  check_cublas(
      cublasSetMathMode(handle, vendor_tf32_allowed() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
      "cublasSetMathMode");
  return handle;
}
#elif defined(TESSERA_VENDOR_HIP)
void check_rocsparse(rocsparse_status status, const char* call) {
  require(status == rocsparse_status_success, call, " failed with rocsparse_status ", int(status));
}

rocsparse_handle rocsparse() {
  static rocsparse_handle handle;
  static bool made = false;
  lazy_handle(
      handle, made,
      [](rocsparse_handle* h) { check_rocsparse(rocsparse_create_handle(h), "rocsparse_create_handle"); },
      [](rocsparse_handle h) { rocsparse_destroy_handle(h); });
  check_rocsparse(rocsparse_set_stream(handle, ExecSpace().hip_stream()), "rocsparse_set_stream");
  return handle;
}
#endif

}  // namespace tessera::impl
