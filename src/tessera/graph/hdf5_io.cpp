// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/hdf5_io.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tessera/core/error.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/runtime.hpp"

namespace tessera {

H5Handle& H5Handle::operator=(H5Handle&& o) noexcept {
  if (this != &o) {
    close();
    id_ = o.id_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void H5Handle::close() noexcept {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      break;
  }
  id_ = H5I_INVALID_HID;
}

void h5_check(const Communicator& comm, bool ok, const std::string& message,
              std::initializer_list<H5Handle*> open) {
  const std::string problem = comm.first_problem(ok, message);
  if (problem.empty()) return;
  for (H5Handle* handle : open) handle->close();
  throw CollectiveError(problem);
}

void prepare_hdf5() {
  static bool done = false;
  if (done) return;
  done = true;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  add_shutdown_hook([] { H5close(); });
}

std::string file_name_of(hid_t object) {
  char name[4096] = {};
  if (H5Fget_name(object, name, sizeof(name)) < 0) return "HDF5 file";
  return name;
}

namespace {

H5Handle mpio_access(const Communicator& comm) {
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  require(fapl.valid() && H5Pset_fapl_mpio(fapl.get(), comm.get(), MPI_INFO_NULL) >= 0,
          "HDF5: cannot set up MPI-IO file access");
  // Metadata reads by one rank and broadcast, writes collective: scales to many ranks on Lustre.
  H5Pset_all_coll_metadata_ops(fapl.get(), true);
  H5Pset_coll_metadata_write(fapl.get(), true);
  return fapl;
}

H5Handle collective_transfer() {
  H5Handle dxpl(H5Pcreate(H5P_DATASET_XFER));
  H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE);
  return dxpl;
}

// Selects rows [first, first+rows) (all columns) in the file space and a matching memory space.
void select_rows(hid_t dataset, int64_t first, int64_t rows, H5Handle& file_space, H5Handle& mem_space) {
  file_space = H5Handle(H5Dget_space(dataset));
  const int rank = H5Sget_simple_extent_ndims(file_space.get());
  require(rank == 1 || rank == 2, "HDF5: dataset of rank ", rank, " where 1 or 2 was expected");
  hsize_t dims[2] = {0, 1};
  H5Sget_simple_extent_dims(file_space.get(), dims, nullptr);
  require(first >= 0 && rows >= 0 && hsize_t(first + rows) <= dims[0], file_name_of(dataset), ": rows [",
          first, ", ", first + rows, ") outside a dataset of ", dims[0], " rows");
  hsize_t start[2] = {hsize_t(first), 0}, count[2] = {hsize_t(rows), dims[1]};
  if (rows == 0) {
    // An empty selection still takes part in the collective call (HDF5 1.10 crashes on H5S_NULL here).
    H5Sselect_none(file_space.get());
    hsize_t one[2] = {1, dims[1] > 0 ? dims[1] : 1};
    mem_space = H5Handle(H5Screate_simple(rank, one, nullptr));
    H5Sselect_none(mem_space.get());
    return;
  }
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  mem_space = H5Handle(H5Screate_simple(rank, count, nullptr));
}

}  // namespace

void require_hdf5_signature(const std::string& path, const std::string& unreadable, const std::string& not_hdf5) {
  require_os(access(path.c_str(), R_OK) == 0, path, ": ", unreadable);
  const std::string kind = file_kind(path);
  require(kind == "a regular file", path, ": ", unreadable, ": ", kind, ", not a regular file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  char magic[8] = {};
  const size_t got = f ? std::fread(magic, 1, 8, f) : 0;
  if (f) std::fclose(f);
  require(got == 8 && std::memcmp(magic, "\x89HDF\r\n\x1a\n", 8) == 0, path, ": ", not_hdf5);
}

std::string describe_format(const std::string& format) {
  if (format.empty()) return "an HDF5 file without a 'format' attribute";
  for (const auto& [name, what] : {std::pair<const char*, const char*>{"tessera-graph", "a Tessera graph file"},
                                   {"tessera-checkpoint", "a Tessera checkpoint"},
                                   {"tessera-partition", "a Tessera partition file"},
                                   {"tessera-predictions", "predictions written by tessera predict"},
                                   {"tessera-embeddings", "embeddings written by tessera train"}})
    if (format == name) return what;
  return "an HDF5 file of format '" + format + "'";
}

H5Handle h5_create_file(const Communicator& comm, const std::string& path) {
  prepare_hdf5();
  H5Handle fapl = mpio_access(comm);
  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  require(file.valid(), path, ": cannot create the file");
  return file;
}

H5Handle h5_open_file(const Communicator& comm, const std::string& path, bool writable) {
  prepare_hdf5();
  H5Handle fapl = mpio_access(comm);
  H5Handle file(H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl.get()));
  return file;
}

bool h5_exists(hid_t location, const std::string& name) {
  // Check every path component: H5Lexists fails on a missing intermediate group.
  size_t pos = 0;
  while ((pos = name.find('/', pos + 1)) != std::string::npos)
    if (H5Lexists(location, name.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
  return H5Lexists(location, name.c_str(), H5P_DEFAULT) > 0;
}

std::vector<std::string> h5_group_members(hid_t location, const std::string& group) {
  std::vector<std::string> names;
  if (!h5_exists(location, group)) return names;
  const H5Handle handle(H5Gopen2(location, group.c_str(), H5P_DEFAULT));
  H5G_info_t info{};
  if (!handle.valid() || H5Gget_info(handle.get(), &info) < 0) return names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[256] = {};
    H5Lget_name_by_idx(handle.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name), H5P_DEFAULT);
    names.push_back(name);
  }
  return names;
}

H5Handle h5_open_dataset(hid_t file, const std::string& file_name, const std::string& name) {
  require(h5_exists(file, name), file_name, ": dataset ", name, " is missing");
  H5Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  require(dataset.valid() && H5Iget_type(dataset.get()) == H5I_DATASET, file_name, ": ", name,
          " is not a readable dataset");
  return dataset;
}

std::vector<int64_t> h5_shape(hid_t dataset) {
  H5Handle space(H5Dget_space(dataset));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(size_t(rank > 0 ? rank : 0));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

std::string h5_shape_text(const std::vector<int64_t>& dims) {
  std::string text;
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return "[" + text + "]";
}

H5T_class_t h5_type_class(hid_t dataset) {
  H5Handle type(H5Dget_type(dataset));
  return H5Tget_class(type.get());
}

H5Handle h5_create_dataset(hid_t file, const std::string& name, hid_t type, const std::vector<int64_t>& dims,
                           int64_t chunk_rows, bool extendible) {
  std::vector<hsize_t> d(dims.begin(), dims.end()), max = d;
  if (extendible) max[0] = H5S_UNLIMITED;
  H5Handle space(H5Screate_simple(int(d.size()), d.data(), max.data()));
  H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (chunk_rows > 0 || extendible) {
    std::vector<hsize_t> chunk = d;
    chunk[0] = hsize_t(chunk_rows > 0 ? chunk_rows : 1 << 16);
    if (!extendible) chunk[0] = std::min(chunk[0], d[0]);  // a fixed-size dataset's chunk must fit in it
    for (hsize_t& c : chunk) c = c == 0 ? 1 : c;
    H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data());
  }
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);
  H5Pset_obj_track_times(dcpl.get(), 0);  // no timestamps: the same data makes the same bytes
  H5Handle dataset(H5Dcreate2(file, name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT));
  require(dataset.valid(), file_name_of(file), ": cannot create dataset ", name);
  return dataset;
}

