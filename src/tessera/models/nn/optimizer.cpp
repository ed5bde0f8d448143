// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/optimizer.hpp"

#include <cmath>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"

namespace tessera {


namespace {
std::vector<Parameter*> raw(const std::vector<ParameterRef>& refs) {
  std::vector<Parameter*> out;
  for (const ParameterRef& r : refs) out.push_back(r.param);
  return out;
}
}  // namespace

Adam::Adam(const std::vector<ParameterRef>& params, AdamSettings settings) : Adam(raw(params), settings) {}

void AdamSettings::validate() const {
  // NaN fails every comparison, so each check is written to pass only for good values.
  // lr = 0 is allowed: it freezes the weights, which is how gradients at the initial point are measured.
  require(std::isfinite(lr) && lr >= 0, "`lr` must be finite and not negative, not ", lr);
  require(beta1 >= 0 && beta1 < 1, "Adam's beta1 must be in [0, 1), not ", beta1);
  require(beta2 >= 0 && beta2 < 1, "Adam's beta2 must be in [0, 1), not ", beta2);
  require(std::isfinite(eps) && eps > 0, "Adam's eps must be finite and positive, not ", eps);
  require(std::isfinite(weight_decay) && weight_decay >= 0,
          "`weight-decay` must be finite and not negative, not ", weight_decay);
}

Adam::Adam(std::vector<Parameter*> params, AdamSettings settings) : params_(std::move(params)), s_(settings) {
  s_.validate();
  for (Parameter* p : params_) {
    m_.emplace_back(p->name + ".adam_m", size_t(p->size()));
    v_.emplace_back(p->name + ".adam_v", size_t(p->size()));
  }
}

void Adam::step() {
  ++steps_;
  const float lr = s_.lr, b1 = s_.beta1, b2 = s_.beta2, eps = s_.eps;
  const float c1 = float(1.0 - std::pow(double(b1), double(steps_)));
  const float c2 = float(1.0 - std::pow(double(b2), double(steps_)));
  const bool decoupled = s_.kind == OptimizerKind::AdamW;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto value = params_[i]->value, grad = params_[i]->grad, m = m_[i], v = v_[i];
    const float wd = params_[i]->decay ? s_.weight_decay : 0.0f;
    Kokkos::parallel_for(
        "tessera::adam", Kokkos::RangePolicy<ExecSpace>(0, params_[i]->size()), KOKKOS_LAMBDA(int64_t k) {
          float g = grad(k);
          if (!decoupled) g += wd * value(k);
          m(k) = b1 * m(k) + (1.0f - b1) * g;
          v(k) = b2 * v(k) + (1.0f - b2) * g * g;
          float p = value(k);
          if (decoupled) p -= lr * wd * p;
          value(k) = p - lr * (m(k) / c1) / (::sqrtf(v(k) / c2) + eps);
        });
  }
}

namespace {
// Sum of squares of the entries of p's local block that lie inside its global matrix.
double owned_squares(const Parameter& p, const BlockPlacement& at) {
  if (!at.owner) return 0.0;
  const int64_t cols = p.cols, row_begin = at.row_begin, col_begin = at.col_begin;
  const int64_t global_rows = at.rows, global_cols = at.cols;
  const auto grad = p.grad;
  double sum = 0;
  Kokkos::parallel_reduce(
      "tessera::gradient_squares", Kokkos::RangePolicy<ExecSpace>(0, p.size()),
      KOKKOS_LAMBDA(int64_t k, double& s) {
        const int64_t r = row_begin + k / cols, c = col_begin + k % cols;
        if (r < global_rows && c < global_cols) s += double(grad(k)) * double(grad(k));
      },
      sum);
  return sum;
}

void scale_gradient(const Parameter& p, float factor) {
  const auto grad = p.grad;
  Kokkos::parallel_for(
      "tessera::clip_gradient", Kokkos::RangePolicy<ExecSpace>(0, p.size()),
      KOKKOS_LAMBDA(int64_t k) { grad(k) *= factor; });
}
}  // namespace

namespace {
// x - x is 0 for every finite x and NaN for NaN and inf (a test Kokkos 3.4 and 4.x compile alike).
int64_t nonfinite_entries(const Vector<float>& v) {
  int64_t n = 0;
  Kokkos::parallel_reduce(
      "tessera::count_nonfinite", Kokkos::RangePolicy<ExecSpace>(0, int64_t(v.extent(0))),
      KOKKOS_LAMBDA(int64_t k, int64_t& c) {
        const float x = v(k);
        c += x - x == 0.0f ? 0 : 1;
      },
      n);
  return n;
}
}  // namespace

int64_t count_nonfinite(const std::vector<ParameterRef>& params, const std::vector<BufferRef>& buffers) {
  const auto count = [](const Vector<float>& v) { return nonfinite_entries(v); };
  int64_t n = 0;
  for (const ParameterRef& p : params) n += count(p.param->value);
  for (const BufferRef& b : buffers) n += count(*b.value);
  return n;
}

double global_gradient_norm(const std::vector<ParameterRef>& params, const Communicator& world) {
  double squares = 0;
  for (const ParameterRef& p : params) squares += owned_squares(*p.param, p.placement);
  // Every rank enters it, owner of a block or not.
  squares = all_reduce_value(world, squares, ReduceOp::Sum, "gradient norm");
  return std::sqrt(squares);
}

double clip_gradient_norm(const std::vector<ParameterRef>& params, const Communicator& world,
                          double max_norm) {
  const double norm = global_gradient_norm(params, world);
  const double factor = max_norm / (norm + 1e-6);
  if (factor < 1.0) {
    for (const ParameterRef& p : params) scale_gradient(*p.param, float(factor));
    Kokkos::fence();
  }
  return norm;
}

}  // namespace tessera
