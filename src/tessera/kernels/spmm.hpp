// SPDX-License-Identifier: BSD-3-Clause
// Sparse (CSR) times dense: Y = alpha * A * X + beta * Y, the aggregation step of every GNN layer.
// CsrSpmm is built once per matrix ("set up once, apply many"): it splits the rows into blocks of about
// equal nonzeros so a hub row does not stall one thread while the others idle. A transpose is a matrix of
// its own (csr_transpose), stored explicitly, so backward passes run the same kernel. A degree-normalized
// matrix can be kept as a pattern with row and column scales instead of a value per nonzero. The kernel runs
// on the path the caller names (kernel_path.hpp): spmm_host.cpp, spmm_team.cpp, spmm_vendor.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

#include "tessera/core/csr.hpp"
#include "tessera/core/views.hpp"
#include "tessera/kernels/kernel_path.hpp"

namespace tessera {

namespace impl {
template <class Scalar>
class VendorSpmm;
}

/// Column ids as CsrSpmm stores them: int32 on host builds, where a block's columns are a range of at most
/// 2^31 - 1 nodes (4 bytes less per nonzero kept, a third of a valued block, and read by every product);
/// int64 on device builds, whose vendor descriptors (cuSPARSE, rocSPARSE) ran with 64-bit ids.
using SpmmColumn = std::conditional_t<std::is_same<DeviceSpace, HostSpace>::value, int32_t, int64_t>;

/// A CSR matrix prepared for repeated products with dense blocks.
template <class Scalar>
class CsrSpmm {
 public:
  /// An empty 0 x 0 operator.
  CsrSpmm() = default;
  /// A pattern matrix (no values) multiplies as if every value were one. Column ids (int32 or int64) are
  /// taken as they are when they are SpmmColumn, else copied into SpmmColumn (a matrix with more columns
  /// than it holds is refused; the caller may drop its copy).
  template <class Column>
  explicit CsrSpmm(CsrMatrix<Scalar, DeviceSpace, Column> a);
  /// A pattern whose entry (i, j) weighs scaled_weight<Scalar>(row_scale(i), col_scale(j)) (an empty scale:
  /// ones): a degree-normalized adjacency without a value per nonzero (GCN's D^-1/2 A D^-1/2, the mean's
  /// D^-1 A and its transpose A^T D^-1). Host builds keep the scales (4 bytes less per nonzero, a third of
  /// a block with 32-bit ids); device builds multiply them out into values here, which the vendor
  /// libraries need.
  template <class Column>
  CsrSpmm(CsrMatrix<Scalar, DeviceSpace, Column> pattern, Vector<double> row_scale, Vector<double> col_scale);

  /// y (A.num_rows x F) = alpha * A * x (A.num_cols x F) + beta * y. x and y must not alias.
  void apply(const Matrix<const Scalar>& x, const Matrix<Scalar>& y, Scalar alpha = Scalar(1),
             Scalar beta = Scalar(0), KernelPath path = KernelPath::Auto) const;

  /// Only rows [row_begin, row_end) of y. Lets a caller ship finished rows (a non-blocking all-reduce)
  /// while later ones compute; the row ranges are the caller's, so all ranks of a reduction can agree.
  void apply_rows(const Matrix<const Scalar>& x, const Matrix<Scalar>& y, int64_t row_begin, int64_t row_end,
                  Scalar alpha = Scalar(1), Scalar beta = Scalar(0),
                  KernelPath path = KernelPath::Auto) const;

  /// y = alpha * A * x + beta * y for x held as bf16 bits (A.num_cols x F, each entry the float from_bf16
  /// gives it), summed in fp32: half the bytes of x read. CsrSpmm<float> only. The host and team paths widen
  /// each entry as they read it; the vendor path has no bf16 product yet and runs the team kernel instead.
  void apply_bf16(const Matrix<const uint16_t>& x, const Matrix<Scalar>& y, Scalar alpha = Scalar(1),
                  Scalar beta = Scalar(0), KernelPath path = KernelPath::Auto) const;
  /// apply_bf16 for rows [row_begin, row_end) of y only (as apply_rows).
  void apply_rows_bf16(const Matrix<const uint16_t>& x, const Matrix<Scalar>& y, int64_t row_begin,
                       int64_t row_end, Scalar alpha = Scalar(1), Scalar beta = Scalar(0),
                       KernelPath path = KernelPath::Auto) const;

