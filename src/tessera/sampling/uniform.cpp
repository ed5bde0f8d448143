// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/sampling/uniform.hpp"

#include <algorithm>
#include <cstdlib>

#include "rank_bitmap.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"
#include "tessera/graph/permutation.hpp"

namespace tessera {

namespace {
constexpr uint64_t kSampleStream = 0x5a3c0000ull;  // apart from the model's streams (random_streams.hpp)
}

RandomPermutation sample_permutation(int64_t n, const SampleKey& key) {
  // One 64-bit permutation key per (epoch, step, replica), drawn from the counter-based generator.
  const CounterRng rng(key.seed, kSampleStream + uint64_t(key.replica));
  const Philox4x32Block r = rng.bits(uint64_t(key.epoch), uint64_t(key.step));
  const uint64_t stream = (uint64_t(r.v[0]) << 32) | r.v[1];
  return RandomPermutation(n, key.seed ^ 0x9e3779b97f4a7c15ull, stream);
}

std::vector<int64_t> uniform_vertex_sample(int64_t n, int64_t count, const SampleKey& key) {
  require(count >= 1 && count <= n, "mini-batch size ", count, " must be between 1 and the ", n, " nodes");
  const RandomPermutation perm = sample_permutation(n, key);
  std::vector<int64_t> sample(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) sample[size_t(i)] = perm(i);
  if (sampling_impl::rank_bitmap_pays(n, count)) return sampling_impl::RankBitmap(n, sample).members();
  std::sort(sample.begin(), sample.end());
  return sample;
}

double pair_inclusion_probability(int64_t n, int64_t count) {
  return n <= 1 ? 1.0 : double(count - 1) / double(n - 1);
}

}  // namespace tessera
