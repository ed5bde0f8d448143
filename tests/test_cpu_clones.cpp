// SPDX-License-Identifier: BSD-3-Clause
// The host row loops compiled for several x86 ISAs (target_clones: the SpMM's, BatchNorm's apply and
// backward) give the bits of the baseline ISA's code on whatever CPU runs the test: the SpMM's host path
// against a scalar loop of the same operations in the same order (this file is compiled for the baseline
// ISA), BatchNorm's host path against its team path (the same row code in a Kokkos kernel, not cloned).
// A clone that contracted a multiply and an add into an FMA would round differently and fail here. On
// device builds both paths run device code: the SpMM is held to fp32's summation bound instead.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/dense.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/csr.hpp"
#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/kernel_path.hpp"
#include "tessera/kernels/norm.hpp"
#include "tessera/kernels/spmm.hpp"

using namespace tessera;
using namespace tessera::reference;

namespace {

constexpr bool kHostBuild = std::is_same<DeviceSpace, HostSpace>::value;

// y = alpha A x + beta y0 as the host path documents it, one entry at a time: y = beta y0 (or 0), then
// y += (alpha w_k) x_k over the row's nonzeros in order; w_k a value, one, or scaled_weight of the scales.
std::vector<float> scalar_spmm(const CsrMatrix<float, HostSpace>& a, const std::vector<double>& row_scale,
                               const std::vector<double>& col_scale, const std::vector<float>& x,
                               const std::vector<float>& y0, int64_t width, float alpha, float beta) {
  std::vector<float> y(size_t(a.num_rows * width));
  for (int64_t i = 0; i < a.num_rows; ++i)
    for (int64_t f = 0; f < width; ++f) {
      float out = beta == 0.0f ? 0.0f : y0[size_t(i * width + f)] * beta;
      for (int64_t k = a.row_ptr(i); k < a.row_ptr(i + 1); ++k) {
        const int64_t j = a.col_idx(k);
        float weight = alpha;
        if (!row_scale.empty() || !col_scale.empty())
          weight = alpha * scaled_weight<float>(row_scale.empty() ? 1.0 : row_scale[size_t(i)],
                                                col_scale.empty() ? 1.0 : col_scale[size_t(j)]);
        else if (!a.is_pattern())
          weight = alpha * a.values(k);
        const float product = weight * x[size_t(j * width + f)];
        out = out + product;
      }
      y[size_t(i * width + f)] = out;
    }
  return y;
}

std::vector<float> floats_of(const Dense& d) {
  return std::vector<float>(d.a.begin(), d.a.end());
}

Matrix<float> matrix_of(const std::vector<float>& v, int64_t rows, int64_t cols) {
  HostMatrix<float> host("m", size_t(rows), size_t(cols));
  for (int64_t i = 0; i < rows * cols; ++i) host.data()[i] = v[size_t(i)];
  return Kokkos::create_mirror_view_and_copy(DeviceSpace(), host);
}

std::vector<float> values_of(const Matrix<float>& m) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), m);
  return std::vector<float>(host.data(), host.data() + host.size());
}

Vector<double> device_vector(const std::vector<double>& v) {
  Vector<double> out("scale", v.size());
  Kokkos::deep_copy(out, Kokkos::View<const double*, HostSpace, Kokkos::MemoryUnmanaged>(v.data(), v.size()));
  return out;
}

// y of every kind of matrix, width, beta and X equals scalar_spmm bit for bit (the host path as it runs).
void spmm_host_path_gives_scalar_loops_bits() {
  std::mt19937_64 gen(71);
  const int64_t rows = 61, cols = 47;
  std::uniform_real_distribution<double> u(0.05, 1.0);
  for (const int64_t width : {1, 7, 16, 17, 40, 80, 128, 240, 256, 300, 512, 516})
    for (const std::string kind : {"values", "gcn", "mean"}) {
      SCOPED_TRACE(kind + " width " + std::to_string(width));
      const bool pattern = kind != "values";
      const auto a = random_csr<float>(rows, cols, 5, 11, gen, pattern);
      std::vector<double> row_scale, col_scale;
      if (pattern)
        for (int64_t i = 0; i < rows; ++i) row_scale.push_back(u(gen));
      if (kind == "gcn")
        for (int64_t j = 0; j < cols; ++j) col_scale.push_back(u(gen));
      const CsrSpmm<float> op = pattern ? CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a),
                                                         device_vector(row_scale), device_vector(col_scale))
                                        : CsrSpmm<float>(csr_to_space<float, DeviceSpace>(a));
      const std::vector<float> x = floats_of(random_dense(cols, width, gen)),
                               y0 = floats_of(random_dense(rows, width, gen));
      std::vector<float> x_bf16(x.size());
      HostMatrix<uint16_t> bits("bits", size_t(cols), size_t(width));
      for (size_t k = 0; k < x.size(); ++k)
        bits.data()[k] = to_bf16(x[k]), x_bf16[k] = from_bf16(bits.data()[k]);
      const Matrix<uint16_t> x_bits = Kokkos::create_mirror_view_and_copy(DeviceSpace(), bits);
      for (const float beta : {0.0f, 2.0f}) {
        const std::vector<float> want = scalar_spmm(a, row_scale, col_scale, x, y0, width, 0.5f, beta),
                                 want_bf16 =
                                     scalar_spmm(a, row_scale, col_scale, x_bf16, y0, width, 0.5f, beta);
        Matrix<float> y = matrix_of(y0, rows, width), y_bf16 = matrix_of(y0, rows, width);
        op.apply(matrix_of(x, cols, width), y, 0.5f, beta, KernelPath::Host);
        op.apply_bf16(x_bits, y_bf16, 0.5f, beta, KernelPath::Host);
        if (kHostBuild) {
          EXPECT_EQ(values_of(y), want) << "beta " << beta;
          EXPECT_EQ(values_of(y_bf16), want_bf16) << "beta " << beta << ", bf16 X";
        } else {
          Dense got(rows, width), expected(rows, width);
          const std::vector<float> v = values_of(y);
          for (size_t k = 0; k < v.size(); ++k) got.a[k] = v[k], expected.a[k] = want[k];
          EXPECT_LT(relative_error(got, expected), 1e-5) << "beta " << beta;
        }
      }
    }
}

}  // namespace

