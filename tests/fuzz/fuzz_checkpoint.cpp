// SPDX-License-Identifier: BSD-3-Clause
// The checkpoint reader (load_checkpoint), fuzzed through the file's structure: a real checkpoint of a
// small model (two GCN layers and a BatchNorm) is written, then the input tampers with it — root
// attributes deleted, of the wrong class, arrays instead of scalars, other values; arrays deleted,
// replaced by ones of another shape or type, or filled with non-finite values — and the reader must end in
// a Tessera error or in training progress that makes sense. HDF5's parser of raw bytes is HDF5's to fuzz.
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_input_file.hpp"
#include "fuzz_runtime.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/hdf5_io.hpp"
#include "tessera/models/training/checkpoint.hpp"
#include "tessera/models/nn/conv.hpp"
#include "tessera/models/nn/norm.hpp"

namespace {

using tessera::H5Handle;

using tessera_fuzz::Input;

struct Fixture {
  tessera::ProcessGrid grid{tessera_fuzz::world(), tessera::GridShape{}};
  tessera::Sequential model{grid, 3, tessera::RunOptions{}, 5};
  std::unique_ptr<tessera::Adam> adam;
  std::string path;

  Fixture() {
    model.add<tessera::GcnConv>(4, tessera::ConvOptions{false, false, 0.0f, false});
    model.add<tessera::BatchNorm>();
    model.add<tessera::GcnConv>(2);
    adam = std::make_unique<tessera::Adam>(model.parameters(), tessera::AdamSettings{});
    path = tessera_fuzz::write_input(nullptr, 0, ".ckpt.h5");
  }
  tessera::CheckpointState state() { return tessera::checkpoint_state(model, *adam, 17); }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

const char* const kAttributes[] = {"format",     "version",     "model",
                                   "seed",       "epochs_done", "optimizer_steps",
                                   "best_epoch", "best_valid",  "test_at_best"};

int64_t edge_value(Input& in) {
  const int64_t values[] = {-1,
                            0,
                            1,
                            2,
                            3,
                            1000,
                            std::numeric_limits<int64_t>::max(),
                            std::numeric_limits<int64_t>::min(),
                            int64_t(1) << 40};
  return values[in.below(9)];
}

void replace_attribute(hid_t root, const char* name, Input& in) {
  H5Adelete(root, name);
  const uint32_t how = in.below(5);
  if (how == 0) return;  // deleted
  const hsize_t count = how == 1 ? 2 + in.below(4) : 1;
  H5Handle space(how == 1 ? H5Screate_simple(1, &count, nullptr) : H5Screate(H5S_SCALAR));
  if (how == 2) {  // a string
    H5Handle type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), H5T_VARIABLE);
    const char* text[] = {in.below(2) == 0 ? "tessera-checkpoint" : "gcn 3 -> 4"};
    H5Handle attr(H5Acreate2(root, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    H5Awrite(attr.get(), type.get(), text);
    return;
  }
  const bool real = how == 3;
  const std::vector<int64_t> ints(count, edge_value(in));
  const std::vector<double> reals(count, in.below(2) == 0 ? NAN : -1e300);
  H5Handle attr(
      H5Acreate2(root, name, real ? H5T_IEEE_F64LE : H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  H5Awrite(attr.get(), real ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64,
           real ? static_cast<const void*>(reals.data()) : ints.data());
}

// The arrays a checkpoint of the fixture holds.
std::vector<std::string> array_names(hid_t root) {
  std::vector<std::string> names;
  for (const char* group : {"/param", "/adam_m", "/adam_v", "/buffer"}) {
    H5Handle g(H5Gopen2(root, group, H5P_DEFAULT));
    H5G_info_t info{};
    if (!g.valid() || H5Gget_info(g.get(), &info) < 0) continue;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      char name[128] = {};
      H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof(name), H5P_DEFAULT);
      names.push_back(std::string(group) + "/" + name);
    }
  }
  return names;
}

void replace_array(hid_t root, const std::string& name, Input& in) {
  H5Ldelete(root, name.c_str(), H5P_DEFAULT);
  const uint32_t how = in.below(4);
  if (how == 0) return;  // deleted
  std::vector<hsize_t> dims = {1 + in.below(5), 1 + in.below(5)};
  if (how == 1) dims.pop_back();
  if (how == 2) dims.push_back(2);
  const hid_t type = in.below(2) == 0 ? H5T_IEEE_F32LE : H5T_STD_I8LE;
  H5Handle space(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  H5Handle set(H5Dcreate2(root, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!set.valid()) std::abort();
}

void poison_array(hid_t root, const std::string& name, Input& in) {
  H5Handle set(H5Dopen2(root, name.c_str(), H5P_DEFAULT));
  if (!set.valid()) return;  // deleted by an earlier round
  H5Handle space(H5Dget_space(set.get()));
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (points <= 0) return;
  std::vector<float> values(size_t(points), 0.5f);
  const float bad[] = {NAN, INFINITY, -INFINITY, 3e38f};
  values[in.below(uint32_t(values.size()))] = bad[in.below(4)];
  H5Dwrite(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
}

void tamper(const std::string& path, Input& in) {
  H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  if (!file.valid()) std::abort();
  const std::vector<std::string> arrays = array_names(file.get());
  for (int round = 0; round < 4 && in.more(); ++round) {
    const uint32_t what = in.below(3);
    if (what == 0) replace_attribute(file.get(), kAttributes[in.below(9)], in);
    if (what == 1 && !arrays.empty())
      replace_array(file.get(), arrays[in.below(uint32_t(arrays.size()))], in);
    if (what == 2 && !arrays.empty()) poison_array(file.get(), arrays[in.below(uint32_t(arrays.size()))], in);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  Fixture& f = fixture();
  tessera::TrainingProgress saved;
  saved.epochs_done = 1 + in.below(5);
  saved.best_epoch = in.below(2) == 0 ? -1 : saved.epochs_done;  // epochs count from 1
  saved.best_valid = 0.5;
  tessera::save_checkpoint(f.path, f.state(), saved, tessera_fuzz::world());
  tamper(f.path, in);
  tessera_fuzz::run_input([&] {
    const tessera::TrainingProgress p = tessera::load_checkpoint(f.path, f.state(), tessera_fuzz::world());
    // What a resume goes on from: an epoch count that can be trained on, a best epoch among those done.
    if (p.epochs_done < 0 || (p.best_epoch != -1 && (p.best_epoch < 1 || p.best_epoch > p.epochs_done)))
      std::abort();
  });
  return 0;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tessera_fuzz::start_runtime();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5's own error stack print is noise here
  // MPI allocates some of its state at the first collective and keeps it: once here, not inside an input.
  LLVMFuzzerTestOneInput(nullptr, 0);
  return 0;
}
