// SPDX-License-Identifier: BSD-3-Clause
// Kernels against the dense double reference: exact on small inputs, then random ones, in float and double,
// on every kernel path this build has (host and team everywhere: the team path is what device builds run).
#include <gtest/gtest.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/dense.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/gemm.hpp"
#include "tessera/kernels/impl/fast_math.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/kernels/loss.hpp"
#include "tessera/kernels/norm.hpp"
#include "tessera/kernels/spmm.hpp"

using namespace tessera;
using namespace tessera::reference;

template <class Scalar>
class KernelTest : public ::testing::Test {
 protected:
  static double tolerance() { return std::is_same<Scalar, float>::value ? 2e-5 : 1e-12; }
};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(KernelTest, Scalars);

namespace {
// Every path that can run `kind` here (Auto is one of them by definition, so it is not listed).
std::vector<KernelPath> paths(KernelKind kind) {
  std::vector<KernelPath> out;
  for (KernelPath p : {KernelPath::Host, KernelPath::Team, KernelPath::Vendor})
    if (kernel_path_available(p, kind)) out.push_back(p);
  return out;
}
}  // namespace

TEST(KernelPath, AutoResolvesAndMissingPathsAreClearErrors) {
  EXPECT_EQ(resolve_kernel_path(KernelPath::Team, KernelKind::Spmm), KernelPath::Team);
  EXPECT_GE(paths(KernelKind::Spmm).size(), 2u);  // host and team run everywhere
  EXPECT_NE(resolve_kernel_path(KernelPath::Auto, KernelKind::Gemm), KernelPath::Auto);
  if (!kernel_path_available(KernelPath::Vendor, KernelKind::Spmm)) {
    try {
      resolve_kernel_path(KernelPath::Vendor, KernelKind::Spmm);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(),
                   "kernel path 'vendor' has no SpMM kernel in this build (vendor kernels need a CUDA build; "
                   "HIP builds "
                   "have SpMM only)");
    }
  }
  EXPECT_EQ(kernel_path_available(KernelPath::Vendor, KernelKind::Elementwise),
            kernel_path_available(KernelPath::Vendor, KernelKind::Spmm));
  // On a device, element-wise kernels default to the team path: the host path's thread per row is a CPU
  // shape (on an H100 it made a column sum 70x slower).
  const bool device = !std::is_same<DeviceSpace, HostSpace>::value;
  EXPECT_EQ(resolve_kernel_path(KernelPath::Auto, KernelKind::Elementwise),
            device ? KernelPath::Team : KernelPath::Host);
}

TEST(Spmm, HandCheckedExample) {
  // [1 0 2]   [1 2]   [ 7 10]
  // [0 0 0] x [3 4] = [ 0  0]
  // [0 3 0]   [3 4]   [ 9 12]
  CsrMatrix<double, HostSpace> a;
  a.num_rows = a.num_cols = 3;
  a.row_ptr = HostVector<int64_t>("p", 4);
  a.col_idx = HostVector<int64_t>("i", 3);
  a.values = HostVector<double>("v", 3);
  const int64_t ptr[] = {0, 2, 2, 3}, idx[] = {0, 2, 1};
  const double val[] = {1, 2, 3};
  for (int k = 0; k < 4; ++k) a.row_ptr(k) = ptr[k];
  for (int k = 0; k < 3; ++k) a.col_idx(k) = idx[k], a.values(k) = val[k];
  Dense x(3, 2);
  x.a = {1, 2, 3, 4, 3, 4};
  Matrix<double> y("y", 3, 2);
  CsrSpmm<double>(csr_to_space<double, DeviceSpace>(a)).apply(to_view<double>(x), y);
  const Dense got = from_view(y);
  EXPECT_EQ(got.a, (std::vector<double>{7, 10, 0, 0, 9, 12}));
}

TYPED_TEST(KernelTest, SpmmMatchesDenseWithEmptyRowsAndAFullRow) {
  using S = TypeParam;
  std::mt19937_64 gen(5);
  for (const auto& [rows, cols, width, pattern] :
       std::vector<std::tuple<int, int, int, bool>>{{1, 1, 1, false},
                                                    {50, 40, 7, false},
                                                    {300, 200, 33, false},
                                                    {300, 200, 16, true},
                                                    {17, 90, 1, false}}) {
    const auto a = random_csr<S>(rows, cols, 4, rows / 2, gen, pattern);
    const Dense x = random_dense(cols, width, gen), y0 = random_dense(rows, width, gen);
    const CsrSpmm<S> op(csr_to_space<S, DeviceSpace>(a));
    const CsrSpmm<S> t(csr_to_space<S, DeviceSpace>(csr_transpose(a)));
    const Dense xt = random_dense(rows, width, gen);
    const Dense expected = add(matmul(to_dense(a), x), y0, 4.0);
    Dense half = expected;
    for (double& v : half.a) v *= 0.5;
    for (KernelPath path : paths(KernelKind::Spmm)) {
      SCOPED_TRACE(kernel_path_name(path));
      Matrix<S> y = to_view<S>(y0);
      op.apply(to_view<S>(x), y, S(0.5), S(2), path);  // y = 0.5 A x + 2 y0
      EXPECT_LT(relative_error(from_view(y), half), this->tolerance())
          << rows << "x" << cols << " width " << width;
      // The explicit transpose multiplies like A^T.
      Matrix<S> yt("yt", size_t(cols), size_t(width));
      t.apply(to_view<S>(xt), yt, S(1), S(0), path);
      EXPECT_LT(relative_error(from_view(yt), matmul(transpose(to_dense(a)), xt)), this->tolerance());
    }
  }
}

// A degree-scaled pattern (GCN's D^-1/2 A D^-1/2, the mean's D^-1 A) multiplies like the dense matrix
// of weights row_scale(i) * col_scale(j) on every path, its weights are exactly those of the same matrix
// with values float(row_scale(i) * col_scale(j)), and on the host path the two give the same bits.
TEST(Spmm, DegreeScaledPatternEqualsItsValuedMatrix) {
  std::mt19937_64 gen(44);
  std::uniform_real_distribution<double> u(0.05, 1.0);
  // Both scales (GCN's), row scales only (the mean), column scales only (the mean's transpose).
  for (const auto& [by_row, by_column] :
       std::vector<std::pair<bool, bool>>{{true, true}, {true, false}, {false, true}}) {
    SCOPED_TRACE(std::string(by_row ? "row " : "") + (by_column ? "column " : "") + "scales");
    const int64_t rows = 120, cols = 90, width = 13;
    const auto pattern = random_csr<float>(rows, cols, 6, 17, gen, true);
    HostVector<double> rs("rs", by_row ? size_t(rows) : 0), cs("cs", by_column ? size_t(cols) : 0);
    for (int64_t i = 0; i < int64_t(rs.extent(0)); ++i) rs(i) = 1.0 / std::sqrt(double(1 + gen() % 50));
    for (int64_t j = 0; j < int64_t(cs.extent(0)); ++j) cs(j) = u(gen);
    CsrMatrix<float, HostSpace> valued = pattern;
    valued.values = HostVector<float>("v", size_t(pattern.nnz()));
    Dense weights(rows, cols);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = pattern.row_ptr(i); k < pattern.row_ptr(i + 1); ++k) {
        const int64_t j = pattern.col_idx(k);
        const double weight = (by_row ? rs(i) : 1.0) * (by_column ? cs(j) : 1.0);
        valued.values(k) = float(weight);
        weights(i, j) += weight;
      }
    const CsrSpmm<float> scaled(csr_to_space<float, DeviceSpace>(pattern),
                                Kokkos::create_mirror_view_and_copy(DeviceSpace(), rs),
                                Kokkos::create_mirror_view_and_copy(DeviceSpace(), cs));
    const CsrSpmm<float> plain(csr_to_space<float, DeviceSpace>(valued));
    EXPECT_EQ(scaled.scaled(), (std::is_same<DeviceSpace, HostSpace>::value));
    const HostVector<float> w = scaled.host_weights();
    ASSERT_EQ(int64_t(w.extent(0)), valued.nnz());
    for (int64_t k = 0; k < valued.nnz(); ++k) ASSERT_EQ(w(k), valued.values(k)) << "entry " << k;
    const Dense x = random_dense(cols, width, gen), y0 = random_dense(rows, width, gen);
    Dense expected = add(matmul(weights, x), y0, 4.0);
    for (double& v : expected.a) v *= 0.5;
    for (KernelPath path : paths(KernelKind::Spmm)) {
      SCOPED_TRACE(kernel_path_name(path));
      Matrix<float> y = to_view<float>(y0), y_plain = to_view<float>(y0);
      scaled.apply(to_view<float>(x), y, 0.5f, 2.0f, path);
      plain.apply(to_view<float>(x), y_plain, 0.5f, 2.0f, path);
      EXPECT_LT(relative_error(from_view(y), expected), 1e-5);
      if (path == KernelPath::Host) {
        EXPECT_EQ(from_view(y).a, from_view(y_plain).a);
      }
    }
  }
  // Scales that do not fit the matrix, or a matrix that has values, are refused.
  const auto a = random_csr<float>(5, 4, 2, -1, gen, true);
  const Vector<double> five("five", 5), four("four", 4), three("three", 3);
  EXPECT_THROW(CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a), four, four), Error);
  EXPECT_THROW(CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a), five, three), Error);
  auto valued = random_csr<float>(5, 4, 2, -1, gen, false);
  EXPECT_THROW(CsrSpmm<float>(csr_to_space<float, DeviceSpace>(valued), five, four), Error);
}

