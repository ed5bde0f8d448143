// SPDX-License-Identifier: BSD-3-Clause
// tessera.train: `tessera train`'s options, parsed by the program's own parser, then run_training with the
// application's Python hooks.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tessera/cli/command_line.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/stop_signals.hpp"
#include "tessera/models/train.hpp"

namespace tessera::python {

namespace {

// None where the arguments asked for --help or --print-config (printed by rank 0).
py::object train(const std::vector<std::string>& args, const py::object& comm, py::object on_epoch,
                 py::object on_step, bool keep_outputs) {
  const Communicator world = communicator_from(comm);
  std::vector<std::unique_ptr<TrainerHook>> hooks;
  hooks.push_back(python_hook(std::move(on_epoch), std::move(on_step)));
  std::optional<TrainOptions> options;
  TrainResult result;
  run_collective(world, [&] {
    options = app::parse_train_arguments(args, world);
    if (!options) return;
    options->outputs.keep_node_outputs = keep_outputs;
    set_progress_enabled(!options->outputs.quiet);
    // As the program does: SIGTERM / SIGUSR1 (a batch job's time limit) stop every rank at an epoch end,
    // with a checkpoint where one is asked for; TrainResult.stop_signal says so. A signal from before
    // this call is not this run's.
    StopSignalWatch::clear();
    const StopSignalWatch watch;
    options->trainer.stop_on_signal = true;
    result = run_training(*options, world, std::move(hooks));
  }, Words::Flags);
  if (!options) return py::none();
  return result_to_python(std::move(result));
}

}  // namespace

void bind_training(py::module_& m) {
  m.def("train", &train, py::arg("args"), py::arg("comm"), py::arg("on_epoch"), py::arg("on_step"),
        py::arg("keep_outputs"),
        "`tessera train ARGS...` on the ranks of `comm`; returns the result as a dict (None after --help or "
        "--print-config)");
}

}  // namespace tessera::python
