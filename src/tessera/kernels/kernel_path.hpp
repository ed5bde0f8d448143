// SPDX-License-Identifier: BSD-3-Clause
// Which implementation a kernel runs: the algorithm switch of Kokkos Kernels. Each kernel is declared once
// and implemented per path in mirrored files (spmm_host.cpp / spmm_team.cpp, gemm_host.cpp / gemm_team.cpp,
// impl/rows_host.hpp / impl/rows_team.hpp for the element-wise kernels and reductions):
//   Host   - row loops over contiguous features, and BLAS: what host builds run;
//   Team   - Kokkos TeamPolicy kernels with vector lanes across features: what device builds run. It runs
//            on the host's OpenMP space too, which is how the tests check it on a machine without a GPU;
//   Vendor - cuSPARSE / cuBLAS on CUDA builds, rocSPARSE (SpMM) on HIP builds; element-wise kernels then
//            run the team path.
// Auto is Vendor where the build has it, else Team on device builds and Host on host builds.
#pragma once

#include <cstdint>

#include "tessera/core/enum_names.hpp"

namespace tessera {

/// A kernel implementation; an argument of every kernel (never an environment variable).
enum class KernelPath {
  Auto,   ///< the build's preferred path
  Host,   ///< row loops and BLAS
  Team,   ///< Kokkos TeamPolicy kernels (device builds)
  Vendor  ///< cuSPARSE / cuBLAS (CUDA builds)
};

/// The kinds of kernel whose available paths differ.
enum class KernelKind {
  Spmm,        ///< sparse times dense
  Gemm,        ///< dense times dense
  Elementwise  ///< element-wise kernels and row / column reductions
};

/// The names of KernelPath's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<KernelPath> kKernelPathNames[] = {
    {KernelPath::Auto, "auto"},
    {KernelPath::Host, "host"},
    {KernelPath::Team, "team"},
    {KernelPath::Vendor, "vendor"}};
/// auto or host or team or vendor: the name of a value.
inline const char* kernel_path_name(KernelPath path) { return name_of(kKernelPathNames, path); }

/// Whether `path` can run a kernel of `kind` in this build (Auto always can; Host GEMM needs host memory).
bool kernel_path_available(KernelPath path, KernelKind kind);

/// Lets cuBLAS run fp32 GEMMs on TF32 tensor cores (inputs rounded to 10-bit mantissas). Off by default,
/// so every path computes in fp32; process-wide, as cuBLAS's math mode is per handle.
void set_vendor_tf32(bool allowed);
/// Whether set_vendor_tf32(true) was called.
bool vendor_tf32_allowed();

/// The arithmetic of float GEMMs on the host path: fp32 (the default), or bf16 inputs with fp32 sums.
enum class GemmDtype {
  F32,  ///< BLAS in fp32
  Bf16  ///< oneDNN: both operands rounded to bf16 (nearest even), products summed in fp32 (AMX / AVX-512
        ///< BF16)
};
/// Bytes a GEMM operand takes as the GEMM reads it (ProblemSize::gemm_operand_bytes).
inline int64_t operand_bytes(GemmDtype dtype) { return dtype == GemmDtype::Bf16 ? 2 : 4; }

/// The names of GemmDtype's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<GemmDtype> kGemmDtypeNames[] = {
    {GemmDtype::F32, "f32"},
    {GemmDtype::F32, "fp32", true},
    {GemmDtype::Bf16, "bf16"}};
/// f32 or bf16: the name of a value.
inline const char* gemm_dtype_name(GemmDtype dtype) { return name_of(kGemmDtypeNames, dtype); }
/// Whether this build has the bf16 host GEMM (oneDNN) and it runs on this CPU.
bool bf16_gemm_available();
/// Sets how host-path float GEMMs compute, process-wide like set_vendor_tf32; double GEMMs and the team
/// and vendor paths are unchanged. Throws Error for Bf16 where bf16_gemm_available() is false.
void set_gemm_dtype(GemmDtype dtype);
/// What set_gemm_dtype set (F32 unless called).
GemmDtype gemm_dtype();
/// Throws Error unless GEMMs on `path` can compute in `dtype`: Bf16 needs the host GEMM path and
/// bf16_gemm_available().
void check_gemm_dtype(GemmDtype dtype, KernelPath path);

/// The library behind the host path's fp32 GEMMs (double GEMMs always use BLAS).
enum class HostGemmLibrary {
  Auto,   ///< oneDNN where the build has it, else BLAS
  Blas,   ///< CBLAS (OpenBLAS's OpenMP build on Debian)
  OneDnn  ///< oneDNN's sgemm: faster than OpenBLAS on a GNN layer's narrow shapes (docs/BENCHMARKS.md)
};

/// The names of HostGemmLibrary's values (core/enum_names.hpp): what the command line, the bindings and messages use.
inline constexpr EnumName<HostGemmLibrary> kHostGemmLibraryNames[] = {
    {HostGemmLibrary::Auto, "auto"},
    {HostGemmLibrary::Blas, "blas"},
    {HostGemmLibrary::OneDnn, "onednn"}};
/// auto or blas or onednn: the name of a value.
inline const char* host_gemm_library_name(HostGemmLibrary library) { return name_of(kHostGemmLibraryNames, library); }
/// Whether this build has oneDNN's sgemm (host builds that found libdnnl).
bool onednn_gemm_available();
/// Throws Error for OneDnn where onednn_gemm_available() is false (like check_gemm_dtype, before a run).
void check_host_gemm_library(HostGemmLibrary library);
/// Sets the library of host-path fp32 GEMMs, process-wide like set_gemm_dtype (Auto: the build's
/// preference). Throws as check_host_gemm_library does.
void set_host_gemm_library(HostGemmLibrary library);
/// The library host-path fp32 GEMMs use now (never Auto).
HostGemmLibrary host_gemm_library();
/// Resident memory that library adds to a process once it has run a GEMM (its code, generated kernels and
/// buffers), beyond what MachineProfile::process_bytes counts: 4 MiB for oneDNN 2.6 (a 1000-node graph's
/// run peaked at 35.0 MiB with OpenBLAS and 38.7 MiB with oneDNN here), 0 for BLAS and device builds.
double host_gemm_resident_bytes();
/// Bytes the host path keeps once it has run C = A^T B in `dtype` with C m x n and k rows reduced (a
/// weight gradient): oneDNN builds cut a long fp32 reduction into chunks whose partial products they keep
/// (at most 8 MiB); 0 where it is left to the library. The largest over a run's shapes stays resident.
double host_gemm_scratch_bytes(GemmDtype dtype, int64_t m, int64_t n, int64_t k);
/// Bytes the host path keeps under GemmDtype::Bf16 for its bf16 copies of the operands (one of A and one
/// of B, each grown to the largest it has held; gemm_onednn.cpp): 2 an entry of the largest A and the
/// largest B a run multiplies; 0 with fp32 GEMMs and in device builds.
double host_gemm_bf16_copy_bytes(GemmDtype dtype, int64_t largest_a, int64_t largest_b);

/// Auto becomes the path this build prefers for `kind` (Vendor becomes Team for element-wise kernels); an
/// explicit path is returned unchanged when it is available and throws Error naming it otherwise.
KernelPath resolve_kernel_path(KernelPath path, KernelKind kind);

}  // namespace tessera