// --overlap ships each finished row chunk while the next computes: a kernel that wrote outside its rows
// would overwrite rows already in flight. Ranges cut through the balanced blocks on purpose.
TEST(Spmm, RowRangesComputeOnlyTheirRows) {
  std::mt19937_64 gen(12);
  const auto a = random_csr<double>(200, 150, 5, 40, gen);
  const Dense x = random_dense(150, 9, gen), expected = matmul(to_dense(a), x);
  const CsrSpmm<double> op(csr_to_space<double, DeviceSpace>(a));
  ASSERT_GT(op.num_blocks(), 2);
  for (KernelPath path : paths(KernelKind::Spmm))
    for (const auto& [r0, r1] :
         std::vector<std::pair<int64_t, int64_t>>{{37, 121}, {0, 1}, {199, 200}, {5, 5}}) {
      SCOPED_TRACE(std::string(kernel_path_name(path)) + " rows " + std::to_string(r0) + ".." +
                   std::to_string(r1));
      Matrix<double> y = to_view<double>(Dense(200, 9, 7.0));
      op.apply_rows(to_view<double>(x), y, r0, r1, 1.0, 0.0, path);
      const Dense got = from_view(y);
      for (int64_t i = 0; i < 200; ++i)
        for (int64_t j = 0; j < 9; ++j)
          ASSERT_NEAR(got(i, j), i >= r0 && i < r1 ? expected(i, j) : 7.0, 1e-12) << i << "," << j;
    }
  Matrix<double> y("y", 200, 9);
  EXPECT_THROW(op.apply_rows(to_view<double>(x), y, 10, 201), Error);
}

// A step's blocks keep their row blocks in buffers the step hands out again (StepUploads::spmm): the
// product is the same, the blocks land in the buffer given (no memory of the matrix's own), and a buffer
// with too few entries is refused.
TEST(Spmm, RowBlocksKeptInAGivenBuffer) {
  std::mt19937_64 gen(13);
  const auto a = random_csr<float>(300, 120, 6, 50, gen);
  const Dense x = random_dense(120, 17, gen), expected = matmul(to_dense(a), x);
  const int64_t entries = CsrSpmm<float>::row_block_entries(300);
  const Vector<int64_t> buffer("row_blocks", size_t(entries + 3));
  Kokkos::deep_copy(buffer, int64_t(-1));
  CsrSpmm<float> kept(csr_to_space<float, DeviceSpace>(a));
  kept.keep_row_blocks_in(buffer);
  const CsrSpmm<float> own(csr_to_space<float, DeviceSpace>(a));
  for (KernelPath path : paths(KernelKind::Spmm)) {
    SCOPED_TRACE(kernel_path_name(path));
    Matrix<float> y = to_view<float>(Dense(300, 17, 0.0)), y_own = to_view<float>(Dense(300, 17, 0.0));
    kept.apply(to_view<float>(x), y, 1.0f, 0.0f, path);
    own.apply(to_view<float>(x), y_own, 1.0f, 0.0f, path);
    EXPECT_LT(relative_error(from_view(y), expected), 1e-5);
    EXPECT_EQ(from_view(y).a, from_view(y_own).a);
  }
  // Balanced into the buffer: its leading entries are the blocks a matrix of its own makes.
  const int64_t blocks = kept.num_blocks();
  ASSERT_EQ(blocks, own.num_blocks());
  const auto held = Kokkos::create_mirror_view_and_copy(HostSpace(), buffer);
  const auto ptr =
      Kokkos::create_mirror_view_and_copy(HostSpace(), csr_to_space<float, DeviceSpace>(a).row_ptr);
  const HostVector<int64_t> reference = balanced_row_blocks(ptr, blocks);
  ASSERT_EQ(int64_t(reference.extent(0)), blocks + 1);
  for (int64_t k = 0; k <= blocks; ++k) EXPECT_EQ(held(k), reference(k)) << k;
  EXPECT_EQ(held(blocks + 1), -1);
  CsrSpmm<float> small(csr_to_space<float, DeviceSpace>(a));
  EXPECT_THROW(small.keep_row_blocks_in(Vector<int64_t>("short", size_t(entries - 1))), Error);
}

TEST(Spmm, RowBlocksBalanceNonzerosAndCoverEveryRow) {
  HostVector<int64_t> ptr("p", 101);
  for (int64_t i = 0; i < 100; ++i) ptr(i + 1) = ptr(i) + (i == 10 ? 1000 : 10);  // one hub row
  const HostVector<int64_t> b = balanced_row_blocks(ptr, 8);
  EXPECT_EQ(b(0), 0);
  EXPECT_EQ(b(b.extent(0) - 1), 100);
  int64_t largest = 0;
  for (size_t k = 0; k + 1 < b.extent(0); ++k) {
    EXPECT_LE(b(k), b(k + 1));
    const int64_t work = ptr(b(k + 1)) - ptr(b(k)) + b(k + 1) - b(k);
    if (b(k + 1) - b(k) > 1) largest = std::max(largest, work);
  }
  EXPECT_LE(largest,
            (2100 + 100) / 8 + 1011);  // a multi-row block never holds more than a share plus one row
}

