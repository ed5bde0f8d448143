// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/norm.hpp"

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"

namespace tessera {

NormKind parse_norm(const std::string& name) {
  if (name == "none") return NormKind::None;
  if (name == "batch") return NormKind::Batch;
  if (name == "rms") return NormKind::Rms;
  fail("--norm must be none, batch or rms, not '", name, "'");
}

const char* norm_name(NormKind kind) {
  return kind == NormKind::Batch ? "batch" : kind == NormKind::Rms ? "rms" : "none";
}

template <class Scalar>
FeatureNorm<Scalar>::FeatureNorm(NormKind kind, const std::string& name, int64_t features, Scalar eps,
                                 Scalar momentum)
    : kind_(kind),
      eps_(eps),
      momentum_(momentum),
      gamma_(name + ".gamma", 1, features, false),
      beta_(name + ".beta", 1, features, false) {
  Kokkos::deep_copy(gamma_.value, Scalar(1));
  Kokkos::deep_copy(beta_.value, Scalar(0));
  if (kind_ == NormKind::Batch) {
    running_mean_ = Vector<Scalar>(name + ".running_mean", size_t(features));
    running_var_ = Vector<Scalar>(name + ".running_var", size_t(features));
    Kokkos::deep_copy(running_var_, Scalar(1));
  }
}

namespace {
using Exec = ExecSpace;
template <class Scalar>
Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>> entries(const Matrix<Scalar>& m) {
  using Point = Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>::point_type;
  return Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>>(Point{{0, 0}},
                                                      Point{{int64_t(m.extent(0)), int64_t(m.extent(1))}});
}
}  // namespace

template <class Scalar>
void FeatureNorm<Scalar>::forward(const Matrix<Scalar>& z, bool training, int64_t total_rows,
                                  int64_t total_features, const SumReducer<Scalar>& reduce_rows,
                                  const SumReducer<Scalar>& reduce_features,
                                  const NormEpilogue<Scalar>* fused) {
  if (kind_ == NormKind::None) return;
  const int64_t rows = int64_t(z.extent(0)), cols = int64_t(z.extent(1));
  if (normalized_.extent(0) != z.extent(0) || normalized_.extent(1) != z.extent(1))
    normalized_ = Matrix<Scalar>("norm.normalized", z.extent(0), z.extent(1));
  const auto xhat = normalized_;
  const auto gamma = gamma_.value, beta = beta_.value;
  const Scalar eps = eps_;
  const bool fuse = fused != nullptr, relu = fuse && fused->relu;
  const Dropout dropout = fuse ? fused->dropout : Dropout();
  if (kind_ == NormKind::Batch) {
    if (int64_t(stat_a_.extent(0)) != cols) {
      stat_a_ = Vector<Scalar>("bn.mean", size_t(cols));
      stat_b_ = Vector<Scalar>("bn.invstd", size_t(cols));
    }
    const auto mean = stat_a_, invstd = stat_b_, rmean = running_mean_, rvar = running_var_;
    used_batch_stats_ = training;
    if (training) {
      column_sums<Scalar>(z, mean, invstd);  // sums and sums of squares, turned into mean and invstd below
      reduce_rows(mean);
      reduce_rows(invstd);
      const Scalar n = Scalar(total_rows), m = momentum_;
      Kokkos::parallel_for(
          "tessera::bn_stats", Kokkos::RangePolicy<Exec>(0, cols), KOKKOS_LAMBDA(int64_t j) {
            const Scalar mu = mean(j) / n;
            Scalar var = invstd(j) / n - mu * mu;
            var = var > Scalar(0) ? var : Scalar(0);
            mean(j) = mu;
            invstd(j) = Scalar(1) / Scalar(::sqrt(double(var + eps)));
            rmean(j) = (Scalar(1) - m) * rmean(j) + m * mu;
            rvar(j) = (Scalar(1) - m) * rvar(j) + m * (n > Scalar(1) ? var * n / (n - Scalar(1)) : var);
          });
    } else {
      Kokkos::parallel_for(
          "tessera::bn_eval_stats", Kokkos::RangePolicy<Exec>(0, cols), KOKKOS_LAMBDA(int64_t j) {
            mean(j) = rmean(j);
            invstd(j) = Scalar(1) / Scalar(::sqrt(double(rvar(j) + eps)));
          });
    }
    if (fuse) {
      Kokkos::parallel_for(
          "tessera::bn_apply_relu_dropout", Kokkos::RangePolicy<Exec>(0, rows), KOKKOS_LAMBDA(int64_t i) {
            for (int64_t j = 0; j < cols; ++j) xhat(i, j) = (z(i, j) - mean(j)) * invstd(j);
            relu_dropout_row(&z(i, 0), i, 0, cols, relu, dropout,
                             [&](int64_t j) { return gamma(j) * xhat(i, j) + beta(j); });
          });
      return;
    }
    Kokkos::parallel_for(
        "tessera::bn_apply", entries(z), KOKKOS_LAMBDA(int64_t i, int64_t j) {
          xhat(i, j) = (z(i, j) - mean(j)) * invstd(j);
          z(i, j) = gamma(j) * xhat(i, j) + beta(j);
        });
  } else {
    if (int64_t(stat_a_.extent(0)) != rows) stat_a_ = Vector<Scalar>("rms.rinv", size_t(rows));
    const auto rinv = stat_a_;
    if (fuse && fused->bias.extent(0) > 0) {  // the bias goes in on the way through the statistics pass
      const Vector<const Scalar> bias = fused->bias;
      Kokkos::parallel_for(
          "tessera::rms_bias_sums_sq", Kokkos::RangePolicy<Exec>(0, rows), KOKKOS_LAMBDA(int64_t i) {
            Scalar q = 0;
            for (int64_t j = 0; j < cols; ++j) {
              z(i, j) = z(i, j) + bias(j);
              q += z(i, j) * z(i, j);
            }
            rinv(i) = q;
          });
    } else {
      row_sums_sq<Scalar>(z, rinv);
    }
    reduce_features(rinv);
    const Scalar f = Scalar(total_features);
    Kokkos::parallel_for(
        "tessera::rms_stats", Kokkos::RangePolicy<Exec>(0, rows),
        KOKKOS_LAMBDA(int64_t i) { rinv(i) = Scalar(1) / Scalar(::sqrt(double(rinv(i) / f + eps))); });
    if (fuse) {
      Kokkos::parallel_for(
          "tessera::rms_apply_relu_dropout", Kokkos::RangePolicy<Exec>(0, rows), KOKKOS_LAMBDA(int64_t i) {
            for (int64_t j = 0; j < cols; ++j) xhat(i, j) = z(i, j) * rinv(i);
            relu_dropout_row(&z(i, 0), i, 0, cols, relu, dropout,
                             [&](int64_t j) { return gamma(j) * xhat(i, j) + beta(j); });
          });
      return;
    }
    Kokkos::parallel_for(
        "tessera::rms_apply", entries(z), KOKKOS_LAMBDA(int64_t i, int64_t j) {
          xhat(i, j) = z(i, j) * rinv(i);
          z(i, j) = gamma(j) * xhat(i, j) + beta(j);
        });
  }
}

template <class Scalar>
void FeatureNorm<Scalar>::backward(const Matrix<Scalar>& g, int64_t total_rows, int64_t total_features,
                                   const SumReducer<Scalar>& reduce_rows,
                                   const SumReducer<Scalar>& reduce_features,
                                   const NormEpilogue<Scalar>* fused, const Matrix<const Scalar>& out) {
  if (kind_ == NormKind::None) return;
  require(kind_ != NormKind::Batch || used_batch_stats_, "BatchNorm backward after an evaluation forward");
  const int64_t rows = int64_t(g.extent(0)), cols = int64_t(g.extent(1));
  const auto xhat = normalized_;
  const auto gamma = gamma_.value, dgamma = gamma_.grad, dbeta = beta_.grad;
  if (fused)
    relu_dropout_backward_column_sums<Scalar>(g, out, fused->relu, fused->dropout, dbeta);
  else
    column_sums<Scalar>(g, dbeta, Vector<Scalar>());
  column_dot<Scalar>(g, xhat, dgamma);
  reduce_rows(dbeta);
  reduce_rows(dgamma);
  if (kind_ == NormKind::Batch) {
    const auto invstd = stat_b_;
    const Scalar n = Scalar(total_rows);
    Kokkos::parallel_for(
        "tessera::bn_backward", entries(g), KOKKOS_LAMBDA(int64_t i, int64_t j) {
          g(i, j) = gamma(j) * invstd(j) / n * (n * g(i, j) - dbeta(j) - xhat(i, j) * dgamma(j));
        });
  } else {
    const auto rinv = stat_a_;
    if (int64_t(row_dot_.extent(0)) != rows) row_dot_ = Vector<Scalar>("rms.dot", size_t(rows));
    const auto dot = row_dot_;
    Kokkos::parallel_for(
        "tessera::rms_dot", Kokkos::RangePolicy<Exec>(0, rows), KOKKOS_LAMBDA(int64_t i) {
          Scalar s = 0;
          for (int64_t j = 0; j < cols; ++j) s += gamma(j) * g(i, j) * xhat(i, j);
          dot(i) = s;
        });
    reduce_features(dot);
    const Scalar f = Scalar(total_features);
    Kokkos::parallel_for(
        "tessera::rms_backward", entries(g), KOKKOS_LAMBDA(int64_t i, int64_t j) {
          g(i, j) = rinv(i) * (gamma(j) * g(i, j) - xhat(i, j) * dot(i) / f);
        });
  }
}

template class FeatureNorm<float>;
template class FeatureNorm<double>;

}  // namespace tessera
