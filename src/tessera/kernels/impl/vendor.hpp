// SPDX-License-Identifier: BSD-3-Clause
// Not installed: the vendor path (cuSPARSE / cuBLAS on CUDA builds, rocSPARSE on HIP builds). Compiled only
// when the build defines TESSERA_VENDOR_SPMM / TESSERA_VENDOR_GEMM (cmake/TesseraDependencies.cmake).
// Handles live once per process, on the Kokkos execution space's stream, and are destroyed by a
// Kokkos finalize hook (before the device context goes away).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>

#include "gemm_kernels.hpp"
#include "spmm_kernels.hpp"

namespace tessera::impl {

// Device builds keep 64-bit column ids in CsrSpmm (spmm.hpp), which the descriptors below are made for.
static_assert(std::is_same<SpmmColumn, int64_t>::value, "vendor descriptors take 64-bit column ids");

/// Rows [row_begin, row_end) of a CSR matrix as a vendor library's CSR descriptor wants them: offsets
/// rebased to start at zero (a device array of its own) and the column and value pointers advanced to the
/// range's first nonzero. `ones` stands in for the values of a pattern matrix.
template <class Scalar>
struct CsrRowRange {
  Vector<int64_t> offsets;
  int64_t nnz = 0;
  const int64_t* col_idx = nullptr;
  const Scalar* values = nullptr;
};
template <class Scalar>
CsrRowRange<Scalar> csr_row_range(const CsrMatrix<Scalar, DeviceSpace>& a, const Vector<Scalar>& ones,
                                  int64_t row_begin, int64_t row_end);
/// The values a vendor library multiplies by for a pattern matrix (all ones); empty for a valued one.
template <class Scalar>
Vector<Scalar> pattern_values(const CsrMatrix<Scalar, DeviceSpace>& a);

/// A CSR matrix's vendor descriptors: made once per matrix, and once per row range a caller asks for
/// (the overlap schedule's chunks, a fixed set), each with a rebased row-offset array. The work buffer
/// grows to the largest a product has asked for and is reused.
template <class Scalar>
class VendorSpmm {
 public:
  explicit VendorSpmm(const CsrMatrix<Scalar, DeviceSpace>& a);
  ~VendorSpmm();
  VendorSpmm(const VendorSpmm&) = delete;
  VendorSpmm& operator=(const VendorSpmm&) = delete;

  /// Rows [row_begin, row_end) of y = alpha A x + beta y.
  void apply(const SpmmCall<Scalar>& call, const Matrix<const Scalar>& x, const Matrix<Scalar>& y);

 private:
  struct Rows;  // the descriptor of one row range
  Rows& rows(int64_t row_begin, int64_t row_end);
  CsrMatrix<Scalar, DeviceSpace> a_;
  Vector<Scalar> ones_;  // the values of a pattern matrix
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Rows>> ranges_;
  Vector<char> buffer_;
};

template <class Scalar>
void gemm_vendor(Trans ta, Trans tb, const GemmShape& s, Scalar alpha, const Matrix<const Scalar>& a,
                 const Matrix<const Scalar>& b, Scalar beta, const Matrix<Scalar>& c);

}  // namespace tessera::impl