TYPED_TEST(KernelTest, GemmMatchesDenseForEveryTransposeOnBothPaths) {
  using S = TypeParam;
  std::mt19937_64 gen(9);
  const int64_t m = 37, n = 19, k = 23;
  for (Trans ta : {Trans::No, Trans::Yes})
    for (Trans tb : {Trans::No, Trans::Yes}) {
      const Dense a = ta == Trans::No ? random_dense(m, k, gen) : random_dense(k, m, gen);
      const Dense b = tb == Trans::No ? random_dense(k, n, gen) : random_dense(n, k, gen);
      const Dense c0 = random_dense(m, n, gen);
      Dense expected = matmul(ta == Trans::No ? a : transpose(a), tb == Trans::No ? b : transpose(b));
      for (size_t q = 0; q < expected.a.size(); ++q) expected.a[q] = 1.5 * expected.a[q] - 0.5 * c0.a[q];
      for (KernelPath path : paths(KernelKind::Gemm)) {
        Matrix<S> c = to_view<S>(c0);
        gemm<S>(ta, tb, S(1.5), to_view<S>(a), to_view<S>(b), S(-0.5), c, path);
        EXPECT_LT(relative_error(from_view(c), expected), this->tolerance()) << kernel_path_name(path);
      }
    }
  for (KernelPath path : paths(KernelKind::Gemm)) {
    Matrix<S> c = to_view<S>(Dense(3, 2, 4.0));
    gemm<S>(Trans::No, Trans::No, S(1), Matrix<S>("a", 3, 0), Matrix<S>("b", 0, 2), S(0.5), c,
            path);  // k = 0
    EXPECT_EQ(from_view(c).a, std::vector<double>(6, 2.0));
  }
  Matrix<S> c = to_view<S>(Dense(3, 2, 4.0));
  EXPECT_THROW(gemm<S>(Trans::No, Trans::No, S(1), Matrix<S>("a", 3, 4), Matrix<S>("b", 5, 2), S(0), c),
               Error);
}

