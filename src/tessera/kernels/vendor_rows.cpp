// SPDX-License-Identifier: BSD-3-Clause
// What the cuSPARSE and rocSPARSE paths share: a row range of a CSR matrix in the form their generic CSR
// descriptors take, and the ones array that stands in for a pattern matrix's values.
#include "impl/vendor.hpp"

namespace tessera::impl {

namespace {
// offsets(i) = row_ptr(row_begin + i) - row_ptr(row_begin): a free function, as CUDA's extended lambdas
// may not live in private members.
void rebase_offsets(const Vector<int64_t>& row_ptr, int64_t row_begin, const Vector<int64_t>& offsets) {
  Kokkos::parallel_for(
      "tessera::spmm_rebase", Kokkos::RangePolicy<ExecSpace>(0, int64_t(offsets.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { offsets(i) = row_ptr(row_begin + i) - row_ptr(row_begin); });
}
}  // namespace

template <class Scalar>
CsrRowRange<Scalar> csr_row_range(const CsrMatrix<Scalar, DeviceSpace>& a, const Vector<Scalar>& ones,
                                  int64_t row_begin, int64_t row_end) {
  CsrRowRange<Scalar> r;
  r.offsets = Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("spmm_offsets"),
                              size_t(row_end - row_begin + 1));
  rebase_offsets(a.row_ptr, row_begin, r.offsets);
  int64_t first = 0, last = 0;  // two scalars read back once per range, not per product
  Kokkos::deep_copy(first, Kokkos::subview(a.row_ptr, row_begin));
  Kokkos::deep_copy(last, Kokkos::subview(a.row_ptr, row_end));
  r.nnz = last - first;
  r.col_idx = a.col_idx.data() + first;
  r.values = (a.is_pattern() ? ones.data() : a.values.data()) + first;
  return r;
}

template <class Scalar>
Vector<Scalar> pattern_values(const CsrMatrix<Scalar, DeviceSpace>& a) {
  if (!a.is_pattern()) return Vector<Scalar>();
  Vector<Scalar> ones(Kokkos::ViewAllocateWithoutInitializing("spmm_ones"), size_t(a.nnz()));
  Kokkos::deep_copy(ones, Scalar(1));
  return ones;
}

template CsrRowRange<float> csr_row_range(const CsrMatrix<float, DeviceSpace>&, const Vector<float>&, int64_t,
                                          int64_t);
template CsrRowRange<double> csr_row_range(const CsrMatrix<double, DeviceSpace>&, const Vector<double>&,
                                           int64_t, int64_t);
template Vector<float> pattern_values(const CsrMatrix<float, DeviceSpace>&);
template Vector<double> pattern_values(const CsrMatrix<double, DeviceSpace>&);

}  // namespace tessera::impl
