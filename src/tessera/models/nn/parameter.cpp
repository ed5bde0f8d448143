// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/parameter.hpp"

#include <cmath>

#include "tessera/core/random.hpp"

namespace tessera {

Parameter::Parameter(std::string n, int64_t r, int64_t c, bool d)
    : name(std::move(n)),
      rows(r),
      cols(c),
      decay(d),
      value(name, size_t(r * c)),
      grad(name + ".grad", size_t(r * c)) {}

Parameter::Parameter(std::string n, int64_t r, int64_t c, bool d, Vector<float> v, Vector<float> g)
    : name(std::move(n)), rows(r), cols(c), decay(d), value(std::move(v)), grad(std::move(g)) {}

void glorot_init(const Parameter& p, const BlockPlacement& at, uint64_t seed, uint64_t stream) {
  const float bound = float(std::sqrt(6.0 / double(at.rows + at.cols)));
  const CounterRng rng(seed, stream);
  const Matrix<float> w = p.matrix();
  const int64_t row0 = at.row_begin, col0 = at.col_begin, rows = at.rows, cols = at.cols;
  Kokkos::parallel_for(
      "tessera::glorot", Kokkos::RangePolicy<ExecSpace>(0, int64_t(w.extent(0))), KOKKOS_LAMBDA(int64_t i) {
        for (int64_t j = 0; j < int64_t(w.extent(1)); ++j) {
          const int64_t gi = row0 + i, gj = col0 + j;
          w(i, j) =
              gi < rows && gj < cols ? bound * (2.0f * rng.uniform(uint64_t(gi), uint64_t(gj)) - 1.0f) : 0.0f;
        }
      });
}

}  // namespace tessera