namespace {
// x rounded to bf16 (8 significant bits, nearest, ties to even), independently of core/bf16.hpp.
double bf16_reference(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  const double m = std::frexp(double(float(x)), &e);  // the float the kernel sees, m in [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

Dense rounded_to_bf16(Dense x) {
  for (double& v : x.a) v = bf16_reference(v);
  return x;
}

Dense absolute(Dense x) {
  for (double& v : x.a) v = std::fabs(v);
  return x;
}

// Restores fp32 GEMMs however the test ends.
struct Bf16GemmScope {
  Bf16GemmScope() { set_gemm_dtype(GemmDtype::Bf16); }
  ~Bf16GemmScope() { set_gemm_dtype(GemmDtype::F32); }
};
}  // namespace

// --gemm-dtype bf16: host float GEMMs equal a double product of the bf16-rounded operands within fp32
// summation error, and differ from the unrounded product by more than that (so the rounding happened);
// double GEMMs and the team path stay exact.
TEST(Bf16Gemm, RoundsBothOperandsAndSumsInFp32) {
  if (!bf16_gemm_available())
    GTEST_SKIP() << "skipped: no oneDNN in this build, or no bf16 matmul on this CPU";
  const Bf16GemmScope scope;
  std::mt19937_64 gen(11);
  for (const int64_t k : {1, 23, 300})
    for (Trans ta : {Trans::No, Trans::Yes})
      for (Trans tb : {Trans::No, Trans::Yes}) {
        const int64_t m = 37, n = 19;
        const Dense a = ta == Trans::No ? random_dense(m, k, gen) : random_dense(k, m, gen);
        const Dense b = tb == Trans::No ? random_dense(k, n, gen) : random_dense(n, k, gen);
        const Dense c0 = random_dense(m, n, gen);
        const Dense op_a = ta == Trans::No ? a : transpose(a), op_b = tb == Trans::No ? b : transpose(b);
        const Dense exact = matmul(op_a, op_b);
        const Dense rounded = matmul(rounded_to_bf16(op_a), rounded_to_bf16(op_b));
        const Dense magnitude = matmul(absolute(op_a), absolute(op_b));
        for (const auto& [alpha, beta] : {std::pair<float, float>{1.0f, 0.0f}, {1.5f, -0.5f}}) {
          Matrix<float> c = to_view<float>(c0);
          gemm<float>(ta, tb, alpha, to_view<float>(a), to_view<float>(b), beta, c, KernelPath::Host);
          const Dense got = from_view(c);
          double worst_rounded = 0, worst_exact = 0;
          for (size_t q = 0; q < got.a.size(); ++q) {
            const double scale = std::fabs(alpha) * magnitude.a[q] + std::fabs(beta * c0.a[q]) + 1e-30;
            const double reference = alpha * rounded.a[q] + beta * double(float(c0.a[q]));
            worst_rounded = std::max(worst_rounded, std::fabs(got.a[q] - reference) / scale);
            worst_exact =
                std::max(worst_exact, std::fabs(got.a[q] - (alpha * exact.a[q] + beta * c0.a[q])) / scale);
          }
          const double fp32_sums = double(k + 2) * std::ldexp(1.0, -23);
          EXPECT_LE(worst_rounded, fp32_sums) << "k " << k << " alpha " << alpha;
          EXPECT_GT(worst_exact, 4 * fp32_sums) << "k " << k << ": the operands were not rounded";
        }
      }
  // Double GEMMs and the team path are untouched by the setting.
  const Dense a = random_dense(29, 31, gen), b = random_dense(31, 7, gen);
  Matrix<double> cd("c", 29, 7);
  gemm<double>(Trans::No, Trans::No, 1.0, to_view<double>(a), to_view<double>(b), 0.0, cd, KernelPath::Host);
  EXPECT_LT(relative_error(from_view(cd), matmul(a, b)), 1e-12);
  Matrix<float> ct("c", 29, 7);
  gemm<float>(Trans::No, Trans::No, 1.0f, to_view<float>(a), to_view<float>(b), 0.0f, ct, KernelPath::Team);
  EXPECT_LT(relative_error(from_view(ct), matmul(a, b)), 2e-5);
}

// gemm_bf16_operand: A held as bf16 bits gives gemm<float>'s result on A widened, bit for bit, on every
// path; with fp32 GEMMs it widens A into `widened`, with bf16 GEMMs oneDNN reads the bits (`widened` is
// left as it was: no widening pass). Both within fp32 summation error of the dense double product of the
// widened A (and, for bf16 GEMMs, the rounded B).
TEST(Bf16Gemm, OperandHeldAsBitsEqualsTheWidenedOperand) {
  std::mt19937_64 gen(13);
  const int64_t m = 37, n = 19, k = 300;
  const auto check = [&](KernelPath path, bool bf16_gemms) {
    EXPECT_EQ(gemm_reads_bf16_bits(path), bf16_gemms) << kernel_path_name(path);
    for (Trans ta : {Trans::No, Trans::Yes}) {
      SCOPED_TRACE(std::string(kernel_path_name(path)) + (ta == Trans::Yes ? " A^T" : " A"));
      const Dense a = rounded_to_bf16(ta == Trans::No ? random_dense(m, k, gen) : random_dense(k, m, gen));
      const Dense b = random_dense(k, n, gen), c0 = random_dense(m, n, gen), filler(a.rows, a.cols, 7.0);
      Matrix<uint16_t> bits("bits", size_t(a.rows), size_t(a.cols));
      round_to_bf16(to_view<float>(a), bits);
      const Matrix<float> widened = to_view<float>(filler), c = to_view<float>(c0), same = to_view<float>(c0);
      gemm_bf16_operand(ta, Trans::No, 1.5f, bits, to_view<float>(b), -0.5f, c, widened, path);
      gemm<float>(ta, Trans::No, 1.5f, to_view<float>(a), to_view<float>(b), -0.5f, same, path);
      EXPECT_EQ(from_view(c).a, from_view(same).a);
      EXPECT_EQ(from_view(widened).a, bf16_gemms ? filler.a : a.a);
      Dense expected = matmul(ta == Trans::No ? a : transpose(a), bf16_gemms ? rounded_to_bf16(b) : b);
      for (size_t q = 0; q < expected.a.size(); ++q) expected.a[q] = 1.5 * expected.a[q] - 0.5 * c0.a[q];
      EXPECT_LT(relative_error(from_view(c), expected), 1e-5);
    }
  };
  // Empty products (a rank with no rows, an empty block): C = beta C, and A's bits are not read, so the
  // direct path needs no widened copy.
  const auto check_empty = [&](KernelPath path, bool bf16_gemms) {
    for (const auto& [em, en, ek] : {std::tuple{0, 5, 7}, {5, 0, 7}, {5, 6, 0}, {0, 0, 0}}) {
      SCOPED_TRACE(std::string(kernel_path_name(path)) + " " + std::to_string(em) + "x" + std::to_string(en) +
                   "x" + std::to_string(ek));
      const Dense b = random_dense(ek, en, gen), c0 = random_dense(em, en, gen);
      const Matrix<uint16_t> bits("bits", size_t(em), size_t(ek));
      const Dense zeros(em, ek, 0.0);
      const Matrix<float> widened = bf16_gemms ? Matrix<float>() : to_view<float>(zeros),
                          c = to_view<float>(c0);
      Dense expected = from_view(c);
      for (double& v : expected.a) v *= -0.5;
      gemm_bf16_operand(Trans::No, Trans::No, 1.5f, bits, to_view<float>(b), -0.5f, c, widened, path);
      EXPECT_EQ(from_view(c).a, expected.a);
    }
  };
  for (KernelPath path : paths(KernelKind::Gemm)) {
    check(path, false);
    check_empty(path, false);
  }
  if (!bf16_gemm_available()) return;
  const Bf16GemmScope scope;
  check(KernelPath::Host, true);
  check_empty(KernelPath::Host, true);
  check(KernelPath::Team, false);
}

namespace {
// Restores the build's host GEMM library however the test ends.
struct HostGemmScope {
  explicit HostGemmScope(HostGemmLibrary library) { set_host_gemm_library(library); }
  ~HostGemmScope() { set_host_gemm_library(HostGemmLibrary::Auto); }
};
}  // namespace

// --host-gemm: every library the build has computes fp32 host GEMMs against the dense reference for every
// transpose, alpha and beta, including a long reduction (the weight gradient's shape) and beta = 0 over a C
// full of NaN (C is written, not read: the workspaces GEMMs write into hold old values). Auto is oneDNN
// exactly where the build has it, and asking for a missing oneDNN is a clear error. Device builds have no
// host GEMM path (BLAS needs host memory): there only the setting is checked.
TEST(HostGemm, EveryLibraryMatchesDense) {
  EXPECT_EQ(host_gemm_library(), onednn_gemm_available() ? HostGemmLibrary::OneDnn : HostGemmLibrary::Blas);
  if (!onednn_gemm_available()) {
    EXPECT_THROW(set_host_gemm_library(HostGemmLibrary::OneDnn), Error);
    EXPECT_EQ(host_gemm_library(), HostGemmLibrary::Blas);
  }
  EXPECT_EQ(host_gemm_library_name(HostGemmLibrary::OneDnn), std::string("onednn"));
  if (!kernel_path_available(KernelPath::Host, KernelKind::Gemm)) return;
  std::vector<HostGemmLibrary> libraries{HostGemmLibrary::Blas};
  if (onednn_gemm_available()) libraries.push_back(HostGemmLibrary::OneDnn);
  std::mt19937_64 gen(21);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (HostGemmLibrary library : libraries) {
    const HostGemmScope scope(library);
    ASSERT_EQ(host_gemm_library(), library);
    for (const auto& [m, n, k] :
         {std::tuple<int64_t, int64_t, int64_t>{37, 19, 23}, {5, 40, 2000}, {1, 3, 1}})
      for (Trans ta : {Trans::No, Trans::Yes})
        for (Trans tb : {Trans::No, Trans::Yes}) {
          const Dense a = ta == Trans::No ? random_dense(m, k, gen) : random_dense(k, m, gen);
          const Dense b = tb == Trans::No ? random_dense(k, n, gen) : random_dense(n, k, gen);
          const Dense c0 = random_dense(m, n, gen);
          const Dense ab = matmul(ta == Trans::No ? a : transpose(a), tb == Trans::No ? b : transpose(b));
          Dense expected = ab;
          for (size_t q = 0; q < expected.a.size(); ++q) expected.a[q] = 1.5 * ab.a[q] - 0.5 * c0.a[q];
          Matrix<float> c = to_view<float>(c0);
          gemm<float>(ta, tb, 1.5f, to_view<float>(a), to_view<float>(b), -0.5f, c, KernelPath::Host);
          EXPECT_LT(relative_error(from_view(c), expected), 2e-5) << host_gemm_library_name(library);
          Kokkos::deep_copy(c, nan);
          gemm<float>(ta, tb, 1.0f, to_view<float>(a), to_view<float>(b), 0.0f, c, KernelPath::Host);
          EXPECT_LT(relative_error(from_view(c), ab), 2e-5) << host_gemm_library_name(library) << " beta 0";
        }
  }
}

#if defined(_OPENMP)
namespace {
// Sets OpenMP's thread count for the GEMMs the test calls (Kokkos' own pool keeps its size).
struct OmpThreadsScope {
  explicit OmpThreadsScope(int threads) : before(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~OmpThreadsScope() { omp_set_num_threads(before); }
  int before;
};
}  // namespace

// oneDNN builds cut tall products over the threads themselves: C's rows in chunks (NN, NT), a long
// reduction (TN, a weight gradient) in chunks whose partial products are summed in chunk order. Shapes just
// past the cuts (2048-row chunks; 8192-row reduction chunks, at least two per thread) against the dense
// reference for beta 0 over NaN and beta != 0, and the same bits on 2 and 3 threads.
TEST(HostGemm, ThreadSplitProductsMatchDenseAndDoNotDependOnTheThreadCount) {
  if (!onednn_gemm_available() || !kernel_path_available(KernelPath::Host, KernelKind::Gemm))
    GTEST_SKIP() << "no oneDNN in this build";
  const HostGemmScope scope(HostGemmLibrary::OneDnn);
  std::mt19937_64 gen(33);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    Trans ta, tb;
    int64_t m, n, k;
  };
  for (const Case& c :
       {Case{Trans::No, Trans::No, 2 * 2048 + 37, 19, 23}, Case{Trans::No, Trans::Yes, 4133, 9, 40},
        Case{Trans::Yes, Trans::No, 7, 5, 6 * 8192 + 123}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k));
    const Dense a = c.ta == Trans::No ? random_dense(c.m, c.k, gen) : random_dense(c.k, c.m, gen);
    const Dense b = c.tb == Trans::No ? random_dense(c.k, c.n, gen) : random_dense(c.n, c.k, gen);
    const Dense c0 = random_dense(c.m, c.n, gen);
    const Dense ab = matmul(c.ta == Trans::No ? a : transpose(a), c.tb == Trans::No ? b : transpose(b));
    Dense expected = ab;
    for (size_t q = 0; q < expected.a.size(); ++q) expected.a[q] = 1.5 * ab.a[q] - 0.5 * c0.a[q];
    std::vector<std::vector<double>> bits;
    for (int threads : {3, 2}) {
      const OmpThreadsScope omp(threads);
      if (c.ta == Trans::Yes) {
        EXPECT_GT(host_gemm_scratch_bytes(GemmDtype::F32, c.m, c.n, c.k), 0.0);
      }
      Matrix<float> out = to_view<float>(c0);
      gemm<float>(c.ta, c.tb, 1.5f, to_view<float>(a), to_view<float>(b), -0.5f, out, KernelPath::Host);
      EXPECT_LT(relative_error(from_view(out), expected), 2e-5) << threads << " threads";
      Kokkos::deep_copy(out, nan);
      gemm<float>(c.ta, c.tb, 1.0f, to_view<float>(a), to_view<float>(b), 0.0f, out, KernelPath::Host);
      EXPECT_LT(relative_error(from_view(out), ab), 2e-5) << threads << " threads, beta 0";
      bits.push_back(from_view(out).a);
    }
    EXPECT_EQ(bits[0], bits[1]);
  }
  // A reduction of fewer than two chunks per thread is the library's, with nothing kept; a weight
  // gradient over 169343 rows keeps its 21 chunks' products.
  const OmpThreadsScope omp(2);
  EXPECT_EQ(host_gemm_scratch_bytes(GemmDtype::F32, 256, 256, 3 * 8192), 0.0);
  EXPECT_EQ(host_gemm_scratch_bytes(GemmDtype::F32, 256, 256, 169343), 21.0 * 256 * 256 * 4);
  EXPECT_EQ(host_gemm_scratch_bytes(GemmDtype::Bf16, 256, 256, 169343), 0.0);  // one oneDNN matmul
}
#endif