void h5_set_extent(hid_t dataset, const std::vector<int64_t>& dims) {
  std::vector<hsize_t> d(dims.begin(), dims.end());
  require(H5Dset_extent(dataset, d.data()) >= 0, file_name_of(dataset), ": cannot resize a dataset");
}

namespace {
// A dataset with no rows takes no transfer at all (HDF5 rejects selections on an empty extent). The
// extent is global, so every rank skips alike and collectives stay matched.
bool has_no_rows(hid_t dataset) {
  const std::vector<int64_t> shape = h5_shape(dataset);
  return !shape.empty() && shape[0] == 0;
}
}  // namespace

void h5_write_rows(hid_t dataset, hid_t mem_type, int64_t first, int64_t rows, const void* data) {
  if (rows == 0 && first == 0 && has_no_rows(dataset)) return;
  H5Handle file_space, mem_space;
  select_rows(dataset, first, rows, file_space, mem_space);
  H5Handle dxpl = collective_transfer();
  require(H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), dxpl.get(), data) >= 0,
          file_name_of(dataset), ": write of rows [", first, ", ", first + rows, ") failed (disk full?)");
}

void h5_read_rows(hid_t dataset, hid_t mem_type, int64_t first, int64_t rows, void* data) {
  if (rows == 0 && first == 0 && has_no_rows(dataset)) return;
  H5Handle file_space, mem_space;
  select_rows(dataset, first, rows, file_space, mem_space);
  H5Handle dxpl = collective_transfer();
  require(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), dxpl.get(), data) >= 0,
          file_name_of(dataset), ": read of rows [", first, ", ", first + rows, ") failed (corrupt file?)");
}

