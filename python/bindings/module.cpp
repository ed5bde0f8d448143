// SPDX-License-Identifier: BSD-3-Clause
// tessera._tessera: the runtime, communicators, hooks and results; training (training.cpp) and
// composition (composition.cpp) are bound from here.
#include <mpi.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <Kokkos_Core.hpp>
#include <cstdio>

#include "bindings.hpp"

#include "tessera/cli/command_line.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/runtime.hpp"
#include "tessera/models/training/hooks.hpp"

namespace tessera::python {

namespace {

std::unique_ptr<Runtime>& runtime() {
  static std::unique_ptr<Runtime> instance;
  return instance;
}

// The vector moves into a capsule that owns it: NumPy reads it in place.
template <class T>
py::array_t<T> owned_array(std::vector<T>&& values, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), free_when_done);
}

class PythonHook : public TrainerHook {
 public:
  PythonHook(py::object on_epoch, py::object on_step)
      : on_epoch_(std::move(on_epoch)), on_step_(std::move(on_step)) {}
  ~PythonHook() override {
    py::gil_scoped_acquire gil;
    on_epoch_ = py::object();
    on_step_ = py::object();
  }

  // A rank may have hooks where another has none (`hooks=[...] if rank == 0 else []`): whether any rank has
  // one is agreed here, and then every rank enters the agreement after each call, with or without a call.
  void on_start(Trainer& trainer) override {
    any_epoch_ = all_reduce_value(trainer.world(), int(!on_epoch_.is_none()), ReduceOp::Max, "hook") == 1;
    any_step_ = all_reduce_value(trainer.world(), int(!on_step_.is_none()), ReduceOp::Max, "hook") == 1;
  }

  bool on_epoch(Trainer& trainer, const EpochRecord& epoch) override {
    if (!any_epoch_) return true;
    bool go = true;
    const std::string error = on_epoch_.is_none() ? "" : call(on_epoch_, epoch_json(epoch).dump(), &go);
    trainer.world().check(error.empty(), "a Python hook raised on rank " +
                                             std::to_string(trainer.world().rank()) + " after epoch " +
                                             std::to_string(epoch.epoch) + ": " + error);
    return all_reduce_value(trainer.world(), int(go), ReduceOp::Min, "hook") == 1;
  }

  void on_step(Trainer& trainer, const StepRecord& step) override {
    if (!any_step_) return;
    nlohmann::json j = {{"epoch", step.epoch}, {"step", step.step}, {"loss", step.loss}};
    j.update(step.metrics);
    const std::string error = on_step_.is_none() ? "" : call(on_step_, j.dump(), nullptr);
    trainer.world().check(error.empty(), "a Python hook raised on rank " +
                                             std::to_string(trainer.world().rank()) + " at step " +
                                             std::to_string(step.step) + ": " + error);
  }

 private:
  // The callable's exception as "Type: message" ("" when none); its answer into `go`.
  static std::string call(const py::object& fn, const std::string& record, bool* go) {
    py::gil_scoped_acquire gil;
    try {
      const py::object answer = fn(record);
      if (go != nullptr) *go = answer.is_none() || answer.cast<bool>();
      return "";
    } catch (py::error_already_set& e) {
      // Every rank gets "ValueError: message"; the traceback is printed by the rank that raised it.
      const std::string what = py::str(e.type().attr("__name__")).cast<std::string>() + ": " +
                               py::str(e.value()).cast<std::string>();
      e.restore();
      PyErr_Print();
      return what;
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  py::object on_epoch_, on_step_;
  bool any_epoch_ = false, any_step_ = false;
};

}  // namespace

void ensure_runtime() {
  if (runtime()) return;
  static int argc = 1;
  static char name[] = "python";
  static char* args[] = {name, nullptr};
  char** argv = args;
  runtime() = std::make_unique<Runtime>(argc, argv, MPI_THREAD_MULTIPLE);
}

Communicator communicator_from(const py::object& comm) {
  ensure_runtime();
  // py2f/f2c: the standard's way to pass a handle between languages (an mpi4py object holds an MPI_Comm).
  const MPI_Comm given = comm.is_none() ? MPI_COMM_WORLD : MPI_Comm_f2c(comm.attr("py2f")().cast<MPI_Fint>());
  return Communicator(given, false, nullptr).dup();
}

std::string with_keywords(const std::string& message) {
  std::string out = message;
  for (size_t open = out.find('`'); open != std::string::npos; open = out.find('`', open)) {
    const size_t close = out.find('`', open + 1);
    if (close == std::string::npos) break;
    std::string name = out.substr(open + 1, close - open - 1);
    for (char& c : name) c = c == '-' ? '_' : c;
    out.replace(open, close - open + 1, name);
    open += name.size();
  }
  return out;
}

namespace {
// Log lines and errors word options as the call's caller spells them, for the call's duration.
class RendererScope {
 public:
  explicit RendererScope(Words words)
      : previous_(set_message_renderer(words == Words::Flags ? &app::with_flags : &with_keywords)) {}
  ~RendererScope() { set_message_renderer(previous_); }
  RendererScope(const RendererScope&) = delete;
  RendererScope& operator=(const RendererScope&) = delete;

