// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/checkpoint.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/hdf5_io.hpp"

namespace tessera {
namespace {

constexpr const char* kFormat = "tessera-checkpoint";
constexpr int64_t kVersion = 1;

void write_vector(hid_t file, const std::string& name, const Vector<float>& v) {
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
  H5Handle d = h5_create_dataset(file, name, H5T_IEEE_F32LE, {int64_t(v.extent(0))}, 0, false);
  h5_write_rows(d.get(), H5T_NATIVE_FLOAT, 0, int64_t(v.extent(0)), host.data());
}

void read_vector(hid_t file, const std::string& path, const std::string& name, const Vector<float>& v) {
  H5Handle d = h5_open_dataset(file, path, name);
  const std::vector<int64_t> shape = h5_shape(d.get());
  require(shape.size() == 1 && shape[0] == int64_t(v.extent(0)), path, ": dataset ", name, " has ",
          shape.empty() ? 0 : shape[0], " values, the model has ", v.extent(0));
  auto host = Kokkos::create_mirror_view(v);
  h5_read_rows(d.get(), H5T_NATIVE_FLOAT, 0, int64_t(v.extent(0)), host.data());
  Kokkos::deep_copy(v, host);
}

// Every rank ends with rank 0's copy of the model and optimizer state.
void broadcast_state(GnnModel<float>& model, Adam& optimizer, TrainingProgress& progress,
                     const Communicator& comm) {
  if (comm.size() == 1) return;
  auto share = [&](const Vector<float>& v) {
    auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), v);
    broadcast(comm, host.data(), int64_t(host.extent(0)), 0, "checkpoint");
    Kokkos::deep_copy(v, host);
  };
  const std::vector<Parameter<float>*> params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    share(params[i]->value);
    share(optimizer.first_moment(i));
    share(optimizer.second_moment(i));
  }
  for (auto& [name, buffer] : model.buffers()) share(*buffer);
  int64_t ints[3] = {progress.epochs_done, progress.best_epoch, optimizer.steps()};
  double reals[2] = {progress.best_valid, progress.test_at_best};
  broadcast(comm, ints, 3, 0, "checkpoint");
  broadcast(comm, reals, 2, 0, "checkpoint");
  progress = TrainingProgress{ints[0], ints[1], reals[0], reals[1]};
  optimizer.set_steps(ints[2]);
}

}  // namespace

void save_checkpoint(const std::string& path, GnnModel<float>& model, Adam& optimizer,
                     const TrainingProgress& progress, const Communicator& comm) {
  comm.run_on(0, [&] {
    prepare_hdf5();
    const std::string temp = path + ".tmp-" + std::to_string(getpid());
    {
      std::FILE* probe = std::fopen(temp.c_str(), "wb");
      require(probe != nullptr, path, ": cannot write checkpoint (", std::strerror(errno), ")");
      std::fclose(probe);
    }
    try {
      const Communicator self(MPI_COMM_SELF, false, nullptr);
      H5Handle file = h5_create_file(self, temp);
      const hid_t root = file.get();
      const ModelConfig& c = model.config();
      h5_write_attr(root, "format", std::string(kFormat));
      h5_write_attr(root, "version", kVersion);
      h5_write_attr(root, "model", c.describe());
      h5_write_attr(root, "seed", int64_t(c.seed));
      h5_write_attr(root, "epochs_done", progress.epochs_done);
      h5_write_attr(root, "optimizer_steps", optimizer.steps());
      h5_write_attr(root, "best_epoch", progress.best_epoch);
      h5_write_attr(root, "best_valid", progress.best_valid);
      h5_write_attr(root, "test_at_best", progress.test_at_best);
      const std::vector<Parameter<float>*> params = model.parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        write_vector(root, "/param/" + params[i]->name, params[i]->value);
        write_vector(root, "/adam_m/" + params[i]->name, optimizer.first_moment(i));
        write_vector(root, "/adam_v/" + params[i]->name, optimizer.second_moment(i));
      }
      for (auto& [name, buffer] : model.buffers()) write_vector(root, "/buffer/" + name, *buffer);
    } catch (...) {
      std::remove(temp.c_str());
      throw;
    }
    require(std::rename(temp.c_str(), path.c_str()) == 0, path, ": cannot rename checkpoint (",
            std::strerror(errno), ")");
  });
}

TrainingProgress load_checkpoint(const std::string& path, GnnModel<float>& model, Adam& optimizer,
                                 const Communicator& comm) {
  TrainingProgress progress;
  comm.run_on(0, [&] {
    prepare_hdf5();
    require(access(path.c_str(), R_OK) == 0, path, ": no checkpoint to resume from (", std::strerror(errno),
            ")");
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    H5Handle file = h5_open_file(self, path, false);
    require(file.valid(), path, ": cannot open the checkpoint (not HDF5, corrupt or truncated)");
    const hid_t root = file.get();
    std::string format, described;
    int64_t version = 0, seed = 0, steps = 0;
    require(h5_read_attr(root, "format", format) && format == kFormat, path, ": not a Tessera checkpoint");
    require(h5_read_attr(root, "version", version) && version == kVersion, path, ": checkpoint version ",
            version, ", this Tessera reads version ", kVersion);
    require(h5_read_attr(root, "model", described) && described == model.config().describe(), path,
            ": written for model ", described, ", but this run builds ", model.config().describe());
    require(h5_read_attr(root, "seed", seed) && uint64_t(seed) == model.config().seed, path,
            ": written with --seed ", seed, ", this run uses ", model.config().seed);
    require(h5_read_attr(root, "epochs_done", progress.epochs_done) &&
                h5_read_attr(root, "optimizer_steps", steps) &&
                h5_read_attr(root, "best_epoch", progress.best_epoch) &&
                h5_read_attr(root, "best_valid", progress.best_valid) &&
                h5_read_attr(root, "test_at_best", progress.test_at_best),
            path, ": checkpoint attributes are missing (corrupt file?)");
    optimizer.set_steps(steps);
    const std::vector<Parameter<float>*> params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      read_vector(root, path, "/param/" + params[i]->name, params[i]->value);
      read_vector(root, path, "/adam_m/" + params[i]->name, optimizer.first_moment(i));
      read_vector(root, path, "/adam_v/" + params[i]->name, optimizer.second_moment(i));
    }
    for (auto& [name, buffer] : model.buffers()) read_vector(root, path, "/buffer/" + name, *buffer);
  });
  broadcast_state(model, optimizer, progress, comm);
  return progress;
}

}  // namespace tessera
