// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/kernel_path.hpp"

#include <type_traits>

#include "impl/gemm_kernels.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/views.hpp"

namespace tessera {

namespace {
constexpr bool kHostMemory = std::is_same<DeviceSpace, Kokkos::HostSpace>::value;
// Vendor libraries are compiled in on device builds that found them (cmake/TesseraDependencies.cmake):
// cuSPARSE and cuBLAS on CUDA, rocSPARSE (SpMM only) on HIP.
#ifdef TESSERA_VENDOR_SPMM
constexpr bool kVendorSpmm = true;
#else
constexpr bool kVendorSpmm = false;
#endif
#ifdef TESSERA_VENDOR_GEMM
constexpr bool kVendorGemm = true;
#else
constexpr bool kVendorGemm = false;
#endif
constexpr bool kVendor = kVendorSpmm || kVendorGemm;
bool tf32_allowed = false;
GemmDtype host_gemm_dtype = GemmDtype::F32;
HostGemmLibrary chosen_host_gemm = HostGemmLibrary::Auto;

void require_bf16_gemm() {
  require(
      impl::bf16_gemm_runs(),
      "`gemm-dtype` bf16 needs oneDNN (libdnnl-dev; scripts/setup.sh installs it) and a CPU with AVX-512; "
      "this build or CPU has neither");
}

const char* kind_name(KernelKind kind) {
  return kind == KernelKind::Spmm ? "SpMM" : kind == KernelKind::Gemm ? "GEMM" : "element-wise";
}
}  // namespace


bool kernel_path_available(KernelPath path, KernelKind kind) {
  switch (path) {
    case KernelPath::Auto:
    case KernelPath::Team:
      return true;
    case KernelPath::Host:  // row loops run in any space; BLAS needs host memory
      return kind != KernelKind::Gemm || kHostMemory;
    case KernelPath::Vendor:  // element-wise kernels have no vendor version: they run the team path
      return kind == KernelKind::Spmm ? kVendorSpmm : kind == KernelKind::Gemm ? kVendorGemm : kVendor;
  }
  return false;
}

KernelPath resolve_kernel_path(KernelPath path, KernelKind kind) {
  if (path == KernelPath::Vendor && kind == KernelKind::Elementwise && kVendor) return KernelPath::Team;
  if (path == KernelPath::Auto) {
    if (kHostMemory) return KernelPath::Host;
    // Element-wise kernels have no vendor version: on a device they take the team path. (Resolving them
    // to "vendor" sent them down the row-per-thread host loop on the first H100 run: 38 ms column sums.)
    if (kind == KernelKind::Elementwise) return KernelPath::Team;
    return kernel_path_available(KernelPath::Vendor, kind) ? KernelPath::Vendor : KernelPath::Team;
  }
  require(kernel_path_available(path, kind), "kernel path '", kernel_path_name(path), "' has no ",
          kind_name(kind), " kernel in this build",
          path == KernelPath::Vendor ? " (vendor kernels need a CUDA build; HIP builds have SpMM only)"
                                     : " (BLAS needs host memory)");
  return path;
}

void set_vendor_tf32(bool allowed) {
  tf32_allowed = allowed;
}

bool vendor_tf32_allowed() {
  return tf32_allowed;
}


bool bf16_gemm_available() {
  return impl::bf16_gemm_runs();
}

void set_gemm_dtype(GemmDtype dtype) {
  if (dtype == GemmDtype::Bf16) require_bf16_gemm();
  host_gemm_dtype = dtype;
}

void check_gemm_dtype(GemmDtype dtype, KernelPath path) {
  if (dtype == GemmDtype::F32) return;
  const KernelPath gemm_path = resolve_kernel_path(path, KernelKind::Gemm);
  require(gemm_path == KernelPath::Host, "`gemm-dtype` bf16 is for the host GEMM path (oneDNN); `kernels` ",
          kernel_path_name(path), " runs GEMMs on the ", kernel_path_name(gemm_path), " path");
  require_bf16_gemm();
}

GemmDtype gemm_dtype() {
  return host_gemm_dtype;
}


bool onednn_gemm_available() {
  return impl::onednn_built();
}

void check_host_gemm_library(HostGemmLibrary library) {
  require(library != HostGemmLibrary::OneDnn || onednn_gemm_available(),
          "`host-gemm` onednn needs oneDNN (libdnnl-dev; scripts/setup.sh installs it); this build has none");
}

void set_host_gemm_library(HostGemmLibrary library) {
  check_host_gemm_library(library);
  chosen_host_gemm = library;
}

double host_gemm_resident_bytes() {
  return kHostMemory && host_gemm_library() == HostGemmLibrary::OneDnn ? 4.0 * (1 << 20) : 0.0;
}

double host_gemm_scratch_bytes(GemmDtype dtype, int64_t m, int64_t n, int64_t k) {
  const bool split = kHostMemory && host_gemm_library() == HostGemmLibrary::OneDnn && dtype == GemmDtype::F32;
  return split ? double(impl::onednn_reduction_scratch_bytes({m, n, k})) : 0.0;
}

double host_gemm_bf16_copy_bytes(GemmDtype dtype, int64_t largest_a, int64_t largest_b) {
  return kHostMemory && dtype == GemmDtype::Bf16 ? 2.0 * double(largest_a + largest_b) : 0.0;
}

HostGemmLibrary host_gemm_library() {
  if (chosen_host_gemm != HostGemmLibrary::Auto) return chosen_host_gemm;
  return onednn_gemm_available() ? HostGemmLibrary::OneDnn : HostGemmLibrary::Blas;
}

}  // namespace tessera
