// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/norm.hpp"

#include "impl/cpu_clones.hpp"
#include "impl/rows.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/scratch.hpp"

namespace tessera {

namespace {
// The host path's whole-row loop of batch_norm_sums in double is bound by its arithmetic, not by memory,
// at the baseline x86-64 ISA the library is built for (two doubles an instruction): it is compiled for
// AVX-512 and AVX2 too (impl/cpu_clones.hpp). A square of a float is exact in double, so each clone (fused
// or not) adds the same values in the same order: the same bits.
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)  // a host loop (device passes skip it)
TESSERA_CPU_CLONES void add_sums_and_squares(const float* KOKKOS_RESTRICT row, int64_t cols,
                                             double* KOKKOS_RESTRICT sums, double* KOKKOS_RESTRICT squares) {
  for (int64_t j = 0; j < cols; ++j) {
    const double v = double(row[j]);
    sums[j] += v;
    squares[j] += v * v;
  }
}
#endif

// BatchNorm's per-row passes on columns [j0, j1) of one row, from the statistics' and parameters' raw
// pointers: the same code on every path (the same bits), and a plain host function can be cloned below.
struct BatchNormRows {
  const float *mean, *invstd, *gamma, *beta;
  bool relu;

  // out = dropout(relu?(gamma xhat + beta)).
  KOKKOS_INLINE_FUNCTION void apply(const float* KOKKOS_RESTRICT z, float* KOKKOS_RESTRICT out, int64_t i,
                                    int64_t j0, int64_t j1, const DropoutMask& dropout) const {
    relu_dropout_row(out, i, j0, j1, relu, dropout, [&](int64_t j) {
      const float xhat = (z[j] - mean[j]) * invstd[j];
      return gamma[j] * xhat + beta[j];
    });
  }
  // g = gamma invstd / n (n g - dbeta - xhat dgamma), in place.
  KOKKOS_INLINE_FUNCTION void backward(const float* KOKKOS_RESTRICT z, float* KOKKOS_RESTRICT g,
                                       const float* KOKKOS_RESTRICT dbeta,
                                       const float* KOKKOS_RESTRICT dgamma, float n, int64_t j0,
                                       int64_t j1) const {
    for (int64_t j = j0; j < j1; ++j) {
      const float xhat = (z[j] - mean[j]) * invstd[j];
      g[j] = gamma[j] * invstd[j] / n * (n * g[j] - dbeta[j] - xhat * dgamma[j]);
    }
  }
};

// The two on a CPU, compiled for AVX-512 and AVX2 too (the baseline ISA's four floats an instruction
// make them arithmetic-bound); the file is compiled without floating-point contraction (CMakeLists.txt),
// so every clone rounds as the default one does.
TESSERA_CPU_CLONES TESSERA_CPU_FLATTEN void batch_norm_apply_on_cpu(const BatchNormRows& rows, const float* z,
                                                                    float* out, int64_t i, int64_t j0,
                                                                    int64_t j1, const DropoutMask& dropout) {
  rows.apply(z, out, i, j0, j1, dropout);
}
TESSERA_CPU_CLONES TESSERA_CPU_FLATTEN void batch_norm_backward_on_cpu(const BatchNormRows& rows,
                                                                       const float* z, float* g,
                                                                       const float* dbeta,
                                                                       const float* dgamma, float n,
                                                                       int64_t j0, int64_t j1) {
  rows.backward(z, g, dbeta, dgamma, n, j0, j1);
}

// The host path's row of a norm's backward sums (affine_backward_sums): the epilogue's derivative
// applied to g's row in place, which is then added to dbeta's sums and, times xhat, to dgamma's (acc:
// both, 2 cols).
template <class Xhat>
KOKKOS_INLINE_FUNCTION void backward_sums_row(float* KOKKOS_RESTRICT g, const float* KOKKOS_RESTRICT out,
                                              int64_t i, int64_t cols, bool relu, const DropoutMask& dropout,
                                              const Xhat& xhat, float* KOKKOS_RESTRICT acc) {
  relu_dropout_row_backward(g, out, i, 0, cols, relu, dropout);
  for (int64_t j = 0; j < cols; ++j) acc[j] += g[j];
  for (int64_t j = 0; j < cols; ++j) acc[cols + j] += g[j] * xhat(i, j);
}
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)  // a host loop (device passes skip it)
// backward_sums_row on a CPU, cloned as the passes above.
template <class Xhat>
TESSERA_CPU_TEMPLATE_CLONES TESSERA_CPU_FLATTEN void backward_sums_row_on_cpu(float* g, const float* out,
                                                                              int64_t i, int64_t cols,
                                                                              bool relu,
                                                                              const DropoutMask& dropout,
                                                                              const Xhat& xhat, float* acc) {
  backward_sums_row(g, out, i, cols, relu, dropout, xhat, acc);
}
#endif

