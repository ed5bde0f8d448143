// SPDX-License-Identifier: BSD-3-Clause
// The arithmetic of BatchNorm (per column, statistics over rows) and RMSNorm (per row, over columns), on a
// block of a distributed matrix. The partial sums each needs are the caller's to all-reduce between the
// steps below (over the axis that splits the rows for BatchNorm, the columns for RMSNorm), so a layer on
// any grid computes what one rank computes. Normalized values are recomputed from the input when the
// backward needs them (same expression, same bits) instead of being stored.
#pragma once

#include <cstdint>

#include "tessera/core/views.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/kernels/kernel_path.hpp"

namespace tessera {

/// What runs after a normalization in the same pass: a hidden layer's ReLU and dropout.
struct NormEpilogue {
  bool relu = false;    ///< ReLU after the affine step
  DropoutMask dropout;  ///< then dropout (inactive by default)
};

/// Local partial sums for the batch statistics, in one pass over z and in double: sums(j) = sum_i z_ij and
/// sums(cols + j) = sum_i z_ij^2 (sums holds 2 * cols), to be summed over the grid's rows.
void batch_norm_sums(const Matrix<const float>& z, const Vector<double>& sums,
                     KernelPath path = KernelPath::Auto);
/// From batch_norm_sums summed over all `rows` rows of the grid: the column means, 1 / sqrt(var + eps)
/// per column, and the running statistics updated with `momentum` (the running variance is the unbiased
/// one). The variance is sum z^2 / n - mean^2 counted in double, which keeps it accurate where |mean| is
/// many spreads (tested at 1e4, where the same in float returned garbage).
void batch_norm_statistics(const Vector<const double>& sums, int64_t rows, float eps, float momentum,
                           const Vector<float>& mean, const Vector<float>& invstd,
                           const Vector<float>& running_mean, const Vector<float>& running_var);
/// Evaluation: mean and 1 / sqrt(var + eps) from the running statistics.
void batch_norm_running(const Vector<float>& mean, const Vector<float>& invstd,
                        const Vector<const float>& running_mean, const Vector<const float>& running_var,
                        float eps);
/// out = epilogue(gamma * (z - mean) * invstd + beta).
void batch_norm_apply(const Matrix<const float>& z, const Vector<const float>& mean,
                      const Vector<const float>& invstd, const Vector<const float>& gamma,
                      const Vector<const float>& beta, const Matrix<float>& out, const NormEpilogue& epilogue,
                      KernelPath path = KernelPath::Auto);
/// Local partial sums of the affine step's gradients: g is first taken through the epilogue's derivative
/// (in place, read off the forward output `out`); dbeta = column sums of g, dgamma = column sums of
/// g * xhat with xhat = (z - mean) * invstd.
void batch_norm_backward_sums(const Matrix<float>& g, const Matrix<const float>& out,
                              const Matrix<const float>& z, const Vector<const float>& mean,
                              const Vector<const float>& invstd, const NormEpilogue& epilogue,
                              const Vector<float>& dbeta, const Vector<float>& dgamma,
                              KernelPath path = KernelPath::Auto);
/// In place, with dbeta and dgamma summed over the grid: g = gamma * invstd / n * (n g - dbeta - xhat
/// dgamma).
void batch_norm_backward(const Matrix<float>& g, const Matrix<const float>& z,
                         const Vector<const float>& mean, const Vector<const float>& invstd,
                         const Vector<const float>& gamma, const Vector<const float>& dbeta,
                         const Vector<const float>& dgamma, int64_t rows, KernelPath path = KernelPath::Auto);

/// Turns row sums of squares (over all `features` columns of the grid) into 1 / sqrt(mean square + eps),
/// in place.
void rms_norm_statistics(const Vector<float>& rinv, int64_t features, float eps);
/// out = epilogue(gamma * z * rinv + beta).
void rms_norm_apply(const Matrix<const float>& z, const Vector<const float>& rinv,
                    const Vector<const float>& gamma, const Vector<const float>& beta,
                    const Matrix<float>& out, const NormEpilogue& epilogue,
                    KernelPath path = KernelPath::Auto);
/// As batch_norm_backward_sums with xhat = z * rinv.
void rms_norm_backward_sums(const Matrix<float>& g, const Matrix<const float>& out,
                            const Matrix<const float>& z, const Vector<const float>& rinv,
                            const NormEpilogue& epilogue, const Vector<float>& dbeta,
                            const Vector<float>& dgamma, KernelPath path = KernelPath::Auto);
/// Local row sums dot(i) = sum_j gamma_j g_ij xhat_ij (to be summed over the grid's columns).
void rms_norm_backward_dot(const Matrix<const float>& g, const Matrix<const float>& z,
                           const Vector<const float>& rinv, const Vector<const float>& gamma,
                           const Vector<float>& dot, KernelPath path = KernelPath::Auto);
/// In place: g = rinv * (gamma g - xhat dot / features).
void rms_norm_backward(const Matrix<float>& g, const Matrix<const float>& z, const Vector<const float>& rinv,
                       const Vector<const float>& gamma, const Vector<const float>& dot, int64_t features,
                       KernelPath path = KernelPath::Auto);

}  // namespace tessera
