// SPDX-License-Identifier: BSD-3-Clause
// The pieces of one partition-parallel sampled step (DESIGN §6) that the trainer runs and tests check:
// a rank's seeds for a step, and each sampled block's aggregation weights.
//   GCN:  row v: self 1/(d_v + 1); sampled neighbour u: (d_v / k_v) / sqrt((d_v + 1)(d_u + 1)), with d the
//         full in-degree and k_v the number sampled: an unbiased estimate of A_hat's row, exact when every
//         neighbour is kept.
//   SAGE: row v: 1 / k_v per sampled neighbour (the mean); the root term uses v's own row.
// The operators are HostCsr (plain host memory) so a worker thread can build them while Kokkos kernels run.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/models/layers.hpp"
#include "tessera/sampling/induced.hpp"
#include "tessera/sampling/neighbor.hpp"

namespace tessera {

HostCsr block_operator(const SampledBlock& block, ModelKind kind, const std::vector<int64_t>& degree);
/// Device copies of a block's operator and its transpose (main thread: allocates Kokkos views).
GraphOps<float> upload_ops(const HostCsr& forward, const HostCsr& transposed);

/// The labeled training nodes a rank trains on in step `step` of `steps`: its owned ones (`train`, with
/// labels[v - first] >= 0) shuffled by (seed, epoch), cut into `steps` nearly equal consecutive pieces.
std::vector<int64_t> step_seeds(const std::vector<int64_t>& train, const std::vector<int64_t>& labels,
                                int64_t first, uint64_t seed, int64_t epoch, int64_t step, int64_t steps);

}  // namespace tessera
