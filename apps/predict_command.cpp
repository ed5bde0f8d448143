// SPDX-License-Identifier: BSD-3-Clause
// `tessera predict`: a trained model's outputs for every node of a graph, from a checkpoint (run_prediction).
#include <cstdio>
#include <memory>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/models/predict.hpp"

namespace tessera::app {

namespace {

struct PredictArgs {
  PredictOptions o;
  std::string parameters = "auto", engine = "auto", grid, kernels = "auto", metric = "auto";
};

// The strings into the library's types; Error names the flag.
void to_options(PredictArgs& a) {
  PredictOptions& o = a.o;
  o.parameters = parse_checkpoint_parameters(a.parameters);
  o.engine = parse_inference_engine(a.engine);
  if (!a.grid.empty()) o.grid = parse_grid(a.grid);
  o.kernels = parse_kernel_path(a.kernels);
  o.metric = parse_metric(a.metric);
}

void report(const PredictResult& r, const PredictOptions& o) {
  char line[256];
  if (!r.accuracy.metric.empty())  // a link checkpoint on a graph without link splits scores none
    std::snprintf(line, sizeof(line),
                  "predict: %s train %.4f valid %.4f test %.4f (%s parameters of epoch %lld, %s engine)",
                  r.accuracy.metric.c_str(), r.accuracy.train, r.accuracy.valid, r.accuracy.test,
                  r.parameters.c_str(), (long long)r.epoch, r.engine.c_str());
  if (!r.accuracy.metric.empty()) log_line(line);
  std::string wrote;
  for (const std::string& path : {o.output, o.csv})
    if (!path.empty()) wrote += (wrote.empty() ? "" : " and ") + path;
  std::snprintf(line, sizeof(line), " (forward %.3f s, peak memory %.1f MiB per rank)", r.seconds,
                double(r.peak_bytes) / 1048576.0);
  const std::string rows = o.edges.empty() ? " nodes (" + o.nodes + ")" : " node pairs of " + o.edges;
  log_line("predict: wrote " + std::to_string(r.rows) + rows + " to " + wrote + line);
}

}  // namespace

void add_predict_command(CLI::App& app, Command& selected) {
  auto a = std::make_shared<PredictArgs>();
  PredictOptions& o = a->o;
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "Predictions, probabilities and embeddings of every node from a checkpoint (exact inference)");
  cmd->add_option("--checkpoint", o.checkpoint,
                  "A checkpoint file, or the directory train --checkpoint wrote");
  cmd->add_option("--data", o.data,
                  "Tessera .h5 graph file (the training graph or one with the same features)");
  cmd->add_option("--output", o.output,
                  "HDF5 file: /nodes, /predictions, and /probabilities, /embeddings when asked");
  cmd->add_option("--csv", o.csv, "Text file of node,prediction lines (the same nodes)");
  cmd->add_option("--edges", o.edges,
                  "A link-prediction checkpoint: a text file of node pairs to score, one source,target per "
                  "line; --output gets /edges, /scores and /probabilities, --csv "
                  "source,target,score,probability lines");
  cmd->add_option("--nodes", o.nodes, "all, or one split of the file: train, valid or test")
      ->capture_default_str();
  cmd->add_flag("--probabilities", o.probabilities,
                "Also write each node's class probabilities (softmax; a multi-label graph's: each task's "
                "sigmoid)");
  cmd->add_option("--metric", a->metric,
                  "What the splits are scored by: auto (the training run's --metric), accuracy, rocauc, ap, "
                  "f1-micro or f1-macro (a link checkpoint's link splits: rocauc, ap, hits@20, hits@50, "
                  "hits@100 or mrr)")
      ->capture_default_str();
  cmd->add_flag("--embeddings", o.embeddings,
                "Also write each node's representation after --embeddings-layer graph layers");
  cmd->add_option("--embeddings-layer", o.embeddings_layer,
                  "Graph layers before the embeddings: 0 (the input) to the model's depth (default: the last "
                  "hidden layer, as train --save-embeddings)");
  cmd->add_option("--parameters", a->parameters,
                  "auto (the best-validation epoch's where the checkpoint holds them, else the last), best "
                  "or final")
      ->capture_default_str();
  cmd->add_option("--engine", a->engine,
                  "auto (layerwise for sampled-mode checkpoints, else full), full (one forward on a 3D "
                  "grid) or layerwise (graph layer by graph layer over partitions)")
      ->capture_default_str();
  cmd->add_option("--grid", a->grid, "full engine: XxYxZ (default: the performance model's choice)");
  cmd->add_option(
      "--partition", o.partition,
      "layerwise engine: /partition/NAME (default metis-RANKS where the file has it, else block)");
  cmd->add_option("--kernels", a->kernels, "auto, host, team or vendor")->capture_default_str();
  cmd->add_flag("--quiet", o.quiet, "Only the metric and the line naming what was written");
  cmd->callback([&selected, a] {
    selected = [a](const Communicator& world) {
      std::string problem;
      try {
        to_options(*a);
      } catch (const Error& e) {
        problem = e.what();
      }
      world.check(problem.empty(), problem);
      const PredictResult r = run_prediction(a->o, world);
      report(r, a->o);
      return 0;
    };
  });
}

}  // namespace tessera::app