  /// The matrix as given, its column ids as SpmmColumn (a pattern when it is scaled()).
  const CsrMatrix<Scalar, DeviceSpace, SpmmColumn>& matrix() const { return a_; }
  /// Whether the weights are row_scale(i) * col_scale(j) rather than values.
  bool scaled() const { return row_scale_.extent(0) > 0 || col_scale_.extent(0) > 0; }
  /// The row scales (empty unless scaled() with row scales: then ones).
  const Vector<double>& row_scale() const { return row_scale_; }
  /// The column scales (empty unless scaled() with column scales: then ones).
  const Vector<double>& col_scale() const { return col_scale_; }
  /// Every entry's weight in storage order (values, ones for a pattern, or the scales' products), on the
  /// host: for checks and for code that needs the numbers, at 4 or 8 bytes per nonzero.
  HostVector<Scalar> host_weights() const;
  /// Number of row blocks of balanced work (balanced on first use: here or in a host or team product).
  int64_t num_blocks() const;
  /// Gives the matrix a buffer (device memory, at least row_block_entries(rows) entries) to keep its row
  /// blocks in when a host or team product balances them, instead of allocating their own: a caller that
  /// makes matrices every step (a sampled or mini-batch step's blocks) hands the same buffers out again.
  /// On device builds the host copy of the blocks is still allocated where they are balanced.
  void keep_row_blocks_in(Vector<int64_t> buffer);
  /// Entries a row-block buffer needs for a matrix of `rows` rows (keep_row_blocks_in): one more than the
  /// blocks it is split into.
  static int64_t row_block_entries(int64_t rows);

 private:
  void balance_rows() const;
  template <class In>
  void apply_rows_of(const Matrix<const In>& x, const Matrix<Scalar>& y, int64_t row_begin, int64_t row_end,
                     Scalar alpha, Scalar beta, KernelPath path) const;

  CsrMatrix<Scalar, DeviceSpace, SpmmColumn> a_;
  Vector<double> row_scale_, col_scale_;
  mutable Vector<int64_t> block_start_;  // row blocks of balanced nonzeros, made on first host/team use
  Vector<int64_t> row_block_buffer_;     // where to make them (keep_row_blocks_in), or empty: allocated
  mutable HostVector<int64_t> host_block_start_;
  mutable std::shared_ptr<impl::VendorSpmm<Scalar>> vendor_;  // vendor descriptors, made on first use
};

/// The host path's row loop on a CPU: a row's sums held in AVX-512 or AVX2 vector registers over its
/// nonzeros (x86-64 host builds), or the plain loop (every CPU and build; what the others are tested
/// against). Every loop gives the plain loop's bits. Auto: the widest this CPU has.
enum class HostSpmmLoop { Auto, Avx512, Avx2, Plain };
/// The names of HostSpmmLoop's values (core/enum_names.hpp): what `bench spmm --host-loop` and messages use.
inline constexpr EnumName<HostSpmmLoop> kHostSpmmLoopNames[] = {{HostSpmmLoop::Auto, "auto"},
                                                                {HostSpmmLoop::Avx512, "avx512"},
                                                                {HostSpmmLoop::Avx2, "avx2"},
                                                                {HostSpmmLoop::Plain, "plain"}};
/// auto, avx512, avx2 or plain: the name of a value.
inline const char* host_spmm_loop_name(HostSpmmLoop loop) {
  return name_of(kHostSpmmLoopNames, loop);
}
/// Whether this CPU and build can run `loop` (Auto and Plain always).
bool host_spmm_loop_available(HostSpmmLoop loop);
/// The loop host products run now in this process (never Auto).
HostSpmmLoop host_spmm_loop();
/// Host products in this process run `loop` from now on (Auto: the widest available, the default); one
/// this CPU cannot run is refused (tessera::Error). For comparing them: `tessera bench spmm --host-loop`.
void use_host_spmm_loop(HostSpmmLoop loop);

/// Row boundaries of `blocks` blocks balancing nonzeros + rows (a row costs one unit of overhead).
HostVector<int64_t> balanced_row_blocks(const HostVector<int64_t>& row_ptr, int64_t blocks);

/// Explicit transpose of a host CSR (values kept; a pattern stays a pattern). Columns of each row sorted.
/// Column ids int64 (float, double) or int32 (float).
template <class Scalar, class Column>
CsrMatrix<Scalar, HostSpace, Column> csr_transpose(const CsrMatrix<Scalar, HostSpace, Column>& a);

/// Copies a host CSR into memory space Space (a no-op view copy when Space is the host). Column ids int64
/// (float, double) or int32 (float).
template <class Scalar, class Space, class Column>
CsrMatrix<Scalar, Space, Column> csr_to_space(const CsrMatrix<Scalar, HostSpace, Column>& a);

}  // namespace tessera
