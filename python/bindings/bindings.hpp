// SPDX-License-Identifier: BSD-3-Clause
// Shared pieces of the Python extension tessera._tessera: the process's runtime (MPI from mpi4py, Kokkos
// started on first use), communicators from mpi4py, Python callables as trainer hooks, and results handed
// to Python. Records cross as JSON text; the package's Python side (tessera/training.py) makes them dicts.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <string>

#include "tessera/comm/communicator.hpp"
#include "tessera/models/training/trainer.hpp"

namespace tessera::python {

namespace py = pybind11;

/// Starts Kokkos (and MPI where mpi4py has not) once per process; later calls do nothing.
void ensure_runtime();

/// Collective over `comm` (an mpi4py communicator, or None for COMM_WORLD): a duplicate Tessera owns.
Communicator communicator_from(const py::object& comm);

/// Runs `body` with the GIL released. A CollectiveError (every rank has it) becomes tessera.Error on every
/// rank; any other exception was seen by one rank only while the others may wait in a collective, so, as
/// the `tessera` program does, it is printed with its rank and the job is aborted: never a hang.
/// How a message names the options the library names as `name`: the program's flags (--name, for
/// tessera.train, whose options are the program's) or Python keywords (name, with '_' for '-').
enum class Words { Flags, Keywords };
/// A library message with its options as Python keywords.
std::string with_keywords(const std::string& message);
void run_collective(const Communicator& world, const std::function<void()>& body, Words words = Words::Keywords);

/// A trainer hook that calls Python: `on_epoch(json_text) -> bool` after every epoch (every rank),
/// `on_step(json_text)` after every step of modes that report steps. An exception in either, on any rank,
/// stops every rank with tessera.Error naming it; the ranks agree on stopping (all must return true to go
/// on).
std::unique_ptr<TrainerHook> python_hook(py::object on_epoch, py::object on_step);

/// What a run returns, as a Python dict: history (JSON text of the epoch records), best_epoch, best_valid,
/// test_at_best, epochs_done, peak_bytes, stop_signal, prefetch (JSON text or None) and, where kept,
/// node_begin, predictions (int64 array of this rank's block) and embeddings (float32 [block, width]),
/// handed over without a copy.
py::dict result_to_python(TrainResult&& result);

/// The Python exception type tessera.Error.
py::object error_type();

/// Frees every graph still alive (the package's exit handler, before Kokkos is finalized).
void release_graphs();

void bind_training(py::module_& m);
void bind_composition(py::module_& m);

}  // namespace tessera::python
