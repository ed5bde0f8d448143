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
constexpr int64_t kVersion = 2;  // 2: global 2D layout

// The in-bounds part of a local block: rows [row_begin, row_begin + rows) x cols [...], clipped.
struct Clip {
  int64_t rows, cols;
};
Clip clip(const BlockPlacement& b, int64_t local_rows, int64_t local_cols) {
  return {std::max<int64_t>(0, std::min(local_rows, b.rows - b.row_begin)),
          std::max<int64_t>(0, std::min(local_cols, b.cols - b.col_begin))};
}

void write_block(hid_t file, const std::string& name, const Vector<float>& local, int64_t local_rows,
                 int64_t local_cols, const BlockPlacement& b) {
  H5Handle d = h5_create_dataset(file, name, H5T_IEEE_F32LE, {b.rows, b.cols}, 0, false);
  const Clip c = b.owner ? clip(b, local_rows, local_cols) : Clip{0, 0};
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), local);
  std::vector<float> packed(static_cast<size_t>(c.rows * c.cols));
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) packed[size_t(i * c.cols + j)] = host(i * local_cols + j);
  h5_write_block(d.get(), H5T_NATIVE_FLOAT, b.row_begin, c.rows, b.col_begin, c.cols, packed.data());
}

void read_block(hid_t file, const std::string& path, const std::string& name, const Vector<float>& local,
                int64_t local_rows, int64_t local_cols, const BlockPlacement& b) {
  H5Handle d = h5_open_dataset(file, path, name);  // shape and type checked by load_checkpoint
  const Clip c = clip(b, local_rows, local_cols);
  std::vector<float> packed(static_cast<size_t>(c.rows * c.cols));
  h5_read_block(d.get(), H5T_NATIVE_FLOAT, b.row_begin, c.rows, b.col_begin, c.cols, packed.data());
  auto host = Kokkos::create_mirror_view(local);
  Kokkos::deep_copy(host, 0.0f);  // padding stays zero
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) host(i * local_cols + j) = packed[size_t(i * c.cols + j)];
  Kokkos::deep_copy(local, host);
}

template <class Fn>
void for_each_array(const CheckpointState& s, const Fn& fn) {
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Parameter& p = *s.params[i].param;
    fn("/param/" + p.name, p.value, p.rows, p.cols, s.params[i].placement);
    fn("/adam_m/" + p.name, s.optimizer->first_moment(i), p.rows, p.cols, s.params[i].placement);
    fn("/adam_v/" + p.name, s.optimizer->second_moment(i), p.rows, p.cols, s.params[i].placement);
  }
  for (const BufferRef& b : s.buffers)
    fn("/buffer/" + b.name, *b.value, int64_t(1), int64_t(b.value->extent(0)), b.placement);
}

}  // namespace

CheckpointState checkpoint_state(Model& model, Adam& optimizer, uint64_t seed) {
  return CheckpointState{model.describe(), seed, model.parameters(), &optimizer, model.buffers()};
}

void save_checkpoint(const std::string& path, const CheckpointState& state, const TrainingProgress& progress,
                     const Communicator& comm) {
  prepare_hdf5();
  int pid = int(getpid());
  broadcast(comm, &pid, 1, 0, "checkpoint");
  const std::string temp = path + ".tmp-" + std::to_string(pid);
  comm.run_on(0, [&] {
    std::FILE* probe = std::fopen(temp.c_str(), "wb");
    require_os(probe != nullptr, path, ": cannot write checkpoint");
    std::fclose(probe);
  });
  try {
    H5Handle file = h5_create_file(comm, temp);
    const hid_t root = file.get();
    h5_write_attr(root, "format", std::string(kFormat));
    h5_write_attr(root, "version", kVersion);
    h5_write_attr(root, "model", state.model);
    h5_write_attr(root, "seed", int64_t(state.seed));
    h5_write_attr(root, "epochs_done", progress.epochs_done);
    h5_write_attr(root, "optimizer_steps", state.optimizer->steps());
    h5_write_attr(root, "best_epoch", progress.best_epoch);
    h5_write_attr(root, "best_valid", progress.best_valid);
    h5_write_attr(root, "test_at_best", progress.test_at_best);
    for_each_array(state, [&](const std::string& name, const Vector<float>& v, int64_t rows, int64_t cols,
                              const BlockPlacement& b) { write_block(root, name, v, rows, cols, b); });
    // Closed here and checked: the close flushes, and a flush that failed (a full disk) must not be renamed
    // over the previous checkpoint.
    const hid_t id = file.get();
    file.release();
    comm.check(all_reduce_value(comm, int(H5Fclose(id) < 0), ReduceOp::Max, "checkpoint") == 0,
               path + ": writing the checkpoint failed (disk full?); the previous checkpoint is unchanged");
  } catch (const CollectiveError&) {
    std::remove(temp.c_str());
    throw;
  } catch (const std::exception& e) {  // this rank alone: the job aborts, the temporary file goes first
    std::remove(temp.c_str());
    throw Error(path + ": writing the checkpoint failed (" + e.what() +
                "); the previous checkpoint is unchanged");
  }
  comm.run_on(0, [&] {
    require_os(std::rename(temp.c_str(), path.c_str()) == 0, path, ": cannot rename checkpoint");
  });
}

