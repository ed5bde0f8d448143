// SPDX-License-Identifier: BSD-3-Clause
// Communication-free uniform vertex sampling (docs/architecture.md §5, ScaleGNN): every rank that asks with
// the same key (seed, epoch, step, replica) gets the same sorted sample, so the ranks of a 3D replica agree
// on the mini-batch without a message, and different replicas (data-parallel axis) draw different ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/graph/permutation.hpp"

namespace tessera {

/// What a uniform vertex sample is a function of.
struct SampleKey {
  uint64_t seed = 0;  ///< the run's seed
  int64_t epoch = 0;  ///< epoch index
  int64_t step = 0;   ///< step within the epoch
  int replica = 0;    ///< data-parallel replica (different replicas draw different samples)
};

/// The permutation of [0, n) whose first images are the sample of `key`: a pure function of the key, which
/// the device sampler evaluates in its kernels (uniform_vertex_sample takes its first count images).
RandomPermutation sample_permutation(int64_t n, const SampleKey& key);

/// `count` distinct vertices of [0, n), sorted, uniformly without replacement: the first `count` images
/// of a pseudorandom permutation of [0, n) keyed by `key`. Throws Error if count is not in [1, n].
std::vector<int64_t> uniform_vertex_sample(int64_t n, int64_t count, const SampleKey& key);

/// GraphSAINT's node-sampler normalization for a uniform sample of B of N vertices: the probability that
/// a given other vertex is in the sample with a fixed one, p = (B - 1) / (N - 1) (1 when B = N).
double pair_inclusion_probability(int64_t n, int64_t count);

}  // namespace tessera