// Values bf16 holds exactly (and the specials) widen back to themselves, bit for bit, in whole matrices
// (one flat pass) and in column slices of wider ones (strided rows), leaving the columns outside untouched.
TEST(WidenBf16, EveryValueBackExactlyInWholeAndStridedMatrices) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float tiny = std::ldexp(1.0f, -126), subnormal = std::ldexp(1.0f, -130);
  const std::vector<float> exact{0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, -1.0f, -tiny, inf, -inf, nan, subnormal};
  const auto bits_of = [](float v) {  // the float's top 16 bits: the bf16 of a value it holds exactly
    uint32_t u;
    std::memcpy(&u, &v, sizeof(u));
    return uint16_t(u >> 16);
  };
  const auto same_bits = [](float a, float b) { return std::memcmp(&a, &b, sizeof(a)) == 0; };
  const int64_t rows = 37, cols = 13, first = 3, width = 7;  // the slice: columns [first, first + width)
  Matrix<uint16_t> bits("bits", size_t(rows), size_t(cols));
  Matrix<float> out("out", size_t(rows), size_t(cols));
  auto host_bits = Kokkos::create_mirror_view(bits);
  std::vector<float> value(size_t(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float v = exact[size_t(i * cols + j) % exact.size()];
      if (v == -1.0f) v = float((i * cols + j) % 128) * 0.25f;  // -1 makes room for ordinary values (7 bits)
      value[size_t(i * cols + j)] = v;
      host_bits(i, j) = bits_of(v);
    }
  Kokkos::deep_copy(bits, host_bits);
  widen_bf16(bits, out);
  auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), out);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) ASSERT_TRUE(same_bits(host(i, j), value[size_t(i * cols + j)])) << i;
  // A column slice of each (rows strided by `cols`): only its entries are written.
  Kokkos::deep_copy(out, -7.0f);
  const auto slice = std::make_pair(first, first + width);
  widen_bf16(Kokkos::subview(bits, Kokkos::ALL(), slice), Kokkos::subview(out, Kokkos::ALL(), slice));
  Kokkos::deep_copy(host, out);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const bool inside = j >= first && j < first + width;
      ASSERT_TRUE(same_bits(host(i, j), inside ? value[size_t(i * cols + j)] : -7.0f)) << i << " " << j;
    }
  EXPECT_THROW(widen_bf16(bits, Kokkos::subview(out, Kokkos::ALL(), slice)), Error);
}

// round_to_bf16: nearest with ties to even, written out by hand for the cases that tell the rule (a tie
// below and above an even neighbour, just past a tie, the largest float rounding to infinity), signed zeros,
// infinities and NaN; in a whole matrix and in a column slice (strided rows), the columns outside untouched.
TEST(RoundToBf16, NearestTiesToEvenInWholeAndStridedMatrices) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<float, uint16_t>> cases{
      {1.0f, 0x3F80},
      {1.0f + std::ldexp(1.0f, -8), 0x3F80},                          // tie: down to the even 1.0
      {1.0f + 3 * std::ldexp(1.0f, -8), 0x3F82},                      // tie: up to the even 1 + 2^-6
      {1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20), 0x3F81},  // past the tie: up
      {-2.5f, 0xC020},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {inf, 0x7F80},
      {-inf, 0xFF80},
      {std::numeric_limits<float>::max(), 0x7F80},
      {nan, 0x7FC0}};  // any NaN: checked as exponent all ones with a nonzero fraction
  const auto agrees = [](uint16_t got, uint16_t want) {
    const bool nan_bits = (want & 0x7F80) == 0x7F80 && (want & 0x7F) != 0;
    return nan_bits ? (got & 0x7F80) == 0x7F80 && (got & 0x7F) != 0 : got == want;
  };
  const int64_t rows = 19, cols = 9, first = 2, width = 4;
  Matrix<float> x("x", size_t(rows), size_t(cols));
  Matrix<uint16_t> bits("bits", size_t(rows), size_t(cols));
  auto host_x = Kokkos::create_mirror_view(x);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) host_x(i, j) = cases[size_t(i * cols + j) % cases.size()].first;
  Kokkos::deep_copy(x, host_x);
  round_to_bf16(x, bits);
  auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), bits);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      ASSERT_TRUE(agrees(host(i, j), cases[size_t(i * cols + j) % cases.size()].second)) << i << " " << j;
  Kokkos::deep_copy(bits, uint16_t(0x1234));
  const auto slice = std::make_pair(first, first + width);
  round_to_bf16(Kokkos::subview(x, Kokkos::ALL(), slice), Kokkos::subview(bits, Kokkos::ALL(), slice));
  Kokkos::deep_copy(host, bits);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const bool inside = j >= first && j < first + width;
      ASSERT_TRUE(agrees(host(i, j), inside ? cases[size_t(i * cols + j) % cases.size()].second : 0x1234))
          << i << " " << j;
    }
  EXPECT_THROW(round_to_bf16(x, Kokkos::subview(bits, Kokkos::ALL(), slice)), Error);
}

// The epilogue's ReLU is max(v, floor), written so it compiles without a branch on the sign; it must still
// pass NaN and -0 through and leave -inf alone without ReLU, on every path, with and without dropout.
TEST(Epilogue, ReluPassesNanAndSignedZeroAndNoReluKeepsInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row{nan, -0.0f, 0.0f, -1.5f, 2.5f, -inf, inf, -1e-30f, 1e-30f};
  const int64_t cols = int64_t(row.size());
  for (KernelPath path : paths(KernelKind::Elementwise))
    for (bool relu : {false, true})
      for (float rate : {0.0f, 0.25f}) {
        const DropoutMask dropout = rate > 0 ? DropoutMask(rate, 9, 2) : DropoutMask();
        Matrix<float> y("y", 1, size_t(cols));
        auto host = Kokkos::create_mirror_view(y);
        for (int64_t j = 0; j < cols; ++j) host(0, j) = row[size_t(j)];
        Kokkos::deep_copy(y, host);
        bias_relu_dropout_forward<float>(y, Vector<const float>(), relu, dropout, path);
        Kokkos::deep_copy(host, y);
        for (int64_t j = 0; j < cols; ++j) {
          const float v = row[size_t(j)] + 0.0f;  // what the kernel adds without a bias (-0 + 0 is +0)
          const float activated = relu && v < 0.0f ? 0.0f : v;  // the plain definition
          const bool keep = dropout.keep(0, j);
          const float expected = !dropout.active() ? activated : activated * (keep ? dropout.scale() : 0.0f);
          const float got = host(0, j);
          if (std::isnan(expected)) {
            EXPECT_TRUE(std::isnan(got)) << "column " << j << " relu " << relu << " rate " << rate;
          } else {
            EXPECT_EQ(got, expected) << "column " << j << " relu " << relu << " rate " << rate;
            EXPECT_EQ(std::signbit(got), std::signbit(expected)) << "column " << j << " relu " << relu;
          }
        }
      }
}

