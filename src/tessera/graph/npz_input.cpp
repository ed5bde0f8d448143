// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/npz_input.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "tessera/core/error.hpp"

namespace tessera {

int64_t NpyHeader::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

uint64_t le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

struct ZipEntry {
  std::string name;
  int method = 0;
  uint64_t compressed = 0, uncompressed = 0, local_offset = 0;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

FilePtr open_file(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  require_os(f != nullptr, path, ": cannot open");
  return f;
}

void read_at(std::FILE* f, uint64_t offset, void* out, size_t bytes, const std::string& path) {
  require(fseeko(f, off_t(offset), SEEK_SET) == 0 && std::fread(out, 1, bytes, f) == bytes, path,
          ": truncated zip archive");
}

// Reads the central directory, following zip64 records when the archive or a member passes 4 GiB.
std::vector<ZipEntry> read_directory(const std::string& path) {
  FilePtr f = open_file(path);
  require(fseeko(f.get(), 0, SEEK_END) == 0, path, ": cannot seek");
  const uint64_t size = uint64_t(ftello(f.get()));
  const uint64_t tail = std::min<uint64_t>(size, 65557);
  std::vector<unsigned char> buf(tail);
  read_at(f.get(), size - tail, buf.data(), tail, path);
  int64_t eocd = -1;
  for (int64_t i = int64_t(tail) - 22; i >= 0; --i)
    if (le(&buf[size_t(i)], 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  require(eocd >= 0, path, ": not a zip archive (no end-of-directory record; truncated?)");
  uint64_t entries = le(&buf[size_t(eocd) + 10], 2), dir_size = le(&buf[size_t(eocd) + 12], 4),
           dir_offset = le(&buf[size_t(eocd) + 16], 4);
  if (eocd >= 20 && le(&buf[size_t(eocd) - 20], 4) == 0x07064b50) {
    unsigned char rec[56];
    read_at(f.get(), le(&buf[size_t(eocd) - 20 + 8], 8), rec, sizeof(rec), path);
    require(le(rec, 4) == 0x06064b50, path, ": bad zip64 end-of-directory record");
    entries = le(rec + 32, 8);
    dir_size = le(rec + 40, 8);
    dir_offset = le(rec + 48, 8);
  }
  require(dir_size <= size && dir_offset <= size - dir_size, path,
          ": truncated zip archive (directory past the end)");
  std::vector<unsigned char> dir(dir_size);
  read_at(f.get(), dir_offset, dir.data(), dir_size, path);
  std::vector<ZipEntry> out;
  size_t p = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    require(p + 46 <= dir.size() && le(&dir[p], 4) == 0x02014b50, path, ": corrupt zip directory");
    ZipEntry z;
    z.method = int(le(&dir[p + 10], 2));
    z.compressed = le(&dir[p + 20], 4);
    z.uncompressed = le(&dir[p + 24], 4);
    const size_t name_len = le(&dir[p + 28], 2), extra_len = le(&dir[p + 30], 2),
                 comment_len = le(&dir[p + 32], 2);
    z.local_offset = le(&dir[p + 42], 4);
    require(p + 46 + name_len + extra_len <= dir.size(), path, ": corrupt zip directory");
    z.name.assign(reinterpret_cast<const char*>(&dir[p + 46]), name_len);
    for (size_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint64_t id = le(&dir[x], 2), len = le(&dir[x + 2], 2);
      if (id == 0x0001) {  // zip64: only the fields that overflowed are present, in this order
        size_t q = x + 4;
        if (z.uncompressed == 0xFFFFFFFF) z.uncompressed = le(&dir[q], 8), q += 8;
        if (z.compressed == 0xFFFFFFFF) z.compressed = le(&dir[q], 8), q += 8;
        if (z.local_offset == 0xFFFFFFFF) z.local_offset = le(&dir[q], 8);
      }
      x += 4 + len;
    }
    out.push_back(z);
    p += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

}  // namespace

std::vector<std::string> npz_members(const std::string& archive) {
  std::vector<std::string> names;
  for (const ZipEntry& e : read_directory(archive)) {
    std::string n = e.name;
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".npy") == 0) n.resize(n.size() - 4);
    names.push_back(n);
  }
  return names;
}

NpyStream::NpyStream(const std::string& archive, const std::string& member) : where_(archive + ":" + member) {
  // A constructor that throws runs no destructor: the file and the zlib stream are released here.
  try {
    open(archive, member);
  } catch (...) {
    close();
    throw;
  }
}

void NpyStream::open(const std::string& archive, const std::string& member) {
  ZipEntry entry;
  bool found = false;
  for (const ZipEntry& e : read_directory(archive))
    if (e.name == member + ".npy" || e.name == member) entry = e, found = true;
  require(found, archive, ": array '", member, "' is missing");
  require(entry.method == 0 || entry.method == 8, where_, ": unsupported zip compression method ",
          entry.method);
  file_ = std::fopen(archive.c_str(), "rb");
  require_os(file_ != nullptr, archive, ": cannot open");
  unsigned char local[30];
  read_at(file_, entry.local_offset, local, sizeof(local), archive);
  require(le(local, 4) == 0x04034b50, where_, ": corrupt zip member header");
  require(
      fseeko(file_, off_t(entry.local_offset + 30 + le(local + 26, 2) + le(local + 28, 2)), SEEK_SET) == 0,
      where_, ": cannot seek");
  deflated_ = entry.method == 8;
  compressed_left_ = int64_t(entry.compressed);
  raw_left_ = int64_t(entry.uncompressed);
  if (deflated_) {
    require(inflateInit2(&zs_, -MAX_WBITS) == Z_OK, where_, ": zlib initialisation failed");
    zs_open_ = true;
    in_buffer_.resize(size_t(1) << 20);
  }
  // .npy header: magic, version, header length, then a Python dict literal.
  unsigned char magic[10];
  read_bytes(magic, 8);
  require(std::memcmp(magic, "\x93NUMPY", 6) == 0, where_, ": not a .npy array");
  const int major = magic[6];
  size_t header_len = 0;
  if (major == 1) {
    read_bytes(magic, 2);
    header_len = le(magic, 2);
  } else {
    read_bytes(magic, 4);
    header_len = le(magic, 4);
  }
  // numpy writes headers of a few hundred bytes; a huge length is damage, not a reason to allocate it.
  require(header_len <= 65536, where_, ": .npy header length ", header_len, " is implausible");
  std::string dict(header_len, '\0');
  read_bytes(dict.data(), header_len);
  const size_t descr = dict.find("'descr'");
  const size_t quote = dict.find('\'', dict.find(':', descr) + 1);
  require(descr != std::string::npos && quote != std::string::npos && quote + 3 < dict.size(), where_,
          ": unreadable .npy header");
  const std::string type = dict.substr(quote + 1, dict.find('\'', quote + 1) - quote - 1);
  require(type.size() >= 3 && (type[0] == '<' || type[0] == '|'), where_, ": dtype '", type,
          "' is not little-endian");
  header_.kind = type[1];
  header_.item_size = std::atoi(type.c_str() + 2);
  require(std::string("fiub").find(header_.kind) != std::string::npos &&
              (header_.item_size == 1 || header_.item_size == 2 || header_.item_size == 4 ||
               header_.item_size == 8),
          where_, ": unsupported dtype '", type, "'");
  require(dict.find("'fortran_order': False") != std::string::npos, where_,
          ": Fortran-ordered arrays are not supported");
  const size_t shape_begin = dict.find('(', dict.find("'shape'")), shape_end = dict.find(')', shape_begin);
  require(shape_begin != std::string::npos && shape_end != std::string::npos, where_, ": unreadable shape");
  const std::string shape = dict.substr(shape_begin + 1, shape_end - shape_begin - 1);
  int64_t count = 1;
  for (size_t pos = 0; pos < shape.size();) {
    const size_t comma = std::min(shape.find(',', pos), shape.size());
    const size_t first = shape.find_first_not_of(' ', pos);
    if (first < comma) {
      int64_t dim = -1;
      const auto [end, error] = std::from_chars(shape.data() + first, shape.data() + comma, dim);
      require(error == std::errc() && dim >= 0 &&
                  shape.find_first_not_of(' ', size_t(end - shape.data())) >= comma,
              where_, ": unreadable shape '(", shape, ")'");
      // The product must fit: a shape is compared with the member's size in bytes below.
      require(dim == 0 || count <= (int64_t(1) << 56) / dim, where_, ": shape '(", shape,
              ")' is implausibly large");
      count *= dim;
      header_.shape.push_back(dim);
    }
    pos = comma + 1;
  }
  require(raw_left_ >= count * header_.item_size, where_, ": member shorter than its shape says");
}

NpyStream::~NpyStream() {
  close();
}

void NpyStream::close() noexcept {
  if (zs_open_) inflateEnd(&zs_);
  zs_open_ = false;
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

void NpyStream::read_bytes(void* out, size_t bytes) {
  require(int64_t(bytes) <= raw_left_, where_, ": read past the end of the array (truncated archive?)");
  raw_left_ -= int64_t(bytes);
  if (!deflated_) {
    require(std::fread(out, 1, bytes, file_) == bytes, where_, ": truncated archive");
    return;
  }
  zs_.next_out = static_cast<Bytef*>(out);
  zs_.avail_out = uInt(bytes);
  while (zs_.avail_out > 0) {
    if (zs_.avail_in == 0) {
      const size_t want = size_t(std::min<int64_t>(compressed_left_, int64_t(in_buffer_.size())));
      const size_t got = std::fread(in_buffer_.data(), 1, want, file_);
      require(got > 0, where_, ": truncated archive");
      compressed_left_ -= int64_t(got);
      zs_.next_in = in_buffer_.data();
      zs_.avail_in = uInt(got);
    }
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    require(rc == Z_OK || (rc == Z_STREAM_END && zs_.avail_out == 0), where_, ": corrupt deflate data (",
            zs_.msg ? zs_.msg : "unexpected end", ")");
  }
}

namespace {
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      uint32_t m = mantissa;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (m & 0x3FF) << 13;
    }
  } else if (exponent == 31) {
    bits = sign | 0x7F800000u | mantissa << 13;
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
}  // namespace

template <class T>
void NpyStream::read_converted(T* out, int64_t count) {
  const int64_t chunk = int64_t(1) << 16;
  scratch_.resize(size_t(chunk * header_.item_size));
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(chunk, count - done);
    read_bytes(scratch_.data(), size_t(n * header_.item_size));
    const unsigned char* p = scratch_.data();
    for (int64_t i = 0; i < n; ++i, p += header_.item_size) {
      T v{};
      if (header_.kind == 'f') {
        if (header_.item_size == 2)
          v = T(half_to_float(uint16_t(le(p, 2))));
        else if (header_.item_size == 4) {
          float f;
          std::memcpy(&f, p, 4);
          v = T(f);
        } else {
          double d;
          std::memcpy(&d, p, 8);
          v = T(d);
        }
      } else if (header_.kind == 'i') {
        const int bits = 8 * header_.item_size;
        const uint64_t raw = le(p, header_.item_size);
        const int64_t s = bits == 64 ? int64_t(raw) : int64_t(raw << (64 - bits)) >> (64 - bits);
        v = T(s);
      } else {
        v = T(le(p, header_.item_size));
      }
      out[done + i] = v;
    }
    done += n;
  }
}

void NpyStream::read(double* out, int64_t count) {
  read_converted(out, count);
}
void NpyStream::read(int64_t* out, int64_t count) {
  require(header_.kind != 'f', where_, ": expected integers, the array holds floats");
  read_converted(out, count);
}
void NpyStream::read(float* out, int64_t count) {
  read_converted(out, count);
}

void NpyStream::skip(int64_t count) {
  std::vector<unsigned char> sink(size_t(1) << 16);
  int64_t bytes = count * header_.item_size;
  while (bytes > 0) {
    const size_t n = size_t(std::min<int64_t>(bytes, int64_t(sink.size())));
    read_bytes(sink.data(), n);
    bytes -= int64_t(n);
  }
}

}  // namespace tessera
