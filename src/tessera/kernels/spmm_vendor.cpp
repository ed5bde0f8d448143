// SPDX-License-Identifier: BSD-3-Clause
// SpMM, vendor path on CUDA builds: cuSPARSE's generic API (cusparseSpMM, CSR with 64-bit indices,
// row-major dense operands). Descriptors are made once per matrix and row range and reused; dense
// descriptors are host-side structs, made per call. Compiled only with TESSERA_VENDOR_CUDA.
#include <cusparse.h>

#include "impl/vendor.hpp"
#include "impl/vendor_handles.hpp"
#include "tessera/core/error.hpp"

namespace tessera::impl {

namespace {
template <class Scalar>
constexpr cudaDataType cuda_type() {
  return std::is_same<Scalar, float>::value ? CUDA_R_32F : CUDA_R_64F;
}

// The row length of a row-major operand (at least one, as cuSPARSE asks).
template <class View>
int64_t leading_dimension(const View& m) {
  return std::max<int64_t>(1, int64_t(m.stride(0)));
}
}  // namespace

// cuSPARSE wants offsets that start at zero, so a row range has its own offset array (rebased on the
// device) and column / value pointers advanced to the range's first nonzero.
template <class Scalar>
struct VendorSpmm<Scalar>::Rows {
  CsrRowRange<Scalar> range;
  cusparseConstSpMatDescr_t descr = nullptr;
  ~Rows() {
    if (descr) cusparseDestroySpMat(descr);
  }
};

template <class Scalar>
VendorSpmm<Scalar>::VendorSpmm(const CsrMatrix<Scalar, DeviceSpace>& a) : a_(a), ones_(pattern_values(a)) {}

template <class Scalar>
VendorSpmm<Scalar>::~VendorSpmm() = default;

template <class Scalar>
typename VendorSpmm<Scalar>::Rows& VendorSpmm<Scalar>::rows(int64_t row_begin, int64_t row_end) {
  auto& slot = ranges_[{row_begin, row_end}];
  if (slot) return *slot;
  auto r = std::make_unique<Rows>();
  r->range = csr_row_range(a_, ones_, row_begin, row_end);
  const CsrRowRange<Scalar>& c = r->range;
  check_cusparse(cusparseCreateConstCsr(&r->descr, row_end - row_begin, a_.num_cols, c.nnz, c.offsets.data(),
                                        c.col_idx, c.values, CUSPARSE_INDEX_64I, CUSPARSE_INDEX_64I,
                                        CUSPARSE_INDEX_BASE_ZERO, cuda_type<Scalar>()),
                 "cusparseCreateConstCsr");
  slot = std::move(r);
  return *slot;
}

template <class Scalar>
void VendorSpmm<Scalar>::apply(const SpmmCall<Scalar>& call, const Matrix<const Scalar>& x,
                               const Matrix<Scalar>& y) {
  const int64_t width = int64_t(x.extent(1)), count = call.row_end - call.row_begin;
  if (width == 0 || count == 0) return;
  Rows& r = rows(call.row_begin, call.row_end);
  cusparseConstDnMatDescr_t dx = nullptr;
  cusparseDnMatDescr_t dy = nullptr;
  check_cusparse(cusparseCreateConstDnMat(&dx, int64_t(x.extent(0)), width, leading_dimension(x), x.data(),
                                          cuda_type<Scalar>(), CUSPARSE_ORDER_ROW),
                 "cusparseCreateConstDnMat");
  const int64_t ldy = leading_dimension(y);
  check_cusparse(cusparseCreateDnMat(&dy, count, width, ldy, y.data() + call.row_begin * ldy,
                                     cuda_type<Scalar>(), CUSPARSE_ORDER_ROW),
                 "cusparseCreateDnMat");
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  size_t bytes = 0;
  cusparseStatus_t status =
      cusparseSpMM_bufferSize(cusparse(), op, op, &call.alpha, r.descr, dx, &call.beta, dy,
                              cuda_type<Scalar>(), CUSPARSE_SPMM_ALG_DEFAULT, &bytes);
  if (status == CUSPARSE_STATUS_SUCCESS && bytes > buffer_.extent(0))
    buffer_ = Vector<char>(Kokkos::ViewAllocateWithoutInitializing("spmm_buffer"), bytes);
  if (status == CUSPARSE_STATUS_SUCCESS)
    status = cusparseSpMM(cusparse(), op, op, &call.alpha, r.descr, dx, &call.beta, dy, cuda_type<Scalar>(),
                          CUSPARSE_SPMM_ALG_DEFAULT, buffer_.data());
  cusparseDestroyDnMat(dx);
  cusparseDestroyDnMat(dy);
  check_cusparse(status, "cusparseSpMM");
}

template class VendorSpmm<float>;
template class VendorSpmm<double>;

}  // namespace tessera::impl