TYPED_TEST(KernelTest, BiasReluDropoutForwardAndBackward) {
  using S = TypeParam;
  std::mt19937_64 gen(3);
  // A block at global offset (100, 3); rows wider than one run of mask blocks (kDropoutRun: 256 columns),
  // starting mid-block, so that runs are cut at both ends. With ReLU the backward reads the kept entries
  // off the forward output, without it from the mask: both against the mask's own keep().
  struct Shape {
    int64_t rows, cols, row_offset, col_offset;
    bool relu;
  };
  for (const Shape shape : {Shape{40, 21, 100, 3, true}, Shape{5, 600, 7, 13, true},
                            Shape{40, 21, 100, 3, false}, Shape{5, 600, 7, 13, false}}) {
    const bool relu = shape.relu;
    SCOPED_TRACE(relu ? "relu" : "no relu");
    const int64_t rows = shape.rows, cols = shape.cols;
    const Dense x = random_dense(rows, cols, gen), g = random_dense(rows, cols, gen),
                bias = random_dense(1, cols, gen);
    const DropoutMask dropout(0.3f, 17, 5, shape.row_offset, shape.col_offset);
    const auto b = Kokkos::subview(to_view<S>(bias), 0, Kokkos::ALL());
    Vector<S> bias_vec("bias", size_t(cols));
    Kokkos::deep_copy(bias_vec, b);
    std::vector<Dense> outs, grads;
    for (KernelPath path : paths(KernelKind::Elementwise)) {
      Matrix<S> y = to_view<S>(x);
      bias_relu_dropout_forward<S>(y, bias_vec, relu, dropout, path);
      Matrix<S> grad = to_view<S>(g);
      bias_relu_dropout_backward<S>(grad, y, relu, dropout, path);
      outs.push_back(from_view(y));
      grads.push_back(from_view(grad));
    }
    for (size_t p = 1; p < outs.size(); ++p) {  // no reduction: every path computes the same bits
      EXPECT_EQ(outs[p].a, outs[0].a);
      EXPECT_EQ(grads[p].a, grads[0].a);
    }
    const Dense out = outs[0], gin = grads[0];
    int64_t kept = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = dropout.keep(i, j);
        kept += keep;
        const double pre = x(i, j) + bias(0, j);
        const bool passes = keep && (pre > 0 || !relu);
        const double expected = passes ? pre / 0.7 : 0.0;
        ASSERT_NEAR(out(i, j), expected, 1e-5 * (1 + std::abs(expected))) << i << ", " << j;
        ASSERT_NEAR(gin(i, j), passes ? g(i, j) / 0.7 : 0.0, 1e-5) << i << ", " << j;
      }
    EXPECT_NEAR(double(kept) / double(rows * cols), 0.7, 0.08);
    // The mask is a function of global coordinates: the same entries seen from offset (0, 0) agree.
    const DropoutMask whole(0.3f, 17, 5);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        ASSERT_EQ(dropout.keep(i, j), whole.keep(i + shape.row_offset, j + shape.col_offset));
  }
}

TEST(DropoutMask, KeepsTheRightFractionAndDiffersByStream) {
  const DropoutMask a(0.5f, 1, 1), b(0.5f, 1, 2), none;
  int64_t kept = 0, same = 0;
  const int64_t n = 200000;
  for (int64_t k = 0; k < n; ++k) {
    kept += a.keep(k / 100, k % 100);
    same += a.keep(k / 100, k % 100) == b.keep(k / 100, k % 100);
    ASSERT_TRUE(none.keep(k, k));
  }
  EXPECT_NEAR(double(kept) / n, 0.5, 0.005);
  EXPECT_NEAR(double(same) / n, 0.5, 0.005);
}

TYPED_TEST(KernelTest, SoftmaxCrossEntropyMatchesReferenceAndCountsAccuracy) {
  using S = TypeParam;
  std::mt19937_64 gen(11);
  const int64_t rows = 30, classes = 6;
  const Dense logits = random_dense(rows, classes, gen, 4.0);
  std::vector<int64_t> labels(rows);
  std::vector<uint8_t> mask(rows);
  for (int64_t i = 0; i < rows; ++i)
    labels[size_t(i)] = i % 7 == 0 ? -1 : int64_t(gen() % classes), mask[size_t(i)] = i % 3 != 0;
  HostVector<int64_t> hl("labels", rows);
  HostVector<uint8_t> hm("mask", rows);
  for (int64_t i = 0; i < rows; ++i) hl(i) = labels[size_t(i)], hm(i) = mask[size_t(i)];
  const auto dl = Kokkos::create_mirror_view_and_copy(DeviceSpace(), hl);
  const auto dm = Kokkos::create_mirror_view_and_copy(DeviceSpace(), hm);
  Dense ref_grad;
  const double ref = softmax_cross_entropy(logits, labels, mask, &ref_grad);
  Matrix<S> grad("grad", rows, classes);
  int64_t count = 0;
  for (int64_t i = 0; i < rows; ++i) count += mask[size_t(i)] && labels[size_t(i)] >= 0;
  const auto [sum, n] =
      masked_softmax_cross_entropy<S>(to_view<S>(logits), dl, dm, S(1.0 / double(count)), grad);
  EXPECT_EQ(n, count);
  EXPECT_NEAR(sum / double(n), ref, 1e-6);
  EXPECT_LT(relative_error(from_view(grad), ref_grad), this->tolerance());
  int64_t correct = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (!mask[size_t(i)] || labels[size_t(i)] < 0) continue;
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (logits(i, j) > logits(i, best)) best = j;
    correct += best == labels[size_t(i)];
  }
  const auto [hits, total] = count_correct<S>(to_view<S>(logits), dl, dm);
  EXPECT_EQ(hits, correct);
  EXPECT_EQ(total, count);
}

// Column sums at the block edges: no rows (a rank with an empty block), one row, exactly one 32-row block,
// one more row than that, on every path against a plain sum.
TYPED_TEST(KernelTest, ColumnSumsAtBlockEdges) {
  using S = TypeParam;
  std::mt19937_64 gen(5);
  for (int64_t rows : {int64_t(0), int64_t(1), int64_t(32), int64_t(33)}) {
    const Dense x = random_dense(rows, 9, gen);
    for (KernelPath path : paths(KernelKind::Elementwise)) {
      SCOPED_TRACE(std::string(kernel_path_name(path)) + ", rows " + std::to_string(rows));
      Vector<S> sums("sums", 9);
      Kokkos::deep_copy(sums, S(7));  // overwritten, not added to
      column_sums<S>(to_view<S>(x), sums, Vector<S>(), path);
      const auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), sums);
      for (int64_t j = 0; j < 9; ++j) {
        double ref = 0;
        for (int64_t i = 0; i < rows; ++i) ref += double(S(x(i, j)));
        EXPECT_NEAR(double(h(j)), ref, 1e-5) << "column " << j;
      }
    }
  }
}

