// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/training/checkpoint.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/shared_output.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/graph/hdf5_io.hpp"

namespace tessera {
namespace {

constexpr const char* kFormat = "tessera-checkpoint";
// 2: global 2D layout; 3: best-validation arrays, evaluations since the best, the run's identity.
constexpr int64_t kVersion = 3;

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

// The best-validation arrays, parallel to the parameters then the buffers (CheckpointState::best).
template <class Fn>
void for_each_best_array(const CheckpointState& s, const Fn& fn) {
  size_t k = 0;
  for (const ParameterRef& ref : s.params) {
    const Parameter& p = *ref.param;
    fn("/best/param/" + p.name, (*s.best)[k++], p.rows, p.cols, ref.placement);
  }
  for (const BufferRef& b : s.buffers)
    fn("/best/buffer/" + b.name, (*s.best)[k++], int64_t(1), int64_t(b.value->extent(0)), b.placement);
}

std::string value_text(const nlohmann::json& v) {
  if (v.is_null()) return "(none)";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

CheckpointState checkpoint_state(Model& model, Adam& optimizer, uint64_t seed) {
  CheckpointState state;
  state.model = model.describe();
  state.seed = seed;
  state.params = model.parameters();
  state.optimizer = &optimizer;
  state.buffers = model.buffers();
  return state;
}

std::vector<Vector<float>> arrays_like(const std::vector<ParameterRef>& params,
                                       const std::vector<BufferRef>& buffers) {
  std::vector<Vector<float>> arrays;
  for (const ParameterRef& p : params) arrays.emplace_back("best." + p.param->name, p.param->value.extent(0));
  for (const BufferRef& b : buffers) arrays.emplace_back("best." + b.name, b.value->extent(0));
  return arrays;
}

std::vector<std::string> run_differences(const nlohmann::json& saved, const nlohmann::json& now) {
  std::vector<std::string> out;
  nlohmann::json keys = nlohmann::json::object();
  for (const auto& [k, v] : saved.items()) keys[k] = true;
  for (const auto& [k, v] : now.items()) keys[k] = true;
  for (const auto& [k, unused] : keys.items()) {
    const nlohmann::json a = saved.contains(k) ? saved[k] : nlohmann::json(),
                         b = now.contains(k) ? now[k] : nlohmann::json();
    if (a != b) out.push_back(k + " " + value_text(b) + " (checkpoint: " + value_text(a) + ")");
  }
  return out;
}

void save_checkpoint(const std::string& path, const CheckpointState& state, const TrainingProgress& progress,
                     const Communicator& comm) {
  prepare_hdf5();
  SharedOutput output(comm, path, "checkpoint");  // removes its temporary unless committed
  const std::string& temp = output.temporary();
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
    h5_write_attr(root, "evaluations_since_best", progress.evaluations_since_best);
    h5_write_attr(root, "max_valid", progress.max_valid);
    h5_write_attr(root, "min_valid_loss", progress.min_valid_loss);
    h5_write_attr(root, "run", state.run.dump());
    const auto write = [&](const std::string& name, const Vector<float>& v, int64_t rows, int64_t cols,
                           const BlockPlacement& b) { write_block(root, name, v, rows, cols, b); };
    for_each_array(state, write);
    // Every rank holds a best state or none (it is set on the same epoch everywhere).
    if (state.best != nullptr && !state.best->empty()) for_each_best_array(state, write);
    // Closed here and checked: the close flushes, and a flush that failed (a full disk) must not be renamed
    // over the previous checkpoint.
    const hid_t id = file.get();
    file.release();
    comm.check(all_reduce_value(comm, int(H5Fclose(id) < 0), ReduceOp::Max, "checkpoint") == 0,
               path + ": writing the checkpoint failed (disk full?); the previous checkpoint is unchanged");
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {  // this rank alone: the job aborts, the temporary file goes first
    std::remove(temp.c_str());
    throw Error(path + ": writing the checkpoint failed (" + e.what() +
                "); the previous checkpoint is unchanged");
  }
  output.commit();  // flushed on every rank, then renamed: a crash leaves the previous checkpoint or this one
}

namespace {

// The checkpoint's run identity (an object), checked collectively.
nlohmann::json saved_run(const Communicator& comm, const std::string& path, hid_t root, H5Handle& file) {
  std::string text, problem;
  nlohmann::json saved;
  if (!h5_read_attr(root, "run", text))
    problem = path + ": checkpoint attribute 'run' is missing (corrupt file?)";
  else
    saved = nlohmann::json::parse(text, nullptr, false);
  if (problem.empty() && !saved.is_object())
    problem = path + ": checkpoint attribute 'run' is not a JSON object (corrupt file?)";
  h5_check(comm, problem.empty(), problem, {&file});
  return saved;
}

std::string differences_message(const std::string& path, const std::vector<std::string>& differences) {
  std::string list;
  for (const std::string& d : differences) list += (list.empty() ? "" : "; ") + d;
  return path + ": this run differs from the one that wrote the checkpoint: " + list +
         ". Resume with the same settings and graph, or add `resume-force` to continue anyway";
}

// The checkpoint's run against this one: refused with every difference unless the caller accepts them.
void check_run(const Communicator& comm, const std::string& path, hid_t root, const CheckpointState& state,
               H5Handle& file) {
  const std::vector<std::string> differences = run_differences(saved_run(comm, path, root, file), state.run);
  if (differences.empty()) return;
  if (!state.accept_run_differences) h5_check(comm, false, differences_message(path, differences), {&file});
  std::string list;
  for (const std::string& d : differences) list += (list.empty() ? "" : "; ") + d;
  log_line("resuming " + path + " although this run differs from the checkpoint's (`resume-force`): " + list);
}

// Collective: the checkpoint file opened after checking it is there and looks like HDF5, and its format and
// version checked.
H5Handle open_checkpoint(const std::string& path, const Communicator& comm) {
  prepare_hdf5();
  comm.run_on(0, [&] {
    require_hdf5_signature(path, "no checkpoint to resume from",
                           "cannot open the checkpoint (not HDF5, corrupt or truncated)");
  });
  H5Handle file = h5_open_file(comm, path, false);
  comm.check(file.valid(), path + ": cannot open the checkpoint (not HDF5, corrupt or truncated)");
  std::string format, problem;
  int64_t version = 0;
  if (!h5_read_attr(file.get(), "format", format) || format != kFormat)
    problem = path + ": not a Tessera checkpoint: " + describe_format(format);
  else if (!h5_read_attr(file.get(), "version", version) || version != kVersion)
    problem = path + ": checkpoint version " + std::to_string(version) + ", this Tessera reads version " +
              std::to_string(kVersion);
  h5_check(comm, problem.empty(), problem, {&file});
  return file;
}

}  // namespace

namespace {

// The root attributes a load reads, checked for consistency: the first missing or bad one, or "".
std::string read_attributes(const std::string& path, hid_t root, CheckpointInfo& info, int64_t& steps) {
  int64_t seed = 0;
  TrainingProgress& progress = info.progress;
  if (!h5_read_attr(root, "model", info.model))
    return path + ": checkpoint attribute 'model' is missing (corrupt file?)";
  if (!h5_read_attr(root, "seed", seed) || !h5_read_attr(root, "epochs_done", progress.epochs_done) ||
      !h5_read_attr(root, "optimizer_steps", steps) ||
      !h5_read_attr(root, "best_epoch", progress.best_epoch) ||
      !h5_read_attr(root, "best_valid", progress.best_valid) ||
      !h5_read_attr(root, "test_at_best", progress.test_at_best) ||
      !h5_read_attr(root, "evaluations_since_best", progress.evaluations_since_best))
    return path + ": checkpoint attributes are missing (corrupt file?)";
  // Written since the accuracy-and-loss selection; an older checkpoint's best accuracy is its running
  // maximum.
  if (!h5_read_attr(root, "max_valid", progress.max_valid)) progress.max_valid = progress.best_valid;
  if (!h5_read_attr(root, "min_valid_loss", progress.min_valid_loss))
    progress.min_valid_loss = std::numeric_limits<double>::infinity();
  if (!(progress.max_valid >= -1 && progress.max_valid <= 1) || std::isnan(progress.min_valid_loss) ||
      progress.min_valid_loss < 0)
    return path + ": checkpoint records a highest validation accuracy of " + std::to_string(progress.max_valid) +
           " and a lowest validation loss of " + std::to_string(progress.min_valid_loss) + " (corrupt file?)";
  info.seed = uint64_t(seed);
  if (progress.epochs_done < 0 || steps < 0 || progress.evaluations_since_best < 0 ||
      (progress.best_epoch != -1 && (progress.best_epoch < 1 || progress.best_epoch > progress.epochs_done)))
    return path + ": checkpoint records " + std::to_string(progress.epochs_done) + " epochs done, " +
           std::to_string(steps) + " optimizer steps and best epoch " + std::to_string(progress.best_epoch) +
           " (corrupt file?)";
  info.has_best = h5_exists(root, "/best");
  return "";
}

// Every array `for_each` lists is in the file as a float array of its global shape.
template <class ForEach>
void check_shapes(const Communicator& comm, const std::string& path, H5Handle& file, ForEach&& for_each) {
  std::string problem;
  const hid_t root = file.get();
  for_each([&](const std::string& name, const Vector<float>&, int64_t, int64_t, const BlockPlacement& b) {
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
}

}  // namespace

CheckpointInfo read_checkpoint_info(const std::string& path, const Communicator& comm) {
  H5Handle file = open_checkpoint(path, comm);
  CheckpointInfo info;
  int64_t steps = 0;
  const std::string problem = read_attributes(path, file.get(), info, steps);
  h5_check(comm, problem.empty(), problem, {&file});
  info.run = saved_run(comm, path, file.get(), file);
  // Every rank reads the same metadata: the same count everywhere.
  for (const std::string& name : h5_group_members(file.get(), "/param")) {
    H5Handle dataset(H5Dopen2(file.get(), ("/param/" + name).c_str(), H5P_DEFAULT));
    int64_t values = 1;
    for (const int64_t d : dataset.valid() ? h5_shape(dataset.get()) : std::vector<int64_t>{0})
      values = d > 0 && values <= (int64_t(1) << 62) / d ? values * d : 0;
    info.parameter_values += values;
  }
  return info;
}

void load_model_state(const std::string& path, Model& model, bool best, const Communicator& comm) {
  H5Handle file = open_checkpoint(path, comm);
  CheckpointInfo info;
  int64_t steps = 0;
  std::string problem = read_attributes(path, file.get(), info, steps);
  if (problem.empty() && info.model != model.describe())
    problem = path + ": written for model " + info.model + ", but this run builds " + model.describe();
  if (problem.empty() && best && !info.has_best)
    problem = path + ": the checkpoint holds no best-validation parameters (no evaluation ran)";
  h5_check(comm, problem.empty(), problem, {&file});
  const std::vector<ParameterRef> params = model.parameters();
  const std::vector<BufferRef> buffers = model.buffers();
  const std::string prefix = best ? "/best" : "";
  const auto each = [&](const auto& fn) {
    for (const ParameterRef& ref : params)
      fn(prefix + "/param/" + ref.param->name, ref.param->value, ref.param->rows, ref.param->cols,
         ref.placement);
    for (const BufferRef& b : buffers)
      fn(prefix + "/buffer/" + b.name, *b.value, int64_t(1), int64_t(b.value->extent(0)), b.placement);
  };
  check_shapes(comm, path, file, each);
  const hid_t root = file.get();
  each([&](const std::string& name, const Vector<float>& v, int64_t rows, int64_t cols,
           const BlockPlacement& b) { read_block(root, path, name, v, rows, cols, b); });
  const int64_t nonfinite =
      all_reduce_value(comm, count_nonfinite(params, buffers), ReduceOp::Sum, "checkpoint");
  comm.check(nonfinite == 0, path + ": the checkpoint's " + (best ? "best-validation" : "final") +
                                 " parameters hold " + std::to_string(nonfinite) +
                                 " values that are not finite (a diverged run); refused");
}

TrainingProgress load_checkpoint(const std::string& path, const CheckpointState& state,
                                 const Communicator& comm) {
  H5Handle file = open_checkpoint(path, comm);
  const hid_t root = file.get();
  CheckpointInfo info;
  int64_t steps = 0;
  std::string problem = read_attributes(path, root, info, steps);
  TrainingProgress progress = info.progress;
  if (problem.empty() && info.model != state.model)
    problem = path + ": written for model " + info.model + ", but this run builds " + state.model;
  else if (problem.empty() && info.seed != state.seed)
    problem = path + ": written with `seed` " + std::to_string(info.seed) + ", this run uses " +
              std::to_string(state.seed);
  h5_check(comm, problem.empty(), problem, {&file});
  check_shapes(comm, path, file, [&](const auto& fn) { for_each_array(state, fn); });
  check_run(comm, path, root, state, file);
  const bool has_best = h5_exists(root, "/best");
  if (has_best && state.best != nullptr) {
    *state.best = arrays_like(state.params, state.buffers);
    check_shapes(comm, path, file, [&](const auto& fn) { for_each_best_array(state, fn); });
  }
  state.optimizer->set_steps(steps);
  const auto read = [&](const std::string& name, const Vector<float>& v, int64_t rows, int64_t cols,
                        const BlockPlacement& b) { read_block(root, path, name, v, rows, cols, b); };
  for_each_array(state, read);
  if (has_best && state.best != nullptr) for_each_best_array(state, read);
  return progress;
}

void check_checkpoint_run(const std::string& path, const nlohmann::json& run, const Communicator& comm) {
  H5Handle file = open_checkpoint(path, comm);
  const std::vector<std::string> differences = run_differences(saved_run(comm, path, file.get(), file), run);
  h5_check(comm, differences.empty(), differences.empty() ? "" : differences_message(path, differences),
           {&file});
}

}  // namespace tessera
