// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/spmm.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

#include "impl/spmm_kernels.hpp"
#ifdef TESSERA_VENDOR_SPMM
#include "impl/vendor.hpp"
#endif
#include "tessera/core/error.hpp"
#include "tessera/core/kernel_profile.hpp"

namespace tessera {

namespace {

// The number of blocks balanced_row_blocks makes of `rows` rows when asked for `blocks`.
int64_t row_blocks_of(int64_t rows, int64_t blocks) {
  return std::max<int64_t>(1, std::min(blocks, std::max<int64_t>(rows, 1)));
}

// balanced_row_blocks into start[0, blocks] (blocks as row_blocks_of gives them).
void write_balanced_row_blocks(const HostVector<int64_t>& row_ptr, int64_t blocks, int64_t* start) {
  const int64_t rows = int64_t(row_ptr.extent(0)) - 1;
  const double total = double(row_ptr(rows) + rows);
  int64_t row = 0;
  for (int64_t b = 1; b < blocks; ++b) {
    const double target = total * double(b) / double(blocks);
    while (row < rows && double(row_ptr(row) + row) < target) ++row;
    start[b] = row;
  }
  start[0] = 0;
  start[blocks] = rows;
}

// Blocks a product splits a matrix into: a few per thread lets the dynamic schedule even out what the
// nonzero count cannot see.
int64_t row_blocks_wanted() {
  return 16 * int64_t(ExecSpace().concurrency());
}

}  // namespace

HostVector<int64_t> balanced_row_blocks(const HostVector<int64_t>& row_ptr, int64_t blocks) {
  blocks = row_blocks_of(int64_t(row_ptr.extent(0)) - 1, blocks);
  HostVector<int64_t> start("block_start", size_t(blocks + 1));
  write_balanced_row_blocks(row_ptr, blocks, start.data());
  return start;
}

template <class Scalar, class Column>
CsrMatrix<Scalar, HostSpace, Column> csr_transpose(const CsrMatrix<Scalar, HostSpace, Column>& a) {
  require(a.num_rows <= int64_t(std::numeric_limits<Column>::max()), "csr_transpose: ", a.num_rows,
          " rows become columns wider than their ids");
  CsrMatrix<Scalar, HostSpace, Column> t;
  t.num_rows = a.num_cols;
  t.num_cols = a.num_rows;
  t.row_ptr = HostVector<int64_t>("row_ptr", size_t(t.num_rows + 1));
  t.col_idx = HostVector<Column>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), size_t(a.nnz()));
  if (!a.is_pattern())
    t.values = HostVector<Scalar>(Kokkos::ViewAllocateWithoutInitializing("values"), size_t(a.nnz()));
  for (int64_t k = 0; k < a.nnz(); ++k) ++t.row_ptr(a.col_idx(k) + 1);
  for (int64_t r = 0; r < t.num_rows; ++r) t.row_ptr(r + 1) += t.row_ptr(r);
  std::vector<int64_t> fill(t.row_ptr.data(), t.row_ptr.data() + t.num_rows);
  // Visiting rows in order leaves every transposed row sorted by column.
  for (int64_t r = 0; r < a.num_rows; ++r)
    for (int64_t k = a.row_ptr(r); k < a.row_ptr(r + 1); ++k) {
      const int64_t at = fill[size_t(a.col_idx(k))]++;
      t.col_idx(at) = Column(r);
      if (!a.is_pattern()) t.values(at) = a.values(k);
    }
  return t;
}

template <class Scalar, class Space, class Column>
CsrMatrix<Scalar, Space, Column> csr_to_space(const CsrMatrix<Scalar, HostSpace, Column>& a) {
  CsrMatrix<Scalar, Space, Column> out;
  out.num_rows = a.num_rows;
  out.num_cols = a.num_cols;
  out.row_ptr = Kokkos::create_mirror_view_and_copy(Space(), a.row_ptr);
  out.col_idx = Kokkos::create_mirror_view_and_copy(Space(), a.col_idx);
  out.values = Kokkos::create_mirror_view_and_copy(Space(), a.values);
  return out;
}

