// SPDX-License-Identifier: BSD-3-Clause
// Damages a graph file in one specific way, for the bad-input tests (plain HDF5 C API, no Tessera code):
//   h5_tamper FILE version N          set the root attribute version to N
//   h5_tamper FILE shrink DATASET     replace a 1D int64 dataset with one of 3 entries
//   h5_tamper FILE drop DATASET       delete a dataset
//   h5_tamper FILE label ROW VALUE    write VALUE into /node/labels[ROW]
//   h5_tamper FILE set DATASET I VALUE  write VALUE into entry I of a 1D int64 dataset
//   h5_tamper FILE feature ROW COL VALUE  write the float VALUE (may be nan or inf) into /node/features
//   h5_tamper FILE copy SRC J DST I     write entry J of SRC into entry I of DST (1D int64 datasets)
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// Reads (or writes) entry `index` of a 1D int64 dataset.
herr_t access_entry(hid_t file, const char* name, long long index, int64_t* value, bool write) {
  hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
  if (dset < 0) return -1;
  hid_t space = H5Dget_space(dset);
  hsize_t start[1] = {hsize_t(index)}, count[1] = {1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(1, count, nullptr);
  const herr_t status = write ? H5Dwrite(dset, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, value)
                              : H5Dread(dset, H5T_NATIVE_INT64, mem, space, H5P_DEFAULT, value);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(dset);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: h5_tamper FILE version N | shrink DATASET | drop DATASET | label ROW VALUE | "
                 "set DATASET I VALUE | feature ROW COL VALUE | copy SRC J DST I\n");
    return 2;
  }
  hid_t file = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return 1;
  herr_t status = 0;
  if (std::strcmp(argv[2], "version") == 0) {
    const int64_t v = std::atoll(argv[3]);
    hid_t attr = H5Aopen(file, "version", H5P_DEFAULT);
    status = H5Awrite(attr, H5T_NATIVE_INT64, &v);
    H5Aclose(attr);
  } else if (std::strcmp(argv[2], "shrink") == 0 || std::strcmp(argv[2], "drop") == 0) {
    status = H5Ldelete(file, argv[3], H5P_DEFAULT);
    if (argv[2][0] == 's') {
      hsize_t dims[1] = {3};
      const int64_t values[3] = {0, 0, 0};
      hid_t space = H5Screate_simple(1, dims, nullptr);
      hid_t dset = H5Dcreate2(file, argv[3], H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      status = H5Dwrite(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
      H5Dclose(dset);
      H5Sclose(space);
    }
  } else if ((std::strcmp(argv[2], "label") == 0 && argc == 5) ||
             (std::strcmp(argv[2], "set") == 0 && argc == 6)) {
    const bool label = argv[2][0] == 'l';
    int64_t value = std::atoll(argv[label ? 4 : 5]);
    status = access_entry(file, label ? "/node/labels" : argv[3], std::atoll(argv[label ? 3 : 4]), &value, true);
  } else if (std::strcmp(argv[2], "feature") == 0 && argc == 6) {
    hid_t dset = H5Dopen2(file, "/node/features", H5P_DEFAULT);
    hid_t space = H5Dget_space(dset);
    hsize_t start[2] = {hsize_t(std::atoll(argv[3])), hsize_t(std::atoll(argv[4]))}, count[2] = {1, 1};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t mem = H5Screate_simple(2, count, nullptr);
    const float value = std::strtof(argv[5], nullptr);
    status = H5Dwrite(dset, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &value);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(dset);
  } else if (std::strcmp(argv[2], "copy") == 0 && argc == 7) {
    int64_t value = 0;
    status = access_entry(file, argv[3], std::atoll(argv[4]), &value, false);
    if (status >= 0) status = access_entry(file, argv[5], std::atoll(argv[6]), &value, true);
  } else {
    std::fprintf(stderr, "h5_tamper: unknown action %s\n", argv[2]);
    return 2;
  }
  H5Fclose(file);
  return status < 0 ? 1 : 0;
}