TYPED_TEST(KernelTest, ReductionsAndScaling) {
  using S = TypeParam;
  std::mt19937_64 gen(2);
  // 1100 rows: three levels of 32-row blocks in a column reduction (35 partial rows, 2, 1) and a partial
  // last block; 21 columns: a partial 8-column chunk.
  const int64_t rows = 1100, cols = 21;
  const Dense x = random_dense(rows, cols, gen), y = random_dense(rows, cols, gen);
  std::vector<Dense> column_results;
  for (KernelPath path : paths(KernelKind::Elementwise)) {
    SCOPED_TRACE(kernel_path_name(path));
    Vector<S> cs("cs", cols), cq("cq", cols), cd("cd", cols), rq("rq", rows), rd("rd", rows);
    column_sums<S>(to_view<S>(x), cs, cq, path);
    column_dot<S>(to_view<S>(x), to_view<S>(y), cd, path);
    row_sums_sq<S>(to_view<S>(x), rq, path);
    row_dot<S>(to_view<S>(x), to_view<S>(y), rd, path);
    // Centered squares around a shift of 1e4 added to every entry: no cancellation.
    Dense shifted = x;
    for (double& v : shifted.a) v += 1e4;
    Vector<S> mean("mean", cols), cc("cc", cols);
    {
      auto hm = Kokkos::create_mirror_view(mean);
      for (int64_t j = 0; j < cols; ++j) {
        double m = 0;
        for (int64_t i = 0; i < rows; ++i) m += shifted(i, j) / double(rows);
        hm(j) = S(m);
      }
      Kokkos::deep_copy(mean, hm);
    }
    column_centered_sums_sq<S>(to_view<S>(shifted), mean, cc, path);
    const auto hcc = Kokkos::create_mirror_view_and_copy(HostSpace(), cc);
    const auto hmean = Kokkos::create_mirror_view_and_copy(HostSpace(), mean);
    for (int64_t j = 0; j < cols; ++j) {
      double q = 0;
      for (int64_t i = 0; i < rows; ++i) {
        const double d = double(S(shifted(i, j))) - double(hmean(j));
        q += d * d;
      }
      EXPECT_NEAR(hcc(j), q, 1e-3 * q) << "column " << j;
    }
    const auto hcs = Kokkos::create_mirror_view_and_copy(HostSpace(), cs);
    const auto hcq = Kokkos::create_mirror_view_and_copy(HostSpace(), cq);
    const auto hcd = Kokkos::create_mirror_view_and_copy(HostSpace(), cd);
    const auto hrq = Kokkos::create_mirror_view_and_copy(HostSpace(), rq);
    const auto hrd = Kokkos::create_mirror_view_and_copy(HostSpace(), rd);
    Dense columns(3, cols);
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0, q = 0, d = 0, sum_abs = 0, d_abs = 0;
      for (int64_t i = 0; i < rows; ++i) {
        sum += x(i, j), q += x(i, j) * x(i, j), d += x(i, j) * y(i, j);
        sum_abs += std::abs(x(i, j)), d_abs += std::abs(x(i, j) * y(i, j));
      }
      // Blocked summation: each term passes at most 32 + 32 + 2 additions, so |error| <= 66 u sum |terms|.
      const double u = std::numeric_limits<S>::epsilon() / 2;
      EXPECT_NEAR(hcs(j), sum, 1e-6 + 70 * u * sum_abs) << "column " << j;
      EXPECT_NEAR(hcq(j), q, 1e-6 + 70 * u * q) << "column " << j;
      EXPECT_NEAR(hcd(j), d, 1e-6 + 70 * u * d_abs) << "column " << j;
      columns(0, j) = hcs(j), columns(1, j) = hcq(j), columns(2, j) = hcd(j);
    }
    column_results.push_back(columns);
    for (int64_t i = 0; i < rows; ++i) {
      double q = 0, d = 0;
      for (int64_t j = 0; j < cols; ++j) q += x(i, j) * x(i, j), d += x(i, j) * y(i, j);
      EXPECT_NEAR(hrq(i), q, 1e-5);
      EXPECT_NEAR(hrd(i), d, 1e-5);
    }
    Matrix<S> z = to_view<S>(y);
    axpby<S>(S(2), to_view<S>(x), S(-1), z, path);
    EXPECT_LT(relative_error(from_view(z), add(add(x, x), y, -1.0)), this->tolerance());
    // The fused backward epilogue + column sums equals the two separate kernels.
    const DropoutMask dropout(0.25f, 3, 9, 0, 5);
    Matrix<S> fused = to_view<S>(y), separate = to_view<S>(y);
    Vector<S> fused_sums("f", cols), separate_sums("s", cols);
    relu_dropout_backward_column_sums<S>(fused, to_view<S>(x), true, dropout, fused_sums, path);
    bias_relu_dropout_backward<S>(separate, to_view<S>(x), true, dropout, path);
    column_sums<S>(separate, separate_sums, Vector<S>(), path);
    EXPECT_EQ(from_view(fused).a, from_view(separate).a);
    const auto hf = Kokkos::create_mirror_view_and_copy(HostSpace(), fused_sums);
    const auto hs = Kokkos::create_mirror_view_and_copy(HostSpace(), separate_sums);
    for (int64_t j = 0; j < cols; ++j) EXPECT_EQ(hf(j), hs(j));
  }
  // Column reductions use the same fixed row blocks on every path: the same bits.
  for (size_t p = 1; p < column_results.size(); ++p) EXPECT_EQ(column_results[p].a, column_results[0].a);
}

// BatchNorm's statistics in one pass (sums and sums of squares in double): the mean and 1 / sqrt(var + eps)
// against a two-pass double computation, with every entry 1e4 spreads from zero (where sum x^2 - n mean^2
// in float returns garbage), on shapes with one row, a partial 32-row block and three reduction levels;
// every path gives the same bits; the running statistics move by the momentum.
TEST(BatchNormKernels, OnePassStatisticsAreAccurateFarFromZero) {
  std::mt19937_64 gen(5);
  std::normal_distribution<double> spread(0.0, 1.0);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 3}, {45, 5}, {1100, 13}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
    Dense x(rows, cols);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) x(i, j) = double(float(1e4 + double(j) + 0.5 * spread(gen)));
    const float eps = 1e-5f, momentum = 0.1f;
    std::vector<std::vector<float>> results;
    for (KernelPath path : paths(KernelKind::Elementwise)) {
      SCOPED_TRACE(kernel_path_name(path));
      Vector<double> sums("sums", size_t(2 * cols));
      batch_norm_sums(to_view<float>(x), sums, path);
      Vector<float> mean("mean", cols), invstd("invstd", cols), running_mean("rm", cols),
          running_var("rv", cols);
      Kokkos::deep_copy(running_var, 1.0f);
      batch_norm_statistics(sums, rows, eps, momentum, mean, invstd, running_mean, running_var);
      const auto hm = Kokkos::create_mirror_view_and_copy(HostSpace(), mean);
      const auto hi = Kokkos::create_mirror_view_and_copy(HostSpace(), invstd);
      const auto hrm = Kokkos::create_mirror_view_and_copy(HostSpace(), running_mean);
      const auto hrv = Kokkos::create_mirror_view_and_copy(HostSpace(), running_var);
      std::vector<float> bits;
      for (int64_t j = 0; j < cols; ++j) {
        double mu = 0, var = 0;
        for (int64_t i = 0; i < rows; ++i) mu += x(i, j) / double(rows);
        for (int64_t i = 0; i < rows; ++i) var += (x(i, j) - mu) * (x(i, j) - mu) / double(rows);
        EXPECT_NEAR(hm(j), mu, 1e-7 * mu) << "column " << j;
        const double want = 1.0 / std::sqrt(var + double(eps));
        EXPECT_NEAR(hi(j), want, 1e-5 * want) << "column " << j;
        EXPECT_NEAR(hrm(j), momentum * mu, 1e-6 * mu) << "column " << j;
        const double unbiased = rows > 1 ? var * double(rows) / double(rows - 1) : var;
        EXPECT_NEAR(hrv(j), (1 - momentum) + momentum * unbiased, 1e-4) << "column " << j;
        bits.insert(bits.end(), {hm(j), hi(j), hrm(j), hrv(j)});
      }
      results.push_back(bits);
    }
    for (size_t p = 1; p < results.size(); ++p) EXPECT_EQ(results[p], results[0]);
  }
}