// Each row loop the CPU can run (vectors of sums in AVX-512 or AVX2 registers, the plain loop), at widths
// below, at and above every vector length and of the register loop's passes (one pass up to 16 vectors,
// 8 + 4 + 2 + 1 for 240 floats, several for 300, 512 and 516; an odd number of vectors, 5, where bf16
// entries are widened in pairs); a matrix with values, a pattern with GCN's two scales, one with the mean's
// row scales; beta 0 and not; X in fp32 and as bf16 bits (widened as read).
TEST(CpuClones, SpmmHostPathGivesTheScalarLoopsBits) {
  EXPECT_NE(host_spmm_loop(), HostSpmmLoop::Auto);
  for (const HostSpmmLoop loop : {HostSpmmLoop::Avx512, HostSpmmLoop::Avx2, HostSpmmLoop::Plain}) {
    SCOPED_TRACE(std::string("loop ") + host_spmm_loop_name(loop));
    if (!host_spmm_loop_available(loop)) {
      EXPECT_THROW(use_host_spmm_loop(loop), Error);
      continue;
    }
    use_host_spmm_loop(loop);
    ASSERT_EQ(host_spmm_loop(), loop);
    spmm_host_path_gives_scalar_loops_bits();
  }
  use_host_spmm_loop(HostSpmmLoop::Auto);
}

// BatchNorm's apply (ReLU and dropout) and backward on the host path equal the team path's bit for bit.
TEST(CpuClones, BatchNormHostPathGivesTheTeamPathsBits) {
  if (!kernel_path_available(KernelPath::Team, KernelKind::Elementwise)) GTEST_SKIP() << "no team path";
  std::mt19937_64 gen(72);
  for (const int64_t cols : {5, 21, 256}) {
    SCOPED_TRACE("columns " + std::to_string(cols));
    const int64_t rows = 37;
    const Dense z = random_dense(rows, cols, gen), g = random_dense(rows, cols, gen);
    const std::vector<float> mean = floats_of(random_dense(1, cols, gen)),
                             invstd = floats_of(random_dense(1, cols, gen, 2.0)),
                             gamma = floats_of(random_dense(1, cols, gen)),
                             beta = floats_of(random_dense(1, cols, gen)),
                             dbeta = floats_of(random_dense(1, cols, gen, 10.0)),
                             dgamma = floats_of(random_dense(1, cols, gen, 10.0));
    const auto vec = [](const std::vector<float>& v) {
      Vector<float> out("v", v.size());
      Kokkos::deep_copy(out,
                        Kokkos::View<const float*, HostSpace, Kokkos::MemoryUnmanaged>(v.data(), v.size()));
      return out;
    };
    const NormEpilogue epilogue{true, DropoutMask(0.3f, 8, 2, 0, 3)};
    std::vector<std::vector<float>> applied, backward;
    for (const KernelPath path : {KernelPath::Host, KernelPath::Team}) {
      Matrix<float> out("out", size_t(rows), size_t(cols));
      batch_norm_apply(to_view<float>(z), vec(mean), vec(invstd), vec(gamma), vec(beta), out, epilogue, path);
      applied.push_back(values_of(out));
      Matrix<float> grad = to_view<float>(g);
      batch_norm_backward(grad, to_view<float>(z), vec(mean), vec(invstd), vec(gamma), vec(dbeta),
                          vec(dgamma), rows, path);
      backward.push_back(values_of(grad));
    }
    EXPECT_EQ(applied[0], applied[1]);
    EXPECT_EQ(backward[0], backward[1]);
  }
}