TrainingProgress load_checkpoint(const std::string& path, const CheckpointState& state,
                                 const Communicator& comm) {
  prepare_hdf5();
  comm.run_on(0, [&] {
    require_os(access(path.c_str(), R_OK) == 0, path, ": no checkpoint to resume from");
    std::FILE* f = std::fopen(path.c_str(), "rb");
    char magic[8] = {};
    const size_t got = f ? std::fread(magic, 1, 8, f) : 0;
    if (f) std::fclose(f);
    require(got == 8 && std::memcmp(magic, "\x89HDF\r\n\x1a\n", 8) == 0, path,
            ": cannot open the checkpoint (not HDF5, corrupt or truncated)");
  });
  H5Handle file = h5_open_file(comm, path, false);
  comm.check(file.valid(), path + ": cannot open the checkpoint (not HDF5, corrupt or truncated)");
  const hid_t root = file.get();
  std::string format, described, problem;
  int64_t version = 0, seed = 0, steps = 0;
  TrainingProgress progress;
  if (!h5_read_attr(root, "format", format) || format != kFormat)
    problem = path + ": not a Tessera checkpoint";
  else if (!h5_read_attr(root, "version", version) || version != kVersion)
    problem = path + ": checkpoint version " + std::to_string(version) + ", this Tessera reads version " +
              std::to_string(kVersion);
  else if (!h5_read_attr(root, "model", described))
    problem = path + ": checkpoint attribute 'model' is missing (corrupt file?)";
  else if (described != state.model)
    problem = path + ": written for model " + described + ", but this run builds " + state.model;
  else if (!h5_read_attr(root, "seed", seed) || uint64_t(seed) != state.seed)
    problem = path + ": written with --seed " + std::to_string(seed) + ", this run uses " +
              std::to_string(state.seed);
  else if (!h5_read_attr(root, "epochs_done", progress.epochs_done) ||
           !h5_read_attr(root, "optimizer_steps", steps) ||
           !h5_read_attr(root, "best_epoch", progress.best_epoch) ||
           !h5_read_attr(root, "best_valid", progress.best_valid) ||
           !h5_read_attr(root, "test_at_best", progress.test_at_best))
    problem = path + ": checkpoint attributes are missing (corrupt file?)";
  else if (progress.epochs_done < 0 || steps < 0 ||
           (progress.best_epoch != -1 &&
            (progress.best_epoch < 1 || progress.best_epoch > progress.epochs_done)))
    problem = path + ": checkpoint records " + std::to_string(progress.epochs_done) + " epochs done, " +
              std::to_string(steps) + " optimizer steps and best epoch " +
              std::to_string(progress.best_epoch) + " (corrupt file?)";
  h5_check(comm, problem.empty(), problem, {&file});
  for_each_array(
      state, [&](const std::string& name, const Vector<float>&, int64_t, int64_t, const BlockPlacement& b) {
        if (!problem.empty()) return;
        if (!h5_exists(root, name)) {
          problem = path + ": dataset " + name + " is missing";
          return;
        }
        H5Handle dataset(H5Dopen2(root, name.c_str(), H5P_DEFAULT));
        if (!dataset.valid() || h5_shape(dataset.get()) != std::vector<int64_t>{b.rows, b.cols} ||
            h5_type_class(dataset.get()) != H5T_FLOAT)
          problem = path + ": dataset " + name + " is not a " + std::to_string(b.rows) + " x " +
                    std::to_string(b.cols) + " float array, as this model's";
      });
  h5_check(comm, problem.empty(), problem, {&file});
  state.optimizer->set_steps(steps);
  for_each_array(state, [&](const std::string& name, const Vector<float>& v, int64_t rows, int64_t cols,
                            const BlockPlacement& b) { read_block(root, path, name, v, rows, cols, b); });
  return progress;
}

}  // namespace tessera
