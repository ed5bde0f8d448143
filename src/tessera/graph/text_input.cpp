// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/text_input.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "tessera/core/error.hpp"

namespace tessera {

GzipLineReader::GzipLineReader(std::string path) : path_(std::move(path)), buffer_(size_t(1) << 20) {
  struct stat info {};
  require_os(stat(path_.c_str(), &info) == 0, path_, ": cannot open");
  require(S_ISREG(info.st_mode), path_, ": not a regular file");
  compressed_size_ = int64_t(info.st_size);
  file_ = gzopen(path_.c_str(), "rb");
  require_os(file_ != nullptr, path_, ": cannot open");
  gzbuffer(file_, 1 << 18);
}

GzipLineReader::~GzipLineReader() {
  if (file_) gzclose(file_);
}

double GzipLineReader::fraction_read() const {
  return compressed_size_ > 0 ? double(gzoffset(file_)) / double(compressed_size_) : 1.0;
}

bool GzipLineReader::refill() {
  if (eof_) return false;
  // Keep the partial line at the front; grow the buffer if one line fills it.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);
  const int got = gzread(file_, buffer_.data() + end_, unsigned(buffer_.size() - end_));
  if (got < 0 || (got == 0 && !gzeof(file_))) {
    int code = 0;
    const char* text = gzerror(file_, &code);
    fail(path_, ": line ", line_number_ + 1, ": corrupt gzip data (", text, ")");
  }
  if (got == 0) {
    int code = 0;
    const char* text = gzerror(file_, &code);
    require(code == Z_OK || code == Z_STREAM_END, path_, ": line ", line_number_ + 1,
            ": truncated or corrupt gzip data (", text, ")");
    eof_ = true;
    return false;
  }
  end_ += size_t(got);
  return true;
}

bool GzipLineReader::next(std::string_view& line) {
  for (;;) {
    const char* start = buffer_.data() + begin_;
    const void* newline = std::memchr(start, '\n', end_ - begin_);
    if (newline) {
      size_t length = size_t(static_cast<const char*>(newline) - start);
      begin_ += length + 1;
      if (length > 0 && start[length - 1] == '\r') --length;
      line = std::string_view(start, length);
      ++line_number_;
      return true;
    }
    if (!refill()) {
      if (begin_ == end_) return false;
      // Last line without a newline.
      line = std::string_view(buffer_.data() + begin_, end_ - begin_);
      begin_ = end_;
      ++line_number_;
      return true;
    }
  }
}

void split_csv(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(
        line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

namespace {
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

int64_t parse_int(std::string_view field, const GzipLineReader& at, size_t column) {
  field = trim(field);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  require(ec == std::errc() && end == field.data() + field.size() && !field.empty(), at.path(), ": line ",
          at.line_number(), ", column ", column + 1, ": '", field, "' is not an integer");
  return value;
}

float parse_finite_float(std::string_view field, const GzipLineReader& at, size_t column) {
  field = trim(field);
  float value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  require(ec == std::errc() && end == field.data() + field.size() && !field.empty(), at.path(), ": line ",
          at.line_number(), ", column ", column + 1, ": '", field, "' is not a number");
  require(std::isfinite(value), at.path(), ": line ", at.line_number(), ", column ", column + 1,
          ": value is ", field, " (features must be finite)");
  return value;
}

std::vector<int64_t> read_int_column(const std::string& path) {
  GzipLineReader reader(path);
  std::vector<int64_t> values;
  std::vector<std::string_view> fields;
  std::string_view line;
  while (reader.next(line)) {
    split_csv(line, fields);
    require(fields.size() == 1, path, ": line ", reader.line_number(), ": expected 1 column, found ",
            fields.size());
    values.push_back(parse_int(fields[0], reader, 0));
  }
  return values;
}

}  // namespace tessera