namespace {
void select_block(hid_t dataset, int64_t row0, int64_t rows, int64_t col0, int64_t cols, H5Handle& file_space,
                  H5Handle& mem_space) {
  file_space = H5Handle(H5Dget_space(dataset));
  require(H5Sget_simple_extent_ndims(file_space.get()) == 2, file_name_of(dataset),
          ": expected a 2D dataset");
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(file_space.get(), dims, nullptr);
  hsize_t start[2] = {hsize_t(row0), hsize_t(col0)}, count[2] = {hsize_t(rows), hsize_t(cols)};
  // An empty block selects nothing wherever it starts (a block of padding columns starts past the edge);
  // the rank still takes part in the collective transfer.
  if (rows == 0 || cols == 0) {
    H5Sselect_none(file_space.get());
    hsize_t one[2] = {1, 1};
    mem_space = H5Handle(H5Screate_simple(2, one, nullptr));
    H5Sselect_none(mem_space.get());
    return;
  }
  require(row0 >= 0 && col0 >= 0 && hsize_t(row0 + rows) <= dims[0] && hsize_t(col0 + cols) <= dims[1],
          file_name_of(dataset), ": block outside the dataset");
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  mem_space = H5Handle(H5Screate_simple(2, count, nullptr));
}
}  // namespace

void h5_write_block(hid_t dataset, hid_t mem_type, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                    const void* data) {
  H5Handle file_space, mem_space;
  select_block(dataset, row0, rows, col0, cols, file_space, mem_space);
  H5Handle dxpl = collective_transfer();
  require(H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), dxpl.get(), data) >= 0,
          file_name_of(dataset), ": block write failed (disk full?)");
}

void h5_read_block(hid_t dataset, hid_t mem_type, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                   void* data) {
  H5Handle file_space, mem_space;
  select_block(dataset, row0, rows, col0, cols, file_space, mem_space);
  H5Handle dxpl = collective_transfer();
  require(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), dxpl.get(), data) >= 0,
          file_name_of(dataset), ": block read failed (corrupt file?)");
}

void h5_write_attr(hid_t object, const std::string& name, int64_t value) {
  if (H5Aexists(object, name.c_str()) > 0) H5Adelete(object, name.c_str());
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attr(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  require(attr.valid() && H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) >= 0,
          "HDF5: cannot write attribute ", name);
}

void h5_write_attr(hid_t object, const std::string& name, const std::string& value) {
  if (H5Aexists(object, name.c_str()) > 0) H5Adelete(object, name.c_str());
  H5Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attr(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  require(attr.valid() && H5Awrite(attr.get(), type.get(), padded.data()) >= 0,
          "HDF5: cannot write attribute ", name);
}

void h5_write_attr(hid_t object, const std::string& name, double value) {
  if (H5Aexists(object, name.c_str()) > 0) H5Adelete(object, name.c_str());
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attr(H5Acreate2(object, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  require(attr.valid() && H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value) >= 0,
          "HDF5: cannot write attribute ", name);
}

namespace {
// An attribute holding exactly one value: H5Aread writes every element of an array attribute (a file
// may hold one where a scalar belongs) into a buffer sized for one.
bool single_valued(const H5Handle& attr) {
  if (!attr.valid()) return false;
  H5Handle space(H5Aget_space(attr.get()));
  return space.valid() && H5Sget_simple_extent_npoints(space.get()) == 1;
}
}  // namespace

bool h5_read_attr(hid_t object, const std::string& name, double& value) {
  if (H5Aexists(object, name.c_str()) <= 0) return false;
  H5Handle attr(H5Aopen(object, name.c_str(), H5P_DEFAULT));
  if (!single_valued(attr)) return false;
  H5Handle type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_FLOAT) return false;
  return H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value) >= 0;
}

bool h5_read_attr(hid_t object, const std::string& name, int64_t& value) {
  if (H5Aexists(object, name.c_str()) <= 0) return false;
  H5Handle attr(H5Aopen(object, name.c_str(), H5P_DEFAULT));
  if (!single_valued(attr)) return false;
  H5Handle type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_INTEGER) return false;
  return H5Aread(attr.get(), H5T_NATIVE_INT64, &value) >= 0;
}

bool h5_read_attr(hid_t object, const std::string& name, std::string& value) {
  if (H5Aexists(object, name.c_str()) <= 0) return false;
  H5Handle attr(H5Aopen(object, name.c_str(), H5P_DEFAULT));
  if (!single_valued(attr)) return false;
  H5Handle type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_STRING) return false;
  if (H5Tis_variable_str(type.get()) > 0) {
    // h5py writes variable-length UTF-8 by default; HDF5 converts no string between character sets.
    H5Handle mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    if (H5Aread(attr.get(), mem.get(), &text) < 0) return false;
    value = text ? text : "";
    H5free_memory(text);
    return true;
  }
  const size_t size = H5Tget_size(type.get());
  std::string buffer(size, '\0');
  if (H5Aread(attr.get(), type.get(), buffer.data()) < 0) return false;
  value = buffer.substr(0, buffer.find('\0'));
  return true;
}

}  // namespace tessera