// The norms' backward sums (the epilogue's derivative applied to g in place, then dbeta and dgamma), one pass
// over g on the host path and two on the team path: the same bits on every path, the rewritten g equal to
// the epilogue's own backward, and both sums within float's blocked-summation bound of a double sum.
TEST(NormKernels, BackwardSumsEqualOnEveryPath) {
  std::mt19937_64 gen(6);
  const int64_t rows = 1100, cols = 21;
  const Dense g = random_dense(rows, cols, gen), z = random_dense(rows, cols, gen),
              out = random_dense(rows, cols, gen);
  std::vector<float> mean_h(cols), invstd_h(cols);
  for (int64_t j = 0; j < cols; ++j) mean_h[size_t(j)] = 0.1f * float(j), invstd_h[size_t(j)] = 1.5f;
  Vector<float> mean("mean", cols), invstd("invstd", cols);
  Kokkos::deep_copy(mean, Kokkos::View<float*, HostSpace, Kokkos::MemoryUnmanaged>(mean_h.data(), cols));
  Kokkos::deep_copy(invstd, Kokkos::View<float*, HostSpace, Kokkos::MemoryUnmanaged>(invstd_h.data(), cols));
  const NormEpilogue epilogue{true, DropoutMask(0.25f, 3, 9, 0, 5)};
  std::vector<std::vector<float>> results;
  for (KernelPath path : paths(KernelKind::Elementwise)) {
    SCOPED_TRACE(kernel_path_name(path));
    Matrix<float> fused = to_view<float>(g), separate = to_view<float>(g);
    Vector<float> dbeta("dbeta", cols), dgamma("dgamma", cols);
    batch_norm_backward_sums(fused, to_view<float>(out), to_view<float>(z), mean, invstd, epilogue, dbeta,
                             dgamma, path);
    bias_relu_dropout_backward<float>(separate, to_view<float>(out), true, epilogue.dropout, path);
    const Dense masked = from_view(separate);
    EXPECT_EQ(from_view(fused).a, masked.a);
    std::vector<float> bits;
    // Both sums within float's blocked-summation bound of double sums of the masked gradient times xhat.
    const auto expect_sums = [&](const auto& xhat_of) {
      const auto hb = Kokkos::create_mirror_view_and_copy(HostSpace(), dbeta);
      const auto hg = Kokkos::create_mirror_view_and_copy(HostSpace(), dgamma);
      const double u = std::numeric_limits<float>::epsilon() / 2;
      for (int64_t j = 0; j < cols; ++j) {
        double b = 0, c = 0, b_abs = 0, c_abs = 0;
        for (int64_t i = 0; i < rows; ++i) {
          const double xhat = xhat_of(i, j);
          b += masked(i, j), c += masked(i, j) * xhat;
          b_abs += std::abs(masked(i, j)), c_abs += std::abs(masked(i, j) * xhat);
        }
        EXPECT_NEAR(hb(j), b, 1e-6 + 70 * u * b_abs) << "column " << j;
        EXPECT_NEAR(hg(j), c, 1e-6 + 72 * u * c_abs) << "column " << j;
        bits.push_back(hb(j)), bits.push_back(hg(j));
      }
    };
    expect_sums([&](int64_t i, int64_t j) {
      return double((float(z(i, j)) - mean_h[size_t(j)]) * invstd_h[size_t(j)]);
    });
    // RMSNorm's, whose xhat is z times the row's scale.
    Matrix<float> rms = to_view<float>(g);
    Vector<float> rinv("rinv", rows);
    Kokkos::deep_copy(rinv, 0.75f);
    rms_norm_backward_sums(rms, to_view<float>(out), to_view<float>(z), rinv, epilogue, dbeta, dgamma, path);
    EXPECT_EQ(from_view(rms).a, masked.a);
    expect_sums([&](int64_t i, int64_t j) { return double(float(z(i, j)) * 0.75f); });
    results.push_back(bits);
  }
  for (size_t p = 1; p < results.size(); ++p) EXPECT_EQ(results[p], results[0]);
}

namespace {

// The distance in floats between two finite floats of the same sign.
int64_t ulps_apart(float a, float b) {
  int32_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return std::llabs(int64_t(x) - int64_t(y));
}

}  // namespace

// The attention kernels' exp and expm1 against double precision rounded to float: every 4099th float of
// [-88, 88] and every float of the stretches where their formulas change (around 0, +-0.25 where expm1
// switches series, the ends of the range). Measured over every 7th float of the range and every float of
// [-1e-3, 1e-3]: exp within 1 ulp, expm1 within 4 (its largest error is at +-ln2/2, from exp's there).
TEST(FastMath, ExpAndExpm1WithinTheirStatedUlps) {
  int64_t worst_exp = 0, worst_expm1 = 0;
  float at_exp = 0, at_expm1 = 0;
  const auto check = [&](float x) {
    const double e = std::exp(double(x));
    if (e >= double(std::numeric_limits<float>::min()) && e <= double(std::numeric_limits<float>::max())) {
      const int64_t u = ulps_apart(impl::exp_approx(x), float(e));
      if (u > worst_exp) worst_exp = u, at_exp = x;
    }
    const float m = float(std::expm1(double(x))), got = impl::expm1_approx(x);
    const int64_t u = m == 0.0f ? (got == 0.0f ? 0 : INT32_MAX)
                                : (std::signbit(m) == std::signbit(got) ? ulps_apart(got, m) : INT32_MAX);
    if (u > worst_expm1) worst_expm1 = u, at_expm1 = x;
  };
  // Floats by their bit patterns: [0, 88] upwards from +0, [-88, 0] upwards from -0 (a sign flip).
  const auto bits_of = [](float x) {
    int32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
  };
  const auto from_bits = [](int32_t b) {
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
  };
  for (int32_t b = 0; b <= bits_of(88.0f); b += 4099) check(from_bits(b)), check(-from_bits(b));
  for (const float centre : {0.0f, 0.25f, -0.25f, 0.34657359f, -0.34657359f, -87.3365f, 88.7228f}) {
    const int32_t c = bits_of(std::abs(centre));
    for (int32_t b = std::max(0, c - 20000); b <= c + 20000; ++b)
      check(std::signbit(centre) ? -from_bits(b) : from_bits(b));
  }
  EXPECT_LE(worst_exp, 2) << "at " << at_exp;
  EXPECT_LE(worst_expm1, 4) << "at " << at_expm1;
  // Below the smallest normal float e^x is 0, past the largest +inf; NaN stays NaN.
  EXPECT_EQ(impl::exp_approx(-88.0f), 0.0f);
  EXPECT_EQ(impl::exp_approx(-1000.0f), 0.0f);
  EXPECT_EQ(impl::exp_approx(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(impl::exp_approx(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(impl::exp_approx(0.0f), 1.0f);
  EXPECT_EQ(impl::expm1_approx(0.0f), 0.0f);
  EXPECT_EQ(impl::expm1_approx(-100.0f), -1.0f);
}
