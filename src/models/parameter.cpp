// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/parameter.hpp"

#include <cmath>

#include "tessera/core/random.hpp"

namespace tessera {

template <class Scalar>
Parameter<Scalar>::Parameter(std::string n, int64_t r, int64_t c, bool d)
    : name(std::move(n)),
      rows(r),
      cols(c),
      decay(d),
      value(name, size_t(r * c)),
      grad(name + ".grad", size_t(r * c)) {}

template <class Scalar>
void glorot_init(const Parameter<Scalar>& p, uint64_t seed, uint64_t stream) {
  const Scalar bound = Scalar(std::sqrt(6.0 / double(p.rows + p.cols)));
  const int64_t cols = p.cols;
  const CounterRng rng(seed, stream);
  const auto value = p.value;
  Kokkos::parallel_for(
      "tessera::glorot", Kokkos::RangePolicy<ExecSpace>(0, p.size()), KOKKOS_LAMBDA(int64_t k) {
        value(k) =
            bound * (Scalar(2) * Scalar(rng.uniform(uint64_t(k / cols), uint64_t(k % cols))) - Scalar(1));
      });
}

template struct Parameter<float>;
template struct Parameter<double>;
template void glorot_init(const Parameter<float>&, uint64_t, uint64_t);
template void glorot_init(const Parameter<double>&, uint64_t, uint64_t);

}  // namespace tessera