namespace {
// The matrix with its column ids as SpmmColumn: a move where they are already, else a parallel copy into
// SpmmColumn ids, after which `a`'s array is released (freed unless the caller still holds it).
template <class Scalar, class Column>
CsrMatrix<Scalar, DeviceSpace, SpmmColumn> narrow_columns(CsrMatrix<Scalar, DeviceSpace, Column> a) {
  if constexpr (std::is_same<SpmmColumn, Column>::value) {
    return a;
  } else {
    require(a.num_cols <= int64_t(std::numeric_limits<SpmmColumn>::max()), "spmm: a block of ", a.num_cols,
            " columns needs 64-bit column ids (at most ", std::numeric_limits<SpmmColumn>::max(), ")");
    CsrMatrix<Scalar, DeviceSpace, SpmmColumn> out;
    out.num_rows = a.num_rows;
    out.num_cols = a.num_cols;
    out.row_ptr = a.row_ptr;
    out.values = a.values;
    out.col_idx = Vector<SpmmColumn>(Kokkos::ViewAllocateWithoutInitializing("col_idx"), size_t(a.nnz()));
    const auto wide = a.col_idx;
    const auto narrow = out.col_idx;
    Kokkos::parallel_for(
        "tessera::spmm_narrow_columns", Kokkos::RangePolicy<ExecSpace>(0, a.nnz()),
        KOKKOS_LAMBDA(int64_t k) { narrow(k) = SpmmColumn(wide(k)); });
    Kokkos::fence();
    return out;
  }
}

// Values[k] = scaled_weight(row_scale(i), col_scale(j)) of a scaled pattern (an empty scale: ones). Outside
// the constructor: nvcc's extended lambdas need an enclosing function whose address can be taken.
template <class Scalar>
Vector<Scalar> scaled_values(const CsrMatrix<Scalar, DeviceSpace, SpmmColumn>& a,
                             const Vector<double>& row_scale, const Vector<double>& col_scale) {
  const auto row_ptr = a.row_ptr;
  const auto col_idx = a.col_idx;
  const auto rows = row_scale;
  const auto cols = col_scale;
  const bool by_row = row_scale.extent(0) > 0, by_column = col_scale.extent(0) > 0;
  const Vector<Scalar> values(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("values")),
                              size_t(a.nnz()));
  Kokkos::parallel_for(
      "tessera::spmm_scaled_values", Kokkos::RangePolicy<ExecSpace>(0, a.num_rows), KOKKOS_LAMBDA(int64_t i) {
        for (int64_t k = row_ptr(i); k < row_ptr(i + 1); ++k)
          values(k) = scaled_weight<Scalar>(by_row ? rows(i) : 1.0, by_column ? cols(col_idx(k)) : 1.0);
      });
  Kokkos::fence();
  return values;
}
}  // namespace

template <class Scalar>
template <class Column>
CsrSpmm<Scalar>::CsrSpmm(CsrMatrix<Scalar, DeviceSpace, Column> a) : a_(narrow_columns(std::move(a))) {}

template <class Scalar>
template <class Column>
CsrSpmm<Scalar>::CsrSpmm(CsrMatrix<Scalar, DeviceSpace, Column> pattern, Vector<double> row_scale,
                         Vector<double> col_scale)
    : a_(narrow_columns(std::move(pattern))) {
  require(a_.is_pattern(), "spmm: a scaled matrix is a pattern, not ", a_.values.extent(0), " values");
  require(row_scale.extent(0) == 0 || int64_t(row_scale.extent(0)) == a_.num_rows,
          "spmm: ", row_scale.extent(0), " row scales for ", a_.num_rows, " rows");
  require(col_scale.extent(0) == 0 || int64_t(col_scale.extent(0)) == a_.num_cols,
          "spmm: ", col_scale.extent(0), " column scales for ", a_.num_cols, " columns");
  if (a_.num_rows == 0 || (row_scale.extent(0) == 0 && col_scale.extent(0) == 0)) return;
  if constexpr (std::is_same<DeviceSpace, HostSpace>::value) {
    row_scale_ = row_scale;
    col_scale_ = col_scale;
  } else {
    // Vendor descriptors take values: multiply the scales out, the same products the host kernel forms.
    a_.values = scaled_values(a_, row_scale, col_scale);
  }
}

