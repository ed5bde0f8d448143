// SPDX-License-Identifier: BSD-3-Clause
// The composable half of the bindings: a graph on a process grid (from per-rank NumPy arrays or a graph
// file) and the full-graph training of a Sequential model of the library's layers, with a loss, a
// schedule and Python hooks. The Python side (tessera/compose.py) names every option.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>

#include "bindings.hpp"
#include "tessera/cli/options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/models/modes/full_graph.hpp"
#include "tessera/models/nn/activation.hpp"
#include "tessera/models/nn/attention.hpp"
#include "tessera/models/nn/conv.hpp"
#include "tessera/models/nn/loss.hpp"
#include "tessera/models/nn/norm.hpp"
#include "tessera/models/nn/sequential.hpp"
#include "tessera/models/training/hooks.hpp"
#include "tessera/parallel3d/graph3d.hpp"

namespace tessera::python {

namespace {

// A graph on its grid; the communicator and grid live as long as the graph that refers to them.
struct LoadedGraph {
  std::unique_ptr<Communicator> world;
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<Graph3D> graph;
  int64_t num_nodes() const { return graph->layout.num_nodes(); }
  void release() {
    graph.reset();
    grid.reset();
    world.reset();
  }
};

// Graphs alive in Python, released when the process ends before Kokkos and MPI are finalized.
std::vector<std::weak_ptr<LoadedGraph>>& live_graphs() {
  static std::vector<std::weak_ptr<LoadedGraph>> graphs;
  return graphs;
}

std::shared_ptr<LoadedGraph> tracked(std::shared_ptr<LoadedGraph> g) {
  auto& graphs = live_graphs();
  graphs.erase(std::remove_if(graphs.begin(), graphs.end(), [](const auto& w) { return w.expired(); }),
               graphs.end());
  graphs.push_back(g);
  return g;
}

const LoadedGraph& require_loaded(const LoadedGraph& g) {
  if (!g.graph) throw py::value_error("the graph was released");
  return g;
}

// The value `text` names in an enum's table, or Error naming the option (`option`) and the choices.
template <class E, size_t N>
E named(const char* option, const EnumName<E> (&table)[N], const std::string& text) {
  if (const std::optional<E> value = value_named(table, text)) return *value;
  fail("`", option, "` must be ", choices_of(table), ", not '", text, "'");
}

Normalization normalization_from(const std::string& name) {
  if (const std::optional<Normalization> value = value_named(kNormalizationNames, name)) return *value;
  fail("normalization must be ", choices_of(kNormalizationNames), ", not '", name, "'");
}

Graph3DOptions graph_options(const py::dict& o) {
  Graph3DOptions load;
  load.layers = o["layers"].cast<int>();
  load.permute = named("permute", kPermuteModeNames, o["permute"].cast<std::string>());
  load.seed = o["seed"].cast<uint64_t>();
  load.normalization = normalization_from(o["normalization"].cast<std::string>());
  load.normalize_features = o["normalize_features"].cast<bool>();
  return load;
}

// The Python side hands over C-ordered arrays of the right type; forcecast covers any that are not.
template <class T>
std::vector<T> to_vector(const py::handle& given) {
  const auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(given);
  if (!a) throw py::error_already_set();
  return std::vector<T>(a.data(), a.data() + a.size());
}

// The rows' arrays are copied in (GraphRows owns its vectors; the build frees them as it goes).
GraphRows rows_from(const py::dict& r) {
  GraphRows rows;
  rows.name = r["name"].cast<std::string>();
  rows.num_nodes = r["num_nodes"].cast<int64_t>();
  rows.num_features = r["num_features"].cast<int64_t>();
  rows.num_classes = r["num_classes"].cast<int64_t>();
  rows.first_row = r["first_row"].cast<int64_t>();
  rows.indptr = to_vector<int64_t>(r["indptr"]);
  rows.indices = to_vector<int64_t>(r["indices"]);
  rows.features = to_vector<float>(r["features"]);
  rows.labels = to_vector<int64_t>(r["labels"]);
  rows.splits = to_vector<uint8_t>(r["splits"]);
  rows.split_names = r["split_names"].cast<std::vector<std::string>>();
  return rows;
}

// The communicator and the process grid a graph is loaded onto (collective: a bad grid fails every rank).
std::shared_ptr<LoadedGraph> on_grid(const py::object& comm, const std::string& grid) {
  auto g = std::make_shared<LoadedGraph>();
  g->world = std::make_unique<Communicator>(communicator_from(comm));
  run_collective(*g->world, [&] {
    GridShape shape;
    g->world->run_agreed([&] {
      require(!grid.empty() || g->world->size() == 1, "grid: name the 3D grid of these ", g->world->size(),
              " ranks (XxYxZ with X*Y*Z = ", g->world->size(), ", e.g. 1x1x", g->world->size(), ")");
      shape = grid.empty() ? GridShape{} : app::parse_grid(grid);
    });
    g->grid = std::make_unique<ProcessGrid>(*g->world, shape);
  });
  return g;
}

std::shared_ptr<LoadedGraph> build_graph(const py::dict& rows, const std::string& grid,
                                         const py::dict& options, const py::object& comm) {
  GraphRows given = rows_from(rows);
  const Graph3DOptions load = graph_options(options);
  std::shared_ptr<LoadedGraph> g = on_grid(comm, grid);
  run_collective(*g->world, [&] {
    g->graph = std::make_unique<Graph3D>(build_graph_3d(std::move(given), *g->grid, load));
  });
  return tracked(g);
}

std::shared_ptr<LoadedGraph> load_graph(const std::string& path, const std::string& grid,
                                        const py::dict& options, const py::object& comm) {
  const Graph3DOptions load = graph_options(options);
  std::shared_ptr<LoadedGraph> g = on_grid(comm, grid);
  run_collective(*g->world, [&] {
    g->graph = std::make_unique<Graph3D>(load_graph_3d(GraphFileReader(*g->world, path), *g->grid, load));
  });
  return tracked(g);
}

// A GatConv's settings from its spec's dict.
GatOptions gat_options(const py::dict& extra, float dropout, bool bias) {
  GatOptions o;
  o.heads = extra["heads"].cast<int64_t>();
  o.concat = extra["concat"].cast<bool>();
  o.negative_slope = extra["negative_slope"].cast<float>();
  o.attention_dropout = extra["attention_dropout"].cast<float>();
  const std::string activation = extra["activation"].cast<std::string>();
  const std::optional<Activation> named = value_named(kActivationNames, activation);
  if (!named)
    fail("GatConv: activation must be None, ", choices_of(kActivationNames), ", not '", activation, "'");
  o.activation = *named;
  o.dropout = dropout;
  o.bias = bias;
  return o;
}

// One layer spec: (kind, width, relu, dropout, bias, extra settings).
void add_layer(Sequential& model, const py::tuple& spec) {
  const std::string kind = spec[0].cast<std::string>();
  ConvOptions conv;
  conv.relu = spec[2].cast<bool>();
  conv.dropout = spec[3].cast<float>();
  conv.bias = spec[4].cast<bool>();
  const int64_t width = spec[1].cast<int64_t>();
  NormOptions norm;
  norm.relu = conv.relu;
  norm.dropout = conv.dropout;
  if (kind == "gcn")
    model.add<GcnConv>(width, conv);
  else if (kind == "sage")
    model.add<SageConv>(width, conv);
  else if (kind == "linear")
    model.add<Linear>(width, conv);
  else if (kind == "gat")
    model.add<GatConv>(width, gat_options(spec[5].cast<py::dict>(), conv.dropout, conv.bias));
  else if (kind == "dropout")
    model.add<Dropout>(conv.dropout);
  else if (kind == "relu")
    model.add<ReLU>();
  else if (kind == "batch_norm")
    model.add<BatchNorm>(norm);
  else if (kind == "rms_norm")
    model.add<RmsNorm>(norm);
  else
    fail("unknown layer kind '", kind, "'");
}

// The loss fit()'s `loss` names for the graph's task (auto: the task's own), judged by `metric`, weighting
// each task's positive labels by `pos_weight` (one for every task, or one per task).
std::unique_ptr<Loss> loss_from(std::string name, const Graph3D& graph, MetricKind metric,
                                std::vector<float> pos_weight) {
  const bool multi = graph.multi_label;
  make_metric(metric, multi);  // refuses a metric of the other task, naming both
  if (name == "auto") name = multi ? "multi_label_binary_cross_entropy" : "cross_entropy";
  if (name == "multi_label_binary_cross_entropy") {
    require(multi, "loss multi_label_binary_cross_entropy needs a multi-label graph (a label matrix)");
    const size_t tasks = size_t(graph.num_classes);
    require(pos_weight.size() <= 1 || pos_weight.size() == tasks, "pos_weight gives ", pos_weight.size(),
            " weights for ", tasks, " tasks (one for every task, or one per task)");
    if (pos_weight.size() == 1) pos_weight.assign(tasks, pos_weight[0]);
    return std::make_unique<MultiLabelBinaryCrossEntropy>(std::move(pos_weight), metric);
  }
  const bool known = name == "cross_entropy" || name == "binary_cross_entropy";
  require(known,
          "loss must be auto, cross_entropy, binary_cross_entropy or multi_label_binary_cross_entropy, "
          "not '",
          name, "'");
  require(!multi, "loss ", name, " scores one class per node; a multi-label graph trains with ",
          "multi_label_binary_cross_entropy (loss auto)");
  require(pos_weight.empty(), "pos_weight weighs the positive labels of a multi-label graph");
  if (name == "cross_entropy") return std::make_unique<SoftmaxCrossEntropy>();
  require(metric == MetricKind::Auto, "loss binary_cross_entropy is scored by ROC-AUC: metric must be auto");
  return std::make_unique<BinaryCrossEntropy>();
}

// fit()'s options: each given (not None) one over the C++ struct's default, so the defaults live in C++ only.
template <class T>
void take(const py::dict& o, const char* key, T& field) {
  if (o.contains(key) && !o[key].is_none()) field = o[key].cast<T>();
}

TrainerOptions trainer_options(const py::dict& o) {
  TrainerOptions t;
  take(o, "epochs", t.epochs);
  take(o, "eval_every", t.eval_every);
  take(o, "lr", t.optimizer.lr);
  take(o, "weight_decay", t.optimizer.weight_decay);
  take(o, "clip_grad_norm", t.clip_grad_norm);
  return t;
}

ScheduleSettings schedule_from(const py::dict& o) {
  ScheduleSettings s;
  if (o.contains("lr_schedule") && !o["lr_schedule"].is_none())
    s.kind = named("lr-schedule", kScheduleKindNames, o["lr_schedule"].cast<std::string>());
  take(o, "lr_warmup", s.warmup_epochs);
  take(o, "lr_step_every", s.step_every);
  take(o, "lr_gamma", s.gamma);
  take(o, "lr_min", s.min_lr);
  return s;
}

// The defaults fit() documents, read off the structs (TrainerOptions, AdamSettings, ScheduleSettings).
py::dict fit_defaults() {
  const TrainerOptions t;
  const ScheduleSettings s;
  py::dict d;
  d["epochs"] = t.epochs, d["eval_every"] = t.eval_every, d["lr"] = t.optimizer.lr;
  d["weight_decay"] = t.optimizer.weight_decay, d["clip_grad_norm"] = t.clip_grad_norm;
  d["lr_schedule"] = schedule_name(s.kind), d["lr_warmup"] = s.warmup_epochs,
  d["lr_step_every"] = s.step_every;
  d["lr_gamma"] = s.gamma, d["lr_min"] = s.min_lr;
  return d;
}

// Full-graph training of a Sequential of `layers` on `g`.
py::dict fit(const std::shared_ptr<LoadedGraph>& g, const std::vector<py::tuple>& layers, uint64_t seed,
             const py::dict& options, py::object on_epoch, py::object on_step) {
  require_loaded(*g);
  const std::string loss_name = options["loss"].cast<std::string>();
  const std::string metric_name = options["metric"].cast<std::string>();
  const std::vector<float> pos_weight = options["pos_weight"].cast<std::vector<float>>();
  const bool quiet = options["quiet"].cast<bool>(), keep = options["keep_outputs"].cast<bool>();
  const TrainerOptions loop = trainer_options(options);
  const ScheduleSettings schedule = schedule_from(options);
  std::unique_ptr<TrainerHook> hook = python_hook(std::move(on_epoch), std::move(on_step));
  // Layers are built with the GIL held (they are Python tuples), the rest without.
  std::unique_ptr<Sequential> model;
  std::string invalid;
  try {
    model = std::make_unique<Sequential>(*g->grid, g->graph->num_features, RunOptions{}, seed);
    for (const py::tuple& spec : layers) add_layer(*model, spec);
    loop.optimizer.validate();  // first: the schedule's bounds are in terms of the learning rate
    schedule.validate(loop.optimizer.lr, loop.epochs);
  } catch (const std::exception& e) {
    invalid = e.what();
  }
  TrainResult result;
  run_collective(*g->world, [&] {
    // What is refused here (a model the graph cannot serve, an unknown loss) is the same on every rank and
    // comes before any collective: agreed on, so that every rank raises.
    std::unique_ptr<FullGraphSource> source;
    std::unique_ptr<Loss> loss;
    if (invalid.empty()) {
      try {
        source = std::make_unique<FullGraphSource>(*g->graph, *g->grid, *g->world, *model);
        loss = loss_from(loss_name, *g->graph, named("metric", kMetricKindNames, metric_name), pos_weight);
      } catch (const std::exception& e) {
        invalid = e.what();
      }
    }
    g->world->check(invalid.empty(), invalid);
    Trainer trainer(*model, *source, *g->world, loop);
    trainer.set_loss(std::move(loss));
    if (!schedule.constant()) trainer.set_schedule(make_schedule(schedule, loop.optimizer.lr));
    if (!quiet) trainer.emplace_hook<ConsoleReport>();
    NodeOutputArrays kept;
    if (keep) trainer.emplace_hook<NodeOutputs>(NodeOutputPaths{"", "", "", &kept});
    trainer.add_hook(std::move(hook));
    result = trainer.run();
    if (keep) result.node_outputs = std::move(kept);
  });
  {
    py::gil_scoped_release release;  // the model's views are freed without Python
    model.reset();
  }
  return result_to_python(std::move(result));
}

}  // namespace

void release_graphs() {
  for (const std::weak_ptr<LoadedGraph>& w : live_graphs())
    if (const std::shared_ptr<LoadedGraph> g = w.lock()) g->release();
  live_graphs().clear();
}

void bind_composition(py::module_& m) {
  py::class_<LoadedGraph, std::shared_ptr<LoadedGraph>>(m, "Graph3D")
      .def_property_readonly("num_nodes", [](const LoadedGraph& g) { return require_loaded(g).num_nodes(); })
      .def_property_readonly("num_features",
                             [](const LoadedGraph& g) { return require_loaded(g).graph->num_features; })
      .def_property_readonly("num_classes",
                             [](const LoadedGraph& g) { return require_loaded(g).graph->num_classes; })
      .def_property_readonly("grid",
                             [](const LoadedGraph& g) { return require_loaded(g).grid->shape().str(); })
      .def("release", [](LoadedGraph& g) {
        py::gil_scoped_release release;
        g.release();
      });
  m.def("build_graph", &build_graph, py::arg("rows"), py::arg("grid"), py::arg("options"), py::arg("comm"));
  m.def("load_graph", &load_graph, py::arg("path"), py::arg("grid"), py::arg("options"), py::arg("comm"));
  m.def("fit", &fit, py::arg("graph"), py::arg("layers"), py::arg("seed"), py::arg("options"),
        py::arg("on_epoch"), py::arg("on_step"));
  m.def("fit_defaults", &fit_defaults, "fit()'s defaults, as the C++ structs hold them");
}

}  // namespace tessera::python
