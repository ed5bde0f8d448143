// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/kernels/norm.hpp"

#include "impl/rows.hpp"

namespace tessera {

void batch_norm_statistics(const Vector<float>& mean, const Vector<float>& invstd, int64_t rows, float eps,
                           float momentum, const Vector<float>& running_mean,
                           const Vector<float>& running_var) {
  const float n = float(rows), m = momentum;
  Kokkos::parallel_for(
      "tessera::bn_statistics", Kokkos::RangePolicy<ExecSpace>(0, int64_t(mean.extent(0))),
      KOKKOS_LAMBDA(int64_t j) {
        const float mu = mean(j);
        const float var = invstd(j) / n;
        invstd(j) = 1.0f / float(::sqrt(double(var + eps)));
        running_mean(j) = (1.0f - m) * running_mean(j) + m * mu;
        running_var(j) = (1.0f - m) * running_var(j) + m * (n > 1.0f ? var * n / (n - 1.0f) : var);
      });
}

void batch_norm_mean(const Vector<float>& mean, int64_t rows) {
  const float n = float(rows);
  Kokkos::parallel_for(
      "tessera::bn_mean", Kokkos::RangePolicy<ExecSpace>(0, int64_t(mean.extent(0))),
      KOKKOS_LAMBDA(int64_t j) { mean(j) = mean(j) / n; });
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
  const bool relu = epilogue.relu;
  const DropoutMask dropout = epilogue.dropout;
  impl::for_each_row(
      path, "tessera::bn_apply", int64_t(z.extent(0)), int64_t(z.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        relu_dropout_row(&out(i, 0), i, j0, j1, relu, dropout, [&](int64_t j) {
          const float xhat = (z(i, j) - mean(j)) * invstd(j);
          return gamma(j) * xhat + beta(j);
        });
      },
      impl::dropout_chunk(dropout));
}

void batch_norm_backward_sums(const Matrix<float>& g, const Matrix<const float>& out,
                              const Matrix<const float>& z, const Vector<const float>& mean,
                              const Vector<const float>& invstd, const NormEpilogue& epilogue,
                              const Vector<float>& dbeta, const Vector<float>& dgamma, KernelPath path) {
  relu_dropout_backward_column_sums<float>(g, out, epilogue.relu, epilogue.dropout, dbeta, path);
  impl::reduce_columns(
      path, "tessera::bn_dgamma", int64_t(g.extent(0)), int64_t(g.extent(1)), dgamma,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, float* acc) {
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += g(i, j) * ((z(i, j) - mean(j)) * invstd(j));
      });
}

void batch_norm_backward(const Matrix<float>& g, const Matrix<const float>& z,
                         const Vector<const float>& mean, const Vector<const float>& invstd,
                         const Vector<const float>& gamma, const Vector<const float>& dbeta,
                         const Vector<const float>& dgamma, int64_t rows, KernelPath path) {
  const float n = float(rows);
  impl::for_each_row(
      path, "tessera::bn_backward", int64_t(g.extent(0)), int64_t(g.extent(1)),
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
          const float xhat = (z(i, j) - mean(j)) * invstd(j);
          g(i, j) = gamma(j) * invstd(j) / n * (n * g(i, j) - dbeta(j) - xhat * dgamma(j));
        }
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
  relu_dropout_backward_column_sums<float>(g, out, epilogue.relu, epilogue.dropout, dbeta, path);
  impl::reduce_columns(
      path, "tessera::rms_dgamma", int64_t(g.extent(0)), int64_t(g.extent(1)), dgamma,
      KOKKOS_LAMBDA(int64_t i, int64_t j0, int64_t j1, float* acc) {
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += g(i, j) * (z(i, j) * rinv(i));
      });
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