// On the first host or team product, not at construction: the vendor libraries balance rows themselves,
// and a mini-batch's blocks, made every step, would otherwise copy their offsets to the host and back each
// time (a wait on the device per block).
template <class Scalar>
void CsrSpmm<Scalar>::balance_rows() const {
  if (block_start_.extent(0) > 0) return;
  const auto row_ptr = Kokkos::create_mirror_view_and_copy(HostSpace(), a_.row_ptr);
  const int64_t blocks = row_blocks_of(a_.num_rows, row_blocks_wanted());
  // The caller's buffer (keep_row_blocks_in checked its size), or one of the matrix's own.
  const Vector<int64_t> buffer =
      row_block_buffer_.extent(0) > 0
          ? row_block_buffer_
          : Vector<int64_t>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "block_start"),
                            size_t(blocks + 1));
  block_start_ = Kokkos::subview(buffer, std::make_pair(int64_t(0), blocks + 1));
  host_block_start_ = Kokkos::create_mirror_view(block_start_);  // the same memory on host builds
  write_balanced_row_blocks(row_ptr, blocks, host_block_start_.data());
  Kokkos::deep_copy(block_start_, host_block_start_);
}

template <class Scalar>
void CsrSpmm<Scalar>::keep_row_blocks_in(Vector<int64_t> buffer) {
  const int64_t needed = row_block_entries(a_.num_rows);
  require(int64_t(buffer.extent(0)) >= needed, "spmm: a row-block buffer of ", buffer.extent(0), " entries, ",
          needed, " needed");
  row_block_buffer_ = std::move(buffer);
}

template <class Scalar>
int64_t CsrSpmm<Scalar>::row_block_entries(int64_t rows) {
  return row_blocks_of(rows, row_blocks_wanted()) + 1;
}

template <class Scalar>
int64_t CsrSpmm<Scalar>::num_blocks() const {
  balance_rows();
  return int64_t(block_start_.extent(0)) - 1;
}

template <class Scalar>
HostVector<Scalar> CsrSpmm<Scalar>::host_weights() const {
  if (!a_.is_pattern()) {
    HostVector<Scalar> out(Kokkos::ViewAllocateWithoutInitializing("weights"), a_.values.extent(0));
    Kokkos::deep_copy(out, a_.values);
    return out;
  }
  HostVector<Scalar> out(Kokkos::ViewAllocateWithoutInitializing("weights"), size_t(a_.nnz()));
  if (!scaled()) {
    Kokkos::deep_copy(out, Scalar(1));
    return out;
  }
  const auto row_ptr = Kokkos::create_mirror_view_and_copy(HostSpace(), a_.row_ptr);
  const auto col_idx = Kokkos::create_mirror_view_and_copy(HostSpace(), a_.col_idx);
  const auto rows = Kokkos::create_mirror_view_and_copy(HostSpace(), row_scale_);
  const auto cols = Kokkos::create_mirror_view_and_copy(HostSpace(), col_scale_);
  for (int64_t i = 0; i < a_.num_rows; ++i)
    for (int64_t k = row_ptr(i); k < row_ptr(i + 1); ++k)
      out(k) = scaled_weight<Scalar>(rows.extent(0) > 0 ? rows(i) : 1.0,
                                     cols.extent(0) > 0 ? cols(col_idx(k)) : 1.0);
  return out;
}

template <class Scalar>
void CsrSpmm<Scalar>::apply(const Matrix<const Scalar>& x, const Matrix<Scalar>& y, Scalar alpha, Scalar beta,
                            KernelPath path) const {
  apply_rows(x, y, 0, a_.num_rows, alpha, beta, path);
}

template <class Scalar>
void CsrSpmm<Scalar>::apply_bf16(const Matrix<const uint16_t>& x, const Matrix<Scalar>& y, Scalar alpha,
                                 Scalar beta, KernelPath path) const {
  apply_rows_bf16(x, y, 0, a_.num_rows, alpha, beta, path);
}

template <class Scalar>
void CsrSpmm<Scalar>::apply_rows_bf16(const Matrix<const uint16_t>& x, const Matrix<Scalar>& y,
                                      int64_t row_begin, int64_t row_end, Scalar alpha, Scalar beta,
                                      KernelPath path) const {
  if constexpr (std::is_same<Scalar, float>::value)
    apply_rows_of(x, y, row_begin, row_end, alpha, beta, path);
  else
    fail("spmm: bf16 inputs are summed in fp32 (a float operator)");
}

template <class Scalar>
void CsrSpmm<Scalar>::apply_rows(const Matrix<const Scalar>& x, const Matrix<Scalar>& y, int64_t row_begin,
                                 int64_t row_end, Scalar alpha, Scalar beta, KernelPath path) const {
  apply_rows_of(x, y, row_begin, row_end, alpha, beta, path);
}

