// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/permutation.hpp"

#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"

namespace tessera {


RandomPermutation::RandomPermutation(int64_t n, uint64_t seed, uint64_t stream, int64_t chunk)
    : n_(n), chunk_(chunk), units_(chunk > 0 ? n / chunk : 0) {
  require(n >= 0 && n < (int64_t(1) << 62), "permutation size ", n, " out of range");
  require(chunk >= 1, "permutation chunk ", chunk, " must be at least 1");
  half_bits_ = 1;
  while ((int64_t(1) << (2 * half_bits_)) < units_) ++half_bits_;
  const uint64_t key = splitmix64(seed ^ splitmix64(stream ^ 0x5045524du));
  for (int r = 0; r < 4; ++r) {
    const Philox4x32Block b = CounterRng(key, uint64_t(r)).bits(0, 0);
    round_keys_[r] = uint64_t(b.v[0]) << 32 | b.v[1];
  }
}

}  // namespace tessera
