// SPDX-License-Identifier: BSD-3-Clause
// Random-stream ids of the model: every parameter and dropout site draws from its own stream, and the
// one-rank and 3D implementations use the same ids, so they initialize and drop identically.
#pragma once

#include <cstdint>

namespace tessera::streams {

constexpr uint64_t kWeight = 1000;                  // + layer index
constexpr uint64_t kRootWeight = 2000;              // + layer index (GraphSAGE)
constexpr uint64_t kAttentionSource = 3000;         // + layer index (GAT's a_src)
constexpr uint64_t kAttentionDestination = 4000;    // + layer index (GAT's a_dst)
constexpr uint64_t kLinkNegatives = 5000;           // counter (step key, draw): a step's negatives
constexpr uint64_t kLinkScoreNegatives = 5001;      // counter (pair, draw): MRR's train-score targets
constexpr uint64_t kLinkOrder = 5002;               // counter (epoch, pair): the pairs' order in batches
constexpr uint64_t kLinkDecoder = 6000;             // + decoder layer index (MlpLinkDecoder's weights)
constexpr uint64_t kDropout = 1ull << 40;           // + (epoch << 8) + layer index + 1
constexpr uint64_t kInputDropout = 1ull << 41;      // + epoch
constexpr uint64_t kAttentionDropout = 1ull << 42;  // + (epoch << 8) + layer index + 1

inline uint64_t dropout(int64_t epoch, int layer) {
  return kDropout + (uint64_t(epoch) << 8) + uint64_t(layer) + 1;
}
inline uint64_t attention_dropout(int64_t epoch, int layer) {
  return kAttentionDropout + (uint64_t(epoch) << 8) + uint64_t(layer) + 1;
}
inline uint64_t input_dropout(int64_t epoch) {
  return kInputDropout + uint64_t(epoch);
}

}  // namespace tessera::streams