// A norm's backward sums (norm.hpp, batch_norm_backward_sums), xhat(i, j) its normalized input. Team lanes
// take a row's columns apart, so there the in-place rewrite of g is a pass of its own before dgamma's; the
// host path takes whole rows, rewriting each and adding it to both sums in one pass over g (the same
// values in the same order: the same bits).
template <class Xhat>
void affine_backward_sums(const char* name, const Matrix<float>& g, const Matrix<const float>& out,
                          const NormEpilogue& epilogue, const Vector<float>& dbeta,
                          const Vector<float>& dgamma, KernelPath path, const Xhat& xhat) {
  const bool relu = epilogue.relu;
  const DropoutMask dropout = epilogue.dropout;
  const int64_t rows = int64_t(g.extent(0)), cols = int64_t(g.extent(1));
  const auto dgamma_terms = KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, float* acc) {
    for (int64_t j = j0; j < j1; ++j) acc[j - j0] += g(i, j) * xhat(i, j);
  };
  if (resolve_kernel_path(path, KernelKind::Elementwise) == KernelPath::Team) {
    relu_dropout_backward_column_sums<float>(g, out, relu, dropout, dbeta, path);
    impl::reduce_columns(path, name, rows, cols, dgamma, dgamma_terms);
    return;
  }
  const Vector<float> both = scratch_vector<float>("norm_backward_sums", size_t(2 * cols));
  impl::reduce_columns(
      path, name, rows, 2 * cols, both, KOKKOS_LAMBDA(int64_t i, int64_t, int64_t, float* acc) {
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
        backward_sums_row_on_cpu(&g(i, 0), &out(i, 0), i, cols, relu, dropout, xhat, acc);
#else
        backward_sums_row(&g(i, 0), &out(i, 0), i, cols, relu, dropout, xhat, acc);
#endif
      });
  Kokkos::parallel_for(
      name, Kokkos::RangePolicy<ExecSpace>(0, cols), KOKKOS_LAMBDA(int64_t j) {
        dbeta(j) = both(j);
        dgamma(j) = both(cols + j);
      });
}
}  // namespace

void batch_norm_sums(const Matrix<const float>& z, const Vector<double>& sums, KernelPath path) {
  const int64_t cols = int64_t(z.extent(1));
  require(int64_t(sums.extent(0)) == 2 * cols, "batch_norm_sums: ", sums.extent(0), " sums for ", cols,
          " columns");
  // One reduction over 2 * cols columns: the first half sums z, the second its squares (a float's square
  // is exact in double). A chunk of them may straddle the halves on the team path.
  impl::reduce_columns(
      path, "tessera::bn_sums", int64_t(z.extent(0)), 2 * cols, sums,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, double* KOKKOS_RESTRICT acc) {
        const float* KOKKOS_RESTRICT row = &z(i, 0);
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
        if (j0 == 0 && j1 == 2 * cols) {  // a whole row (the host path): each entry read once
          add_sums_and_squares(row, cols, acc, acc + cols);
          return;
        }
#endif
        const int64_t split = j1 < cols ? j1 : cols;
        for (int64_t j = j0; j < split; ++j) acc[j - j0] += double(row[j]);
        for (int64_t j = split > j0 ? split : j0; j < j1; ++j) {
          const double v = double(row[j - cols]);
          acc[j - j0] += v * v;
        }
      });
}

void batch_norm_statistics(const Vector<const double>& sums, int64_t rows, float eps, float momentum,
                           const Vector<float>& mean, const Vector<float>& invstd,
                           const Vector<float>& running_mean, const Vector<float>& running_var) {
  const int64_t cols = int64_t(mean.extent(0));
  const double n = double(rows);
  const float m = momentum;
  Kokkos::parallel_for(
      "tessera::bn_statistics", Kokkos::RangePolicy<ExecSpace>(0, cols), KOKKOS_LAMBDA(int64_t j) {
        const double mu = sums(j) / n;
        const double square_mean = sums(cols + j) / n - mu * mu;
        const double var = square_mean > 0.0 ? square_mean : 0.0;  // rounding can leave a tiny negative
        mean(j) = float(mu);
        invstd(j) = 1.0f / float(::sqrt(double(float(var) + eps)));
        running_mean(j) = (1.0f - m) * running_mean(j) + m * float(mu);
        running_var(j) = (1.0f - m) * running_var(j) + m * float(n > 1.0 ? var * n / (n - 1.0) : var);
      });
}

void batch_norm_running(const Vector<float>& mean, const Vector<float>& invstd,
                        const Vector<const float>& running_mean, const Vector<const float>& running_var,
                        float eps) {
  Kokkos::parallel_for(
      "tessera::bn_running", Kokkos::RangePolicy<ExecSpace>(0, int64_t(mean.extent(0))),
      KOKKOS_LAMBDA(int64_t j) {
        mean(j) = running_mean(j);
        invstd(j) = 1.0f / float(::sqrt(double(running_var(j) + eps)));
      });
}

