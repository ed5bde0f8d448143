// SPDX-License-Identifier: BSD-3-Clause
// SpMM, vendor path on HIP builds: rocSPARSE's generic API (rocsparse_spmm, CSR with 64-bit indices,
// row-major dense operands), the same scheme as spmm_vendor.cpp: descriptors once per matrix and row
// range, a reused work buffer. Compiled only with TESSERA_VENDOR_HIP; compile-checked, never run here.
#include <rocsparse/rocsparse.h>

#include <algorithm>
#include <type_traits>

#include "impl/vendor.hpp"
#include "impl/vendor_handles.hpp"

namespace tessera::impl {

namespace {
template <class Scalar>
constexpr rocsparse_datatype roc_type() {
  return std::is_same<Scalar, float>::value ? rocsparse_datatype_f32_r : rocsparse_datatype_f64_r;
}

template <class View>
int64_t leading_dimension(const View& m) {
  return std::max<int64_t>(1, int64_t(m.stride(0)));
}

// rocSPARSE's dense descriptors own nothing; this one releases itself.
struct DenseDescriptor {
  rocsparse_dnmat_descr descr = nullptr;
  DenseDescriptor(int64_t rows, int64_t cols, int64_t ld, void* values, rocsparse_datatype type) {
    check_rocsparse(rocsparse_create_dnmat_descr(&descr, rows, cols, ld, values, type, rocsparse_order_row),
                    "rocsparse_create_dnmat_descr");
  }
  ~DenseDescriptor() { rocsparse_destroy_dnmat_descr(descr); }
  DenseDescriptor(const DenseDescriptor&) = delete;
  DenseDescriptor& operator=(const DenseDescriptor&) = delete;
};
}  // namespace

template <class Scalar>
struct VendorSpmm<Scalar>::Rows {
  CsrRowRange<Scalar> range;
  rocsparse_spmat_descr descr = nullptr;
  ~Rows() {
    if (descr) rocsparse_destroy_spmat_descr(descr);
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
  // rocSPARSE's descriptors take non-const pointers; it does not write through them for an SpMM.
  check_rocsparse(rocsparse_create_csr_descr(
                      &r->descr, row_end - row_begin, a_.num_cols, c.nnz, c.offsets.data(),
                      const_cast<int64_t*>(c.col_idx), const_cast<Scalar*>(c.values), rocsparse_indextype_i64,
                      rocsparse_indextype_i64, rocsparse_index_base_zero, roc_type<Scalar>()),
                  "rocsparse_create_csr_descr");
  slot = std::move(r);
  return *slot;
}

template <class Scalar>
void VendorSpmm<Scalar>::apply(const SpmmCall<Scalar>& call, const Matrix<const Scalar>& x,
                               const Matrix<Scalar>& y) {
  const int64_t width = int64_t(x.extent(1)), count = call.row_end - call.row_begin;
  if (width == 0 || count == 0) return;
  Rows& r = rows(call.row_begin, call.row_end);
  const DenseDescriptor dx(int64_t(x.extent(0)), width, leading_dimension(x), const_cast<Scalar*>(x.data()),
                           roc_type<Scalar>());
  const int64_t ldy = leading_dimension(y);
  const DenseDescriptor dy(count, width, ldy, y.data() + call.row_begin * ldy, roc_type<Scalar>());
  const auto op = rocsparse_operation_none;
  size_t bytes = 0;
  check_rocsparse(rocsparse_spmm(rocsparse(), op, op, &call.alpha, r.descr, dx.descr, &call.beta, dy.descr,
                                 roc_type<Scalar>(), rocsparse_spmm_alg_default,
                                 rocsparse_spmm_stage_buffer_size, &bytes, nullptr),
                  "rocsparse_spmm (buffer size)");
  if (bytes > buffer_.extent(0))
    buffer_ = Vector<char>(Kokkos::ViewAllocateWithoutInitializing("spmm_buffer"), bytes);
  for (const auto stage : {rocsparse_spmm_stage_preprocess, rocsparse_spmm_stage_compute})
    check_rocsparse(
        rocsparse_spmm(rocsparse(), op, op, &call.alpha, r.descr, dx.descr, &call.beta, dy.descr,
                       roc_type<Scalar>(), rocsparse_spmm_alg_default, stage, &bytes, buffer_.data()),
        "rocsparse_spmm");
}

template class VendorSpmm<float>;
template class VendorSpmm<double>;

}  // namespace tessera::impl
