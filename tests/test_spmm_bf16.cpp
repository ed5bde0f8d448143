// SPDX-License-Identifier: BSD-3-Clause
// SpMM on bf16 inputs (CsrSpmm::apply_bf16): X held as bf16 bits, widened as each entry is read, summed in
// fp32. Against the dense double reference of A times the values the bits stand for (bound: fp32 sums), and
// bit for bit the fp32 product of the widened X on the same kernel (so a bf16 run can be checked against an
// fp32 run on rounded rows), on every path this build has: valued, pattern and degree-scaled matrices, empty
// rows, a row holding every column, widths 1 to 33.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "reference/dense.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/kernels/spmm.hpp"

using namespace tessera;
using namespace tessera::reference;

namespace {

std::vector<KernelPath> spmm_paths() {
  std::vector<KernelPath> out;
  for (KernelPath p : {KernelPath::Host, KernelPath::Team, KernelPath::Vendor})
    if (kernel_path_available(p, KernelKind::Spmm)) out.push_back(p);
  return out;
}

// A random X as bf16 bits, with the values they stand for decoded independently of core/bf16.hpp.
struct Bf16Input {
  Matrix<uint16_t> bits;
  Dense values;
};

Bf16Input random_bf16(int64_t rows, int64_t cols, std::mt19937_64& gen) {
  const Dense x = random_dense(rows, cols, gen);
  Bf16Input in{Matrix<uint16_t>("bits", size_t(rows), size_t(cols)), Dense(rows, cols)};
  auto host = Kokkos::create_mirror_view(in.bits);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const uint16_t b = to_bf16(float(x(i, j)));
      host(i, j) = b;
      const int exponent = (b >> 7) & 0xff;  // random_dense's values are normal or zero
      const double magnitude = exponent == 0 ? 0.0 : std::ldexp(1.0 + (b & 0x7f) / 128.0, exponent - 127);
      in.values(i, j) = (b & 0x8000) ? -magnitude : magnitude;
    }
  Kokkos::deep_copy(in.bits, host);
  return in;
}

Matrix<float> widened(const Matrix<uint16_t>& bits) {
  auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), bits);
  HostMatrix<float> out("widened", host.extent(0), host.extent(1));
  for (size_t i = 0; i < host.extent(0); ++i)
    for (size_t j = 0; j < host.extent(1); ++j) out(i, j) = from_bf16(host(i, j));
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), out);
}

// The largest |got - want| over fp32's bound for summing a row: (terms + 3) ulps of the row's magnitude.
double worst_over_bound(const Dense& got, const Dense& want, const Dense& magnitude,
                        const CsrMatrix<float, HostSpace>& a) {
  double worst = 0;
  for (int64_t i = 0; i < got.rows; ++i) {
    const double terms = double(a.row_ptr(i + 1) - a.row_ptr(i)) + 3;
    for (int64_t j = 0; j < got.cols; ++j) {
      const double bound = terms * std::ldexp(1.0, -23) * magnitude(i, j) + 1e-30;
      worst = std::max(worst, std::fabs(got(i, j) - want(i, j)) / bound);
    }
  }
  return worst;
}

}  // namespace

TEST(SpmmBf16, SumsTheWidenedValuesInFp32OnEveryPath) {
  std::mt19937_64 gen(21);
  for (const auto& [rows, cols, width, kind] : std::vector<std::tuple<int, int, int, int>>{{1, 1, 1, 0},
                                                                                           {50, 40, 7, 0},
                                                                                           {300, 200, 33, 0},
                                                                                           {300, 200, 16, 1},
                                                                                           {120, 90, 13, 2},
                                                                                           {17, 90, 1, 0}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " width " + std::to_string(width) +
                 (kind == 1   ? " pattern"
                  : kind == 2 ? " degree-scaled"
                              : " valued"));
    const auto a = random_csr<float>(rows, cols, 4, rows / 2, gen, kind != 0);
    HostVector<double> rs("rs", kind == 2 ? size_t(rows) : 0), cs("cs", kind == 2 ? size_t(cols) : 0);
    for (size_t i = 0; i < rs.extent(0); ++i) rs(i) = 1.0 / std::sqrt(double(1 + i % 7));
    for (size_t j = 0; j < cs.extent(0); ++j) cs(j) = 1.0 / std::sqrt(double(1 + j % 5));
    const CsrSpmm<float> op = kind == 2
                                  ? CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a),
                                                   Kokkos::create_mirror_view_and_copy(DeviceSpace(), rs),
                                                   Kokkos::create_mirror_view_and_copy(DeviceSpace(), cs))
                                  : CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a));
    // The operator's weights (float(value), 1, or float(row scale x column scale)) as a dense matrix.
    const HostVector<float> w = op.host_weights();
    Dense weights(rows, cols), magnitude_of_a(rows, cols);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = a.row_ptr(i); k < a.row_ptr(i + 1); ++k) {
        weights(i, a.col_idx(k)) += double(w(k));
        magnitude_of_a(i, a.col_idx(k)) += std::fabs(double(w(k)));
      }
    const Bf16Input x = random_bf16(cols, width, gen);
    const Dense y0 = random_dense(rows, width, gen);
    // Wanted: 0.5 A x + 2 y0; each entry's error bounded against 0.5 |A| |x| + 2 |y0|.
    Dense half = add(matmul(weights, x.values), y0, 4.0), abs_x = x.values, abs_y0 = y0;
    for (double& v : half.a) v *= 0.5;
    for (double& v : abs_x.a) v = std::fabs(v);
    for (double& v : abs_y0.a) v = 2 * std::fabs(v);
    Dense magnitude = matmul(magnitude_of_a, abs_x);
    for (double& v : magnitude.a) v *= 0.5;
    magnitude = add(magnitude, abs_y0);
    for (KernelPath path : spmm_paths()) {
      SCOPED_TRACE(kernel_path_name(path));
      Matrix<float> y = to_view<float>(y0), fp32 = to_view<float>(y0);
      op.apply_bf16(x.bits, y, 0.5f, 2.0f, path);
      EXPECT_LE(worst_over_bound(from_view(y), half, magnitude, a), 1.0);
      // The vendor path has no bf16 product: it runs the team kernel.
      op.apply(widened(x.bits), fp32, 0.5f, 2.0f, path == KernelPath::Vendor ? KernelPath::Team : path);
      EXPECT_EQ(from_view(y).a, from_view(fp32).a);
    }
  }
}

TEST(SpmmBf16, ADoubleOperatorOrMismatchedShapesAreRefused) {
  std::mt19937_64 gen(3);
  const auto a = random_csr<double>(6, 5, 2, -1, gen);
  const Bf16Input x = random_bf16(5, 3, gen);
  Matrix<double> y("y", 6, 3);
  EXPECT_THROW(CsrSpmm<double>(csr_to_space<double, DeviceSpace>(a)).apply_bf16(x.bits, y), Error);
  const auto f = random_csr<float>(6, 5, 2, -1, gen);
  Matrix<float> wrong("wrong", 5, 3);
  EXPECT_THROW(CsrSpmm<float>(csr_to_space<float, DeviceSpace>(f)).apply_bf16(x.bits, wrong), Error);
}
