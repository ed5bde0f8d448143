// SPDX-License-Identifier: BSD-3-Clause
// Streaming readers for the text files OGB ships: gzip-compressed CSV (read through zlib, also plain
// text) split into lines and fields, with parse errors that name the file, line and column.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

/// Reads a gzip (or plain) text file line by line with bounded memory. Throws Error naming the file
/// and line on a truncated or corrupt stream.
class GzipLineReader {
 public:
  /// Opens `path`; throws Error naming it when it cannot.
  explicit GzipLineReader(std::string path);
  ~GzipLineReader();
  GzipLineReader(const GzipLineReader&) = delete;
  GzipLineReader& operator=(const GzipLineReader&) = delete;

  /// Next line without its newline; false at the end of the file.
  bool next(std::string_view& line);
  /// The last line's number (1-based).
  int64_t line_number() const { return line_number_; }
  /// The file's path.
  const std::string& path() const { return path_; }
  /// Fraction of the compressed file consumed, for progress reports.
  double fraction_read() const;

 private:
  bool refill();
  std::string path_;
  gzFile file_ = nullptr;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
  int64_t compressed_size_ = 0;
};

/// Splits a CSV line at commas into fields (no quoting: OGB files hold numbers only).
void split_csv(std::string_view line, std::vector<std::string_view>& fields);

/// Field parsers that throw Error("<file>: line L, column C: ...").
int64_t parse_int(std::string_view field, const GzipLineReader& at, size_t column);
/// Parses a float and rejects NaN and infinities.
float parse_finite_float(std::string_view field, const GzipLineReader& at, size_t column);

/// Reads a CSV file whose every line holds exactly one integer.
std::vector<int64_t> read_int_column(const std::string& path);

}  // namespace tessera
