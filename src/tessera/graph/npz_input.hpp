// SPDX-License-Identifier: BSD-3-Clause
// Streaming reader for NumPy .npz archives (a zip of .npy files, deflated or stored, zip64 for large
// members), as OGB ships ogbn-papers100M (raw/data.npz, raw/node-label.npz). Arrays are read in
// pieces and converted to the caller's type, so memory stays bounded whatever the array's size.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

/// An .npy array's header.
struct NpyHeader {
  char kind = 0;               ///< 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  int item_size = 0;           ///< bytes per element
  std::vector<int64_t> shape;  ///< dimensions
  /// Number of elements.
  int64_t count() const;
};

/// One array of an .npz, read sequentially.
class NpyStream {
 public:
  /// Opens `member` of the zip file `archive` (stored or deflated); throws Error naming both.
  NpyStream(const std::string& archive, const std::string& member);
  ~NpyStream();
  NpyStream(const NpyStream&) = delete;
  NpyStream& operator=(const NpyStream&) = delete;

  /// The array's header.
  const NpyHeader& header() const { return header_; }
  /// Reads the next `count` elements converted to double (exact for all integer types used).
  void read(double* out, int64_t count);
  /// The same, converted to int64.
  void read(int64_t* out, int64_t count);
  /// The same, converted to float.
  void read(float* out, int64_t count);
  /// Skips `count` elements.
  void skip(int64_t count);

 private:
  void open(const std::string& archive, const std::string& member);
  void close() noexcept;
  void read_bytes(void* out, size_t bytes);
  template <class T>
  void read_converted(T* out, int64_t count);
  std::string where_;
  std::FILE* file_ = nullptr;
  bool deflated_ = false;
  z_stream zs_{};
  bool zs_open_ = false;
  std::vector<unsigned char> in_buffer_;
  int64_t compressed_left_ = 0, raw_left_ = 0;
  NpyHeader header_;
  std::vector<unsigned char> scratch_;
};

/// Names of the members (without ".npy") in an .npz archive.
std::vector<std::string> npz_members(const std::string& archive);

}  // namespace tessera