 private:
  MessageRenderer previous_;
};
}  // namespace

void run_collective(const Communicator& world, const std::function<void()>& body, Words words) {
  const RendererScope scope(words);
  const auto worded = [](const std::string& message) { return render_message(message); };
  std::string collective;
  {
    py::gil_scoped_release release;
    try {
      body();
    } catch (const CollectiveError& e) {
      collective = worded(e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessera: error: %s (rank %d)\n", worded(e.what()).c_str(), world.rank());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (!collective.empty()) {
    PyErr_SetString(error_type().ptr(), collective.c_str());
    throw py::error_already_set();
  }
}

std::unique_ptr<TrainerHook> python_hook(py::object on_epoch, py::object on_step) {
  return std::make_unique<PythonHook>(std::move(on_epoch), std::move(on_step));
}

py::dict result_to_python(TrainResult&& r) {
  py::dict d;
  nlohmann::json history = nlohmann::json::array();
  for (const EpochRecord& e : r.history) history.push_back(epoch_json(e));
  d["history"] = history.dump();
  d["best_epoch"] = r.best_epoch;
  d["best_valid"] = r.best_valid;
  d["test_at_best"] = r.test_at_best;
  d["epochs_done"] = r.epochs_done;
  d["peak_bytes"] = r.peak_bytes;
  d["stop_signal"] = r.stop_signal;
  d["metric"] = r.history.empty() ? std::string("accuracy") : r.history.back().metric;
  d["prefetch"] = py::none();
  if (r.prefetch) {
    const PrefetchTotals& p = *r.prefetch;
    d["prefetch"] = nlohmann::json{{"remote_rows", p.remote_rows},   {"cache_hits", p.cache_hits},
                                   {"fetched_rows", p.fetched_rows}, {"fetched_bytes", p.fetched_bytes},
                                   {"evictions", p.evictions},       {"cache_rows", p.cache_rows},
                                   {"cache_bytes", p.cache_bytes}}
                        .dump();
  }
  if (r.node_outputs) {
    NodeOutputArrays& o = *r.node_outputs;
    // A multi-label graph's run keeps no class per node: its rows are the embeddings'.
    const auto rows = py::ssize_t(o.width > 0 ? o.embeddings.size() / size_t(o.width) : o.classes.size());
    d["node_begin"] = o.begin;
    if (py::ssize_t(o.classes.size()) == rows) d["predictions"] = owned_array(std::move(o.classes), {rows});
    d["embeddings"] = owned_array(std::move(o.embeddings), {rows, py::ssize_t(o.width)});
  }
  return d;
}

namespace {
py::handle error_handle;  // tessera.Error, set when the module is imported (the module keeps it alive)
}  // namespace

py::object error_type() {
  return py::reinterpret_borrow<py::object>(error_handle);
}

}  // namespace tessera::python

PYBIND11_MODULE(_tessera, m) {
  namespace tp = tessera::python;
  m.doc() = "Tessera's C++ library (use it through the tessera package)";
  static pybind11::exception<tessera::CollectiveError> error(m, "Error", PyExc_RuntimeError);
  tp::error_handle = error;
  // Options refused alike on every rank before anything collective ran (a layer's unknown kind, a bad
  // normalization name) are tessera::Error too: the same Python type.
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tessera::Error& e) {
      PyErr_SetString(tp::error_type().ptr(), tp::with_keywords(e.what()).c_str());
    }
  });
  m.def(
      "finalize",
      [] {
        tp::release_graphs();  // their views and communicators go before Kokkos and MPI do
        tp::runtime().reset();
      },
      "Finalizes Kokkos (the package calls it at exit, before mpi4py finalizes MPI)");
  m.def("kokkos_version", [] {
    return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
           std::to_string(KOKKOS_VERSION % 100);
  });
  tp::bind_training(m);
  tp::bind_composition(m);
}