template <class Scalar>
template <class In>
void CsrSpmm<Scalar>::apply_rows_of(const Matrix<const In>& x, const Matrix<Scalar>& y, int64_t row_begin,
                                    int64_t row_end, Scalar alpha, Scalar beta, KernelPath path) const {
  require(int64_t(x.extent(0)) == a_.num_cols && int64_t(y.extent(0)) == a_.num_rows &&
              x.extent(1) == y.extent(1),
          "spmm: A is ", a_.num_rows, "x", a_.num_cols, ", X is ", x.extent(0), "x", x.extent(1), ", Y is ",
          y.extent(0), "x", y.extent(1));
  require(row_begin >= 0 && row_end <= a_.num_rows, "spmm: rows [", row_begin, ", ", row_end,
          ") outside the matrix's ", a_.num_rows);
  if (row_end <= row_begin) return;
  KernelPath resolved = resolve_kernel_path(path, KernelKind::Spmm);
  constexpr bool bf16 = !std::is_same<In, Scalar>::value;
  if (bf16 && resolved == KernelPath::Vendor) resolved = KernelPath::Team;  // no vendor bf16 product yet
  int64_t first_block = 0, last_block = 0;
  if (resolved != KernelPath::Vendor) {
    // The balanced blocks that intersect the range; rows outside it are skipped inside the kernels.
    const int64_t blocks = num_blocks();  // balances them on first use
    const int64_t* starts = host_block_start_.data();
    first_block = int64_t(std::upper_bound(starts, starts + blocks + 1, row_begin) - starts) - 1;
    last_block = int64_t(std::lower_bound(starts, starts + blocks + 1, row_end) - starts);
  }
  const impl::SpmmCall<Scalar> call{a_,         row_scale_, col_scale_, block_start_, first_block,
                                    last_block, row_begin,  row_end,    alpha,        beta};
  switch (resolved) {
    case KernelPath::Team:
      return impl::spmm_team<Scalar, In>(call, x, y);
    case KernelPath::Host:
      return impl::spmm_host<Scalar, In>(call, x, y);
#ifdef TESSERA_VENDOR_SPMM
    case KernelPath::Vendor: {
      if constexpr (bf16) {
        fail("spmm: no vendor bf16 product");
      } else {
        // Made on first use: a run on the team path never pays for descriptors or a pattern's ones array.
        if (!vendor_) vendor_ = std::make_shared<impl::VendorSpmm<Scalar>>(a_);
        char name[96] = "";
        if (kernel_profile_active())
          std::snprintf(name, sizeof(name), "spmm vendor %lld rows width %lld",
                        static_cast<long long>(row_end - row_begin), static_cast<long long>(x.extent(1)));
        const ProfileRegion region(name);
        return vendor_->apply(call, x, y);
      }
    }
#endif
    default:
      fail("spmm: no kernel for path ", kernel_path_name(path));
  }
}

template class CsrSpmm<float>;
template class CsrSpmm<double>;
template CsrSpmm<float>::CsrSpmm(CsrMatrix<float, DeviceSpace, int64_t>);
template CsrSpmm<float>::CsrSpmm(CsrMatrix<float, DeviceSpace, int32_t>);
template CsrSpmm<double>::CsrSpmm(CsrMatrix<double, DeviceSpace, int64_t>);
template CsrSpmm<float>::CsrSpmm(CsrMatrix<float, DeviceSpace, int64_t>, Vector<double>, Vector<double>);
template CsrSpmm<float>::CsrSpmm(CsrMatrix<float, DeviceSpace, int32_t>, Vector<double>, Vector<double>);
template CsrSpmm<double>::CsrSpmm(CsrMatrix<double, DeviceSpace, int64_t>, Vector<double>, Vector<double>);
template CsrMatrix<float, HostSpace> csr_transpose(const CsrMatrix<float, HostSpace>&);
template CsrMatrix<float, HostSpace, int32_t> csr_transpose(const CsrMatrix<float, HostSpace, int32_t>&);
template CsrMatrix<double, HostSpace> csr_transpose(const CsrMatrix<double, HostSpace>&);
template CsrMatrix<float, DeviceSpace> csr_to_space<float, DeviceSpace>(const CsrMatrix<float, HostSpace>&);
template CsrMatrix<float, DeviceSpace, int32_t> csr_to_space<float, DeviceSpace>(
    const CsrMatrix<float, HostSpace, int32_t>&);
template CsrMatrix<double, DeviceSpace> csr_to_space<double, DeviceSpace>(
    const CsrMatrix<double, HostSpace>&);

}  // namespace tessera