void batch_norm_apply(const Matrix<const float>& z, const Vector<const float>& mean,
                      const Vector<const float>& invstd, const Vector<const float>& gamma,
                      const Vector<const float>& beta, const Matrix<float>& out, const NormEpilogue& epilogue,
                      KernelPath path) {
  const BatchNormRows rows{mean.data(), invstd.data(), gamma.data(), beta.data(), epilogue.relu};
  const DropoutMask dropout = epilogue.dropout;
  impl::for_each_row_split(
      path, "tessera::bn_apply", int64_t(z.extent(0)), int64_t(z.extent(1)),
      [=](int64_t i, int64_t j0, int64_t j1) {
        batch_norm_apply_on_cpu(rows, &z(i, 0), &out(i, 0), i, j0, j1, dropout);
      },
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        rows.apply(&z(i, 0), &out(i, 0), i, j0, j1, dropout);
      },
      impl::dropout_chunk(dropout));
}

void batch_norm_backward_sums(const Matrix<float>& g, const Matrix<const float>& out,
                              const Matrix<const float>& z, const Vector<const float>& mean,
                              const Vector<const float>& invstd, const NormEpilogue& epilogue,
                              const Vector<float>& dbeta, const Vector<float>& dgamma, KernelPath path) {
  affine_backward_sums(
      "tessera::bn_backward_sums", g, out, epilogue, dbeta, dgamma, path,
      KOKKOS_LAMBDA(int64_t i, int64_t j) { return (z(i, j) - mean(j)) * invstd(j); });
}

void batch_norm_backward(const Matrix<float>& g, const Matrix<const float>& z,
                         const Vector<const float>& mean, const Vector<const float>& invstd,
                         const Vector<const float>& gamma, const Vector<const float>& dbeta,
                         const Vector<const float>& dgamma, int64_t rows, KernelPath path) {
  const BatchNormRows norm{mean.data(), invstd.data(), gamma.data(), nullptr, false};
  const float* db = dbeta.data();
  const float* dg = dgamma.data();
  const float n = float(rows);
  impl::for_each_row_split(
      path, "tessera::bn_backward", int64_t(g.extent(0)), int64_t(g.extent(1)),
      [=](int64_t i, int64_t j0, int64_t j1) {
        batch_norm_backward_on_cpu(norm, &z(i, 0), &g(i, 0), db, dg, n, j0, j1);
      },
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        norm.backward(&z(i, 0), &g(i, 0), db, dg, n, j0, j1);
      });
}

void rms_norm_statistics(const Vector<float>& rinv, int64_t features, float eps) {
  const float f = float(features);
  Kokkos::parallel_for(
      "tessera::rms_statistics", Kokkos::RangePolicy<ExecSpace>(0, int64_t(rinv.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { rinv(i) = 1.0f / float(::sqrt(double(rinv(i) / f + eps))); });
}

void rms_norm_apply(const Matrix<const float>& z, const Vector<const float>& rinv,
                    const Vector<const float>& gamma, const Vector<const float>& beta,
                    const Matrix<float>& out, const NormEpilogue& epilogue, KernelPath path) {
  const bool relu = epilogue.relu;
  const DropoutMask dropout = epilogue.dropout;
  impl::for_each_row(
      path, "tessera::rms_apply", int64_t(z.extent(0)), int64_t(z.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        relu_dropout_row(&out(i, 0), i, j0, j1, relu, dropout,
                         [&](int64_t j) { return gamma(j) * (z(i, j) * rinv(i)) + beta(j); });
      },
      impl::dropout_chunk(dropout));
}

void rms_norm_backward_sums(const Matrix<float>& g, const Matrix<const float>& out,
                            const Matrix<const float>& z, const Vector<const float>& rinv,
                            const NormEpilogue& epilogue, const Vector<float>& dbeta,
                            const Vector<float>& dgamma, KernelPath path) {
  affine_backward_sums(
      "tessera::rms_backward_sums", g, out, epilogue, dbeta, dgamma, path,
      KOKKOS_LAMBDA(int64_t i, int64_t j) { return z(i, j) * rinv(i); });
}

void rms_norm_backward_dot(const Matrix<const float>& g, const Matrix<const float>& z,
                           const Vector<const float>& rinv, const Vector<const float>& gamma,
                           const Vector<float>& dot, KernelPath path) {
  impl::reduce_rows(
      path, "tessera::rms_dot", int64_t(g.extent(0)), int64_t(g.extent(1)), dot,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        float s = 0;
        for (int64_t j = j0; j < j1; ++j) s += gamma(j) * g(i, j) * (z(i, j) * rinv(i));
        return s;
      });
}

void rms_norm_backward(const Matrix<float>& g, const Matrix<const float>& z, const Vector<const float>& rinv,
                       const Vector<const float>& gamma, const Vector<const float>& dot, int64_t features,
                       KernelPath path) {
  const float f = float(features);
  impl::for_each_row(
      path, "tessera::rms_backward", int64_t(g.extent(0)), int64_t(g.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j)
          g(i, j) = rinv(i) * (gamma(j) * g(i, j) - (z(i, j) * rinv(i)) * dot(i) / f);
      });
}

}  // namespace tessera
