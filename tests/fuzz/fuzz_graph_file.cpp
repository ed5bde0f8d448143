// SPDX-License-Identifier: BSD-3-Clause
// The graph-file reader and validator (GraphFileReader, validate_graph, balanced_row_begins, read_rows),
// fuzzed through the structure of the file rather than its bytes: the input picks a small valid graph and
// then tampers with it (attributes missing, of the wrong class, arrays instead of scalars, impossible
// values; datasets missing, of the wrong type or shape, declared far larger than written; offsets, ids,
// labels, features and split entries set to edge values). HDF5's own parser of raw bytes is HDF5's to fuzz.
// Every input must end in a Tessera error or a file whose validated contents the checks below confirm.
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_input_file.hpp"
#include "fuzz_runtime.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"

namespace {

using tessera::H5Handle;

using tessera_fuzz::Input;

// The values offsets, ids, labels and sizes go wrong with.
int64_t edge_value(Input& in, int64_t n, int64_t e) {
  switch (in.below(12)) {
    case 0:
      return -1;
    case 1:
      return n;
    case 2:
      return n - 1;
    case 3:
      return n + 1;
    case 4:
      return e;
    case 5:
      return e + 1;
    case 6:
      return std::numeric_limits<int64_t>::max();
    case 7:
      return std::numeric_limits<int64_t>::min();
    case 8:
      return int64_t(1) << 31;
    case 9:
      return int64_t(1) << 40;
    case 10:
      return 0;
    default:
      return int64_t(in.byte()) - 64;
  }
}

struct Graph {
  int64_t n = 0, f = 0, c = 0;
  std::vector<int64_t> indptr, indices, labels;
  std::vector<float> features;
  std::vector<std::vector<int64_t>> splits;  // train, valid, test
};

Graph small_graph(Input& in) {
  Graph g;
  g.n = 1 + in.below(24);
  g.f = 1 + in.below(4);
  g.c = in.below(6);
  uint32_t state = 1u + in.byte();
  auto next = [&] { return state = state * 1664525u + 1013904223u, state >> 8; };
  g.indptr.push_back(0);
  for (int64_t v = 0; v < g.n; ++v) {
    for (uint32_t k = next() % 4; k > 0; --k) g.indices.push_back(int64_t(next() % uint32_t(g.n)));
    g.indptr.push_back(int64_t(g.indices.size()));
    g.labels.push_back(g.c == 0 ? -1 : int64_t(next() % uint32_t(g.c + 1)) - 1);
  }
  for (int64_t k = 0; k < g.n * g.f; ++k) g.features.push_back(float(next() % 1000) / 100.0f - 5.0f);
  g.splits.resize(3);
  for (int64_t v = 0; v < g.n; ++v) {
    const uint32_t s = next() % 4;
    if (s < 3) g.splits[s].push_back(v);
  }
  return g;
}

void tamper_values(Input& in, Graph& g) {
  const int64_t e = int64_t(g.indices.size());
  auto pick = [&](size_t size) { return size_t(in.byte()) % size; };
  switch (in.below(5)) {
    case 0:
      g.indptr[pick(g.indptr.size())] = edge_value(in, g.n, e);
      break;
    case 1:
      if (e > 0) g.indices[pick(g.indices.size())] = edge_value(in, g.n, e);
      break;
    case 2:
      g.labels[pick(g.labels.size())] = edge_value(in, g.c, e);
      break;
    case 3: {
      const float bad[] = {NAN, INFINITY, -INFINITY, 3e38f, -0.0f};
      g.features[pick(g.features.size())] = bad[in.below(5)];
      break;
    }
    default: {
      std::vector<int64_t>& split = g.splits[in.below(3)];
      if (split.empty() || in.below(2) == 0)
        split.push_back(split.empty() || in.below(2) == 0 ? edge_value(in, g.n, e)
                                                          : split[pick(split.size())]);
      else
        split[pick(split.size())] = edge_value(in, g.n, e);
    }
  }
}

// How a dataset or attribute is written: as it should be, or wrong in one way.
enum Shape : uint8_t { kRight, kMissing, kWrongClass, kArray, kLonger, kShorter, kTwoD, kHuge, kShapes };

void write_dataset(hid_t file, const std::string& name, hid_t type, std::vector<int64_t> dims,
                   const void* values, Shape shape) {
  if (shape == kMissing) return;
  const bool written = shape == kRight;
  if (shape == kWrongClass) type = H5Tget_class(type) == H5T_FLOAT ? H5T_STD_I32LE : H5T_IEEE_F64LE;
  if (shape == kLonger) dims[0] += 1;
  if (shape == kShorter) dims[0] = dims[0] > 0 ? dims[0] - 1 : 0;
  if (shape == kTwoD) dims.push_back(2);
  if (shape == kHuge) dims.back() = int64_t(1) << 40;  // declared, never written: allocation is late
  if (shape == kArray) dims.insert(dims.begin(), 1);
  std::vector<hsize_t> extent(dims.begin(), dims.end());
  H5Handle space(H5Screate_simple(int(extent.size()), extent.data(), nullptr));
  H5Handle link(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(link.get(), 1);
  H5Handle set(H5Dcreate2(file, name.c_str(), type, space.get(), link.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!set.valid()) std::abort();  // the harness cannot write its own file: not a finding
  if (written) {
    const hid_t memory = H5Tget_class(type) == H5T_FLOAT ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT64;
    if (H5Dwrite(set.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) < 0) std::abort();
  }
}

void write_int_attribute(hid_t file, const char* name, int64_t value, Shape shape, Input& in) {
  if (shape == kMissing) return;
  const hsize_t count = shape == kArray ? 2 + in.below(6) : 1;
  H5Handle space(shape == kArray ? H5Screate_simple(1, &count, nullptr) : H5Screate(H5S_SCALAR));
  const std::vector<int64_t> values(count, shape == kLonger ? edge_value(in, value, value) : value);
  const hid_t type = shape == kWrongClass ? H5T_IEEE_F64LE : H5T_STD_I64LE;
  H5Handle attr(H5Acreate2(file, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()) < 0) std::abort();
}

void write_string_attribute(hid_t file, const char* name, const std::string& value, Shape shape, Input& in) {
  if (shape == kMissing) return;
  if (shape == kWrongClass) return write_int_attribute(file, name, 7, kRight, in);
  const hsize_t count = shape == kArray ? 2 + in.below(6) : 1;
  H5Handle space(shape == kArray ? H5Screate_simple(1, &count, nullptr) : H5Screate(H5S_SCALAR));
  H5Handle type(H5Tcopy(H5T_C_S1));
  const bool variable = shape == kLonger || in.below(2) == 0;  // h5py writes variable-length UTF-8
  H5Tset_size(type.get(), variable ? H5T_VARIABLE : value.size() + 1);
  if (variable) H5Tset_cset(type.get(), H5T_CSET_UTF8);
  H5Handle attr(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  std::vector<const char*> pointers(count, value.c_str());
  std::string fixed;
  for (hsize_t i = 0; i < count; ++i) fixed.append(value.c_str(), value.size() + 1);
  if (H5Awrite(attr.get(), type.get(), variable ? static_cast<const void*>(pointers.data()) : fixed.data()) <
      0)
    std::abort();
}

std::string write_file(Input& in) {
  Graph g = small_graph(in);
  Shape attr_shape[9] = {}, set_shape[7] = {};
  for (int round = 0; round < 6 && in.more(); ++round) {
    const uint32_t what = in.below(3);
    if (what == 0) tamper_values(in, g);
    if (what == 1) attr_shape[in.below(9)] = Shape(in.below(kHuge));
    if (what == 2) set_shape[in.below(7)] = Shape(in.below(kShapes));
  }
  const std::string path = tessera_fuzz::write_input(nullptr, 0, ".h5");
  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file.valid()) std::abort();
  const hid_t root = file.get();
  write_string_attribute(root, "format", "tessera-graph", attr_shape[0], in);
  write_int_attribute(root, "version", 1, attr_shape[1], in);
  write_int_attribute(root, "num_nodes", g.n, attr_shape[2], in);
  write_int_attribute(root, "num_edges", int64_t(g.indices.size()), attr_shape[3], in);
  write_int_attribute(root, "num_features", g.f, attr_shape[4], in);
  write_int_attribute(root, "num_classes", g.c, attr_shape[5], in);
  write_int_attribute(root, "symmetric", 0, attr_shape[6], in);
  write_string_attribute(root, "name", "fuzz", attr_shape[7], in);
  write_string_attribute(root, "source", "tests/fuzz", attr_shape[8], in);
  write_dataset(root, "/graph/indptr", H5T_STD_I64LE, {g.n + 1}, g.indptr.data(), set_shape[0]);
  write_dataset(root, "/graph/indices", H5T_STD_I64LE, {int64_t(g.indices.size())}, g.indices.data(),
                set_shape[1]);
  write_dataset(root, "/node/features", H5T_IEEE_F32LE, {g.n, g.f}, g.features.data(), set_shape[2]);
  write_dataset(root, "/node/labels", H5T_STD_I64LE, {g.n}, g.labels.data(), set_shape[3]);
  const char* names[3] = {"train", "valid", "test"};
  for (int s = 0; s < 3; ++s)
    write_dataset(root, std::string("/split/") + names[s], H5T_STD_I64LE, {int64_t(g.splits[s].size())},
                  g.splits[s].data(), set_shape[4 + s]);
  return path;
}

// What validation promised, checked from plain reads: a violation is a finding.
void check_validated(const tessera::GraphFileReader& reader, Input& in) {
  const tessera::Communicator& comm = tessera_fuzz::world();
  const tessera::GraphMeta& m = reader.meta();
  const std::vector<int64_t> begins =
      balanced_row_begins(reader, comm, {double(in.below(100)), double(in.below(100))});
  if (begins.front() != 0 || begins.back() != m.num_nodes) std::abort();
  const tessera::GraphSlice slice = reader.read_rows(0, m.num_nodes);
  if (slice.adjacency.row_ptr(m.num_nodes) != m.num_edges) std::abort();
  for (int64_t v = 0; v < m.num_nodes; ++v) {
    if (slice.adjacency.row_ptr(v + 1) < slice.adjacency.row_ptr(v)) std::abort();
    if (slice.labels(v) < -1 || slice.labels(v) >= m.num_classes) std::abort();
    for (int64_t j = 0; j < m.num_features; ++j)
      if (!std::isfinite(slice.features(v, j))) std::abort();
  }
  for (int64_t k = 0; k < m.num_edges; ++k)
    if (slice.adjacency.col_idx(k) < 0 || slice.adjacency.col_idx(k) >= m.num_nodes) std::abort();
  std::vector<int> seen(size_t(m.num_nodes), 0);
  for (const tessera::SplitInfo& split : reader.splits())
    for (const int64_t v : reader.read_split(split.name, 0, split.size))
      if (v < 0 || v >= m.num_nodes || seen[size_t(v)]++ != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera_fuzz::start_runtime();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5's own error stack print is noise here
  // MPI allocates some of its state at the first collective and keeps it: once here, not inside an input.
  uint8_t valid_graph[] = {9, 2, 3, 42};
  LLVMFuzzerTestOneInput(valid_graph, sizeof(valid_graph));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  const std::string path = write_file(in);
  tessera_fuzz::run_input([&] {
    const tessera::GraphFileReader reader(tessera_fuzz::world(), path);
    validate_graph(reader, tessera_fuzz::world());
    check_validated(reader, in);
  });
  return 0;
}
