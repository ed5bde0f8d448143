// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/modes/step_uploads.hpp"

#include <limits>
#include <string>
#include <type_traits>

#include "tessera/core/error.hpp"
#include "tessera/core/views.hpp"
#include "tessera/models/modes/sampled.hpp"

namespace tessera {

namespace {

// Host data into a device vector of the same length (a plain copy on a host build).
template <class T>
void copy_in(const T* from, const Vector<T>& to) {
  Kokkos::deep_copy(
      to, Kokkos::View<const T*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(from, to.extent(0)));
}

// Column ids into SpmmColumn: copied as they are on device builds (64-bit there), narrowed in the one
// pass that writes them on host builds (32-bit: the buffer is host memory). A template, so that the branch
// a build does not take is not compiled.
template <class Column>
void copy_columns(const std::vector<int64_t>& from, const Vector<Column>& to) {
  if constexpr (std::is_same<Column, int64_t>::value) {
    copy_in(from.data(), to);
  } else {
    // Dependent on Column, so checked only where this branch is taken (a host build's 32-bit ids).
    static_assert(std::is_same<Column, int32_t>::value == std::is_same<DeviceSpace, HostSpace>::value,
                  "narrow column ids are a host build's");
    const int64_t* in = from.data();
    Column* out = to.data();
    Kokkos::parallel_for("tessera::step_columns",
                         Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, int64_t(from.size())),
                         [=](int64_t k) { out[k] = Column(in[k]); });
    Kokkos::fence();
  }
}

}  // namespace

template <class View>
View StepUploads::Pool<View>::next(size_t count) {
  if (used == held.size()) held.emplace_back();
  View& buffer = held[used++];
  // At least one entry, so that an empty array (an empty block's columns) still points into memory, as a
  // fresh View does: vendor descriptors are handed the pointers.
  reserve_vector(buffer, int64_t(count > 0 ? count : 1), label);
  return Kokkos::subview(buffer, std::make_pair(size_t(0), count));
}

template <class View>
View StepUploads::Pool<View>::next(int64_t rows, int64_t cols) {
  if (used == held.size()) held.emplace_back();
  View& buffer = held[used++];
  if (int64_t(buffer.extent(0)) < rows || int64_t(buffer.extent(1)) != cols)
    buffer = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)),
                  size_t(rows + rows / 4), size_t(cols));
  return Kokkos::subview(buffer, std::make_pair(int64_t(0), rows), Kokkos::ALL());
}

template <class View>
int64_t StepUploads::Pool<View>::bytes() const {
  int64_t total = 0;
  for (const View& buffer : held) total += int64_t(buffer.span() * sizeof(typename View::value_type));
  return total;
}

void StepUploads::restart() {
  offsets_.used = ids_.used = labels_.used = columns_.used = values_.used = mask_.used = 0;
  rows_.used = task_rows_.used = row_blocks_.used = 0;
}

CsrSpmm<float> StepUploads::spmm(CsrMatrix<float, DeviceSpace, SpmmColumn> a) {
  // A device build's products take the vendor path by default, which splits no rows: a buffer per block
  // there would be device memory held for nothing.
  if (!std::is_same<DeviceSpace, HostSpace>::value) return CsrSpmm<float>(std::move(a));
  const int64_t rows = a.num_rows;
  CsrSpmm<float> op(std::move(a));
  op.keep_row_blocks_in(row_blocks_.next(size_t(CsrSpmm<float>::row_block_entries(rows))));
  return op;
}

CsrMatrix<float, DeviceSpace, SpmmColumn> StepUploads::csr(const HostCsr& a) {
  require(a.num_cols <= int64_t(std::numeric_limits<SpmmColumn>::max()), "spmm: a block of ", a.num_cols,
          " columns needs 64-bit column ids (at most ", std::numeric_limits<SpmmColumn>::max(), ")");
  require(
      a.row_ptr.size() == size_t(a.num_rows + 1) && (a.values.empty() || a.values.size() == a.col_idx.size()),
      "upload: a block of ", a.num_rows, " rows with ", a.row_ptr.size(), " offsets, ", a.col_idx.size(),
      " columns and ", a.values.size(), " values");
  CsrMatrix<float, DeviceSpace, SpmmColumn> m;
  m.num_rows = a.num_rows;
  m.num_cols = a.num_cols;
  m.row_ptr = offsets_.next(a.row_ptr.size());
  copy_in(a.row_ptr.data(), m.row_ptr);
  m.col_idx = columns_.next(a.col_idx.size());
  copy_columns(a.col_idx, m.col_idx);
  m.values = values_.next(a.values.size());
  copy_in(a.values.data(), m.values);
  return m;
}

CsrMatrix<float, DeviceSpace, SpmmColumn> StepUploads::leading_identity(int64_t rows, int64_t cols) {
  CsrMatrix<float, DeviceSpace, SpmmColumn> m;
  m.num_rows = rows;
  m.num_cols = cols;
  m.row_ptr = offsets_.next(size_t(rows + 1));
  m.col_idx = columns_.next(size_t(rows < cols ? rows : cols));
  write_leading_identity(rows, cols, m.row_ptr, m.col_idx);
  return m;
}

Vector<int64_t> StepUploads::ids(const int64_t* ids, size_t count) {
  const Vector<int64_t> out = ids_.next(count);
  copy_in(ids, out);
  return out;
}

Vector<int64_t> StepUploads::ids(size_t count) {
  return ids_.next(count);
}

Vector<int64_t> StepUploads::offsets(size_t count) {
  return offsets_.next(count);
}

Vector<SpmmColumn> StepUploads::columns(size_t count) {
  return columns_.next(count);
}

Vector<float> StepUploads::values(size_t count) {
  return values_.next(count);
}

Matrix<float> StepUploads::rows(int64_t rows, int64_t cols) {
  return rows_.next(rows, cols);
}

Vector<int64_t> StepUploads::labels(size_t count) {
  return labels_.next(count);
}

Vector<uint8_t> StepUploads::mask(size_t count) {
  return mask_.next(count);
}

Matrix<int8_t> StepUploads::task_rows(int64_t rows, int64_t tasks) {
  return task_rows_.next(rows, tasks);
}

int64_t StepUploads::bytes() const {
  return offsets_.bytes() + ids_.bytes() + labels_.bytes() + columns_.bytes() + values_.bytes() +
         mask_.bytes() + rows_.bytes() + task_rows_.bytes() + row_blocks_.bytes();
}

}  // namespace tessera
