// SPDX-License-Identifier: BSD-3-Clause
// How graph files lay out their datasets, shared by the writer and the reader (graph_file.hpp); not
// installed.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tessera::graph_file_layout {

// Rows per chunk of a chunked row dataset: about 1 MiB per chunk, large enough for fast streaming, small
// enough to read a few rows.
inline int64_t feature_chunk_rows(int64_t features) {
  return std::max<int64_t>(1, (int64_t(1) << 20) / (4 * std::max<int64_t>(features, 1)));
}

// The attribute that marks /node/features as bf16 bits (schema version 3).
inline constexpr const char* kFeatureDtypeAttr = "dtype";

}  // namespace tessera::graph_file_layout
