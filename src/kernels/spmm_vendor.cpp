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
// offsets(i) = row_ptr(row_begin + i) - row_ptr(row_begin): a free function, as CUDA's extended lambdas
// may not live in private members.
void rebase_offsets(const Vector<int64_t>& row_ptr, int64_t row_begin, const Vector<int64_t>& offsets) {
  Kokkos::parallel_for(
      "tessera::spmm_rebase", Kokkos::RangePolicy<ExecSpace>(0, int64_t(offsets.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { offsets(i) = row_ptr(row_begin + i) - row_ptr(row_begin); });
}
}  // namespace

// cuSPARSE wants offsets that start at zero, so a row range has its own offset array (rebased on the
// device) and column / value pointers advanced to the range's first nonzero.
template <class Scalar>
struct VendorSpmm<Scalar>::Rows {
  Vector<int64_t> offsets;
  cusparseConstSpMatDescr_t descr = nullptr;
  ~Rows() {
    if (descr) cusparseDestroySpMat(descr);
  }
};

template <class Scalar>
VendorSpmm<Scalar>::VendorSpmm(const CsrMatrix<Scalar, DeviceSpace>& a) : a_(a) {
  if (a_.is_pattern()) {
    ones_ = Vector<Scalar>(Kokkos::ViewAllocateWithoutInitializing("spmm_ones"), size_t(a_.nnz()));
    Kokkos::deep_copy(ones_, Scalar(1));
  }
}

template <class Scalar>
VendorSpmm<Scalar>::~VendorSpmm() = default;

template <class Scalar>
typename VendorSpmm<Scalar>::Rows& VendorSpmm<Scalar>::rows(int64_t row_begin, int64_t row_end) {
  auto& slot = ranges_[{row_begin, row_end}];
  if (slot) return *slot;
  auto r = std::make_unique<Rows>();
  const int64_t count = row_end - row_begin;
  r->offsets = Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("spmm_offsets"), size_t(count + 1));
  rebase_offsets(a_.row_ptr, row_begin, r->offsets);
  const auto row_ptr = a_.row_ptr;
  int64_t first = 0, last = 0;  // two scalars read back once per range, not per product
  Kokkos::deep_copy(first, Kokkos::subview(row_ptr, row_begin));
  Kokkos::deep_copy(last, Kokkos::subview(row_ptr, row_end));
  const Scalar* values = a_.is_pattern() ? ones_.data() : a_.values.data();
  check_cusparse(cusparseCreateConstCsr(&r->descr, count, a_.num_cols, last - first, r->offsets.data(),
                                        a_.col_idx.data() + first, values + first, CUSPARSE_INDEX_64I,
                                        CUSPARSE_INDEX_64I, CUSPARSE_INDEX_BASE_ZERO, cuda_type<Scalar>()),
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
