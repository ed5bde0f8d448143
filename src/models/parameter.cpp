// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/parameter.hpp"

#include <cmath>

#include "tessera/core/random.hpp"

namespace tessera {

Parameter::Parameter(std::string n, int64_t r, int64_t c, bool d)
    : name(std::move(n)), rows(r), cols(c), decay(d), value(name, size_t(r * c)), grad(name + ".grad", size_t(r * c)) {}

void glorot_init(const Parameter& p, uint64_t seed, uint64_t stream) {
  const float bound = float(std::sqrt(6.0 / double(p.rows + p.cols)));
  const int64_t cols = p.cols;
  const CounterRng rng(seed, stream);
  const auto value = p.value;
  Kokkos::parallel_for(
      "tessera::glorot", Kokkos::RangePolicy<ExecSpace>(0, p.size()), KOKKOS_LAMBDA(int64_t k) {
        value(k) = bound * (2.0f * rng.uniform(uint64_t(k / cols), uint64_t(k % cols)) - 1.0f);
      });
}

void fill(const Vector<float>& v, float value) { Kokkos::deep_copy(v, value); }

}  // namespace tessera
