// SPDX-License-Identifier: BSD-3-Clause
// Thin RAII layer over parallel HDF5: every handle closes itself, every failure is an Error naming the
// file and the object. Files are opened through MPI-IO on a communicator (MPI_COMM_SELF for one process);
// reads and writes of row ranges are collective, each rank passing its own (possibly empty) range.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"

namespace tessera {

/// Owns one HDF5 identifier and closes it with the matching H5*close.
class H5Handle {
 public:
  /// No identifier.
  H5Handle() = default;
  /// Takes ownership of `id` (invalid ids are allowed: valid() tells).
  explicit H5Handle(hid_t id) : id_(id) {}
  /// Takes over `o`'s identifier.
  H5Handle(H5Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  /// Closes this one's identifier, then takes over `o`'s.
  H5Handle& operator=(H5Handle&& o) noexcept;
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  /// Closes the handle, except while an exception unwinds the stack: closing a file or a dataset of a
  /// parallel file is collective, and the other ranks may be inside a different collective (one rank's
  /// error). The handle is then released and H5close (prepare_hdf5's shutdown hook) closes it.
  ~H5Handle() {
    if (std::uncaught_exceptions() > 0)
      release();
    else
      close();
  }
  /// The identifier.
  hid_t get() const { return id_; }
  /// It holds a valid identifier.
  bool valid() const { return id_ >= 0; }
  /// Closes it with the matching H5*close (collective for parallel files and their datasets).
  void close() noexcept;
  /// Forgets the identifier without closing it. Used while unwinding from an error: closing a parallel
  /// file is collective and could block, so the file is left to the shutdown hook (H5close).
  void release() noexcept { id_ = H5I_INVALID_HID; }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

/// Collective: comm.check(ok, message), except that when any rank failed, every rank first closes `open`
/// (in the order given: datasets before their file). All ranks agree at that point, so the collective close
/// cannot hang, and a library that catches the error does not keep the file open until shutdown.
void h5_check(const Communicator& comm, bool ok, const std::string& message,
              std::initializer_list<H5Handle*> open);

/// Turns off HDF5's own error printing (we report errors ourselves) and registers H5close as a shutdown
/// hook, so files released during a collective error are closed collectively before MPI_Finalize.
/// Safe to call repeatedly.
void prepare_hdf5();

/// Local, before a file is opened: throws Error "<path>: <unreadable> (<reason>)" when it cannot be read,
/// "<path>: <unreadable>: a FIFO, not a regular file" when it is not a regular file (a FIFO would block the
/// reader), and "<path>: <not_hdf5>" when it does not start with HDF5's signature.
void require_hdf5_signature(const std::string& path, const std::string& unreadable, const std::string& not_hdf5);

/// What a file's root attribute `format` says it is, for messages: "a Tessera checkpoint" for
/// "tessera-checkpoint", "an HDF5 file without a 'format' attribute" for "", and so on.
std::string describe_format(const std::string& format);

/// Collective open/create with the MPI-IO driver on `comm`. Throws Error naming `path`.
H5Handle h5_create_file(const Communicator& comm, const std::string& path);
/// Collective open with the MPI-IO driver; an invalid handle when the file cannot be opened.
H5Handle h5_open_file(const Communicator& comm, const std::string& path, bool writable);

/// Name of the file that holds `object` (for error messages).
std::string file_name_of(hid_t object);

/// Whether the object `name` (a path, parents included) exists.
bool h5_exists(hid_t location, const std::string& name);
/// The names of the links in `group` (by name, each cut at 255 characters); none when it does not exist.
std::vector<std::string> h5_group_members(hid_t location, const std::string& group);
/// Opens a dataset; throws Error naming the file and the dataset when it is missing.
H5Handle h5_open_dataset(hid_t file, const std::string& file_name, const std::string& name);
/// Dimensions of a dataset.
std::vector<int64_t> h5_shape(hid_t dataset);
/// Dimensions as messages print them: "[2708, 1433]".
std::string h5_shape_text(const std::vector<int64_t>& dims);
/// H5T_INTEGER, H5T_FLOAT, ... of a dataset's stored type.
H5T_class_t h5_type_class(hid_t dataset);

/// Creates a dataset of `type` with `dims`; chunked by rows when chunk_rows > 0, extendible along dim 0
/// when `extendible`.
H5Handle h5_create_dataset(hid_t file, const std::string& name, hid_t type, const std::vector<int64_t>& dims,
                           int64_t chunk_rows, bool extendible);
/// Collective: resizes an extendible dataset.
void h5_set_extent(hid_t dataset, const std::vector<int64_t>& dims);

/// Collective transfer of rows [first, first + rows) of a 1D or 2D dataset (all columns). Memory type
/// is `mem_type`; HDF5 converts from the stored type.
void h5_write_rows(hid_t dataset, hid_t mem_type, int64_t first, int64_t rows, const void* data);
/// The reading counterpart of h5_write_rows.
void h5_read_rows(hid_t dataset, hid_t mem_type, int64_t first, int64_t rows, void* data);

/// Collective transfer of the block [row0, row0 + rows) x [col0, col0 + cols) of a 2D dataset (an empty block
/// still takes part). `data` is rows x cols, row-major.
void h5_write_block(hid_t dataset, hid_t mem_type, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                    const void* data);
/// The reading counterpart of h5_write_block.
void h5_read_block(hid_t dataset, hid_t mem_type, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                   void* data);

/// Writes a scalar integer attribute (replacing one of that name); every rank passes the same value.
void h5_write_attr(hid_t object, const std::string& name, int64_t value);
/// Writes a string attribute (fixed length).
void h5_write_attr(hid_t object, const std::string& name, const std::string& value);
/// Writes a scalar floating-point attribute.
void h5_write_attr(hid_t object, const std::string& name, double value);
/// Reads an integer attribute; false when it is missing or of another kind.
bool h5_read_attr(hid_t object, const std::string& name, int64_t& value);
/// Reads a floating-point attribute; false when it is missing or of another kind.
bool h5_read_attr(hid_t object, const std::string& name, double& value);
/// Reads a string attribute; false when it is missing or of another kind.
bool h5_read_attr(hid_t object, const std::string& name, std::string& value);

/// The HDF5 memory type of T.
template <class T>
hid_t h5_native_type();
/// H5T_NATIVE_FLOAT.
template <>
inline hid_t h5_native_type<float>() {
  return H5T_NATIVE_FLOAT;
}
/// H5T_NATIVE_DOUBLE.
template <>
inline hid_t h5_native_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
/// H5T_NATIVE_INT64.
template <>
inline hid_t h5_native_type<int64_t>() {
  return H5T_NATIVE_INT64;
}
/// H5T_NATIVE_INT32.
template <>
inline hid_t h5_native_type<int32_t>() {
  return H5T_NATIVE_INT32;
}
/// H5T_NATIVE_UINT64.
template <>
inline hid_t h5_native_type<uint64_t>() {
  return H5T_NATIVE_UINT64;
}

}  // namespace tessera
