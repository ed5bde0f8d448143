// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/predict.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/fingerprint.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/graph/partition.hpp"
#include "tessera/graph/partitioned.hpp"
#include "tessera/models/grid_choice.hpp"
#include "tessera/models/modes/full_graph.hpp"
#include "tessera/models/modes/layerwise.hpp"
#include "tessera/models/training/checkpoint.hpp"
#include "tessera/models/training/node_outputs.hpp"
#include "tessera/models/training/prediction_file.hpp"

namespace tessera {

ModelConfig model_config_from(const std::string& description) {
  ModelConfig c;
  char kind[16] = "", norm[16] = "";
  long long hidden = 0, in = 0, out = 0, heads = 8, output_heads = 1;
  int layers = 0, used = 0;
  int got = std::sscanf(description.c_str(), "%15s %dx%lld (in %lld, out %lld, norm %15[a-z])%n", kind,
                        &layers, &hidden, &in, &out, norm, &used);
  if (got == 6 && size_t(used) != description.size())  // a GAT names its heads too
    got = std::sscanf(description.c_str(),
                      "%15s %dx%lld (in %lld, out %lld, norm %15[a-z], heads %lld, output heads %lld)%n",
                      kind, &layers, &hidden, &in, &out, norm, &heads, &output_heads, &used) -
          2;
  const std::string refusal =
      "'" + description +
      "' is not a model tessera builds (gcn, sage or gat LxH (in F, out C, norm N[, heads "
      "A, output heads B]))";
  require(got == 6 && size_t(used) == description.size(), refusal);
  c.kind = std::strcmp(kind, "sage") == 0  ? ModelKind::Sage
           : std::strcmp(kind, "gat") == 0 ? ModelKind::Gat
                                           : ModelKind::Gcn;
  c.heads = heads, c.output_heads = output_heads;
  c.norm = std::strcmp(norm, "batch") == 0 ? NormKind::Batch
           : std::strcmp(norm, "rms") == 0 ? NormKind::Rms
                                           : NormKind::None;
  c.layers = layers, c.hidden = hidden, c.in = in, c.out = out;
  c.validate();
  require(c.describe() == description, refusal);  // any other kind or norm reads back differently
  return c;
}

double minimum_weight_count(const ModelConfig& c) {
  double weights = 0, width = double(c.in);
  const bool gat = c.kind == ModelKind::Gat;
  for (int l = 0; l < c.layers; ++l) {
    const bool last = l + 1 == c.layers;
    const double next = last ? double(c.out) : double(c.hidden);
    const double heads = gat ? double(last ? c.output_heads : c.heads) : 1.0;
    weights += width * next * heads;  // a GAT's projection: every head's columns
    width = gat && !last ? next * heads : next;
  }
  return weights;
}

namespace {

// What run_prediction settled before the load.
struct Plan {
  std::string checkpoint;  // the file
  CheckpointInfo info;
  ModelConfig config;
  std::optional<LinkDecoderOptions> decoder;  // a link checkpoint's MLP decoder
  bool best = false;
  bool normalize_features = false;
  StorageDtype feature_dtype = StorageDtype::F32;  // the features the model trained on
  int keep_layer = -1;                             // the embeddings' layer, -1: none
  int split = -1;                                  // -1: every node
  MetricKind metric = MetricKind::Auto;
  InferenceEngine engine = InferenceEngine::Full;
  bool link = false;  // a link-prediction checkpoint (`task` link): scores node pairs
};

// Rows an engine left on this rank: logits and the kept representation, in file ids.
struct EngineRows {
  NodeRowBlock logits, kept;
  int64_t classes = 0, kept_width = 0;
  double seconds = 0;
};

std::string checkpoint_file(const std::string& given) {
  struct stat st {};
  const bool directory = stat(given.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  return directory ? given + "/checkpoint.h5" : given;
}

void check_request(const PredictOptions& o, const Communicator& world) {
  std::string problem;
  if (o.checkpoint.empty())
    problem = "`checkpoint` is required (a checkpoint file or its directory)";
  else if (o.data.empty())
    problem = "`data` is required (the graph to predict on)";
  else if (o.output.empty() && o.csv.empty())
    problem = "nothing to write: give `output` FILE.h5 and/or `csv` FILE";
  else if ((o.probabilities || o.embeddings) && o.output.empty())
    problem = std::string(o.probabilities ? "`probabilities`" : "`embeddings`") + " needs `output` FILE.h5";
  else if (o.nodes != "all" && o.nodes != "train" && o.nodes != "valid" && o.nodes != "test")
    problem = "`nodes` must be all, train, valid or test, not '" + o.nodes + "'";
  else if (o.embeddings_layer != -1 && !o.embeddings)
    problem = "`embeddings-layer` goes with `embeddings`";
  else if (o.grid && o.engine == InferenceEngine::Layerwise)
    problem = "`grid` is for `engine` full (layer-wise inference runs one part per rank)";
  else if (!o.partition.empty() && o.engine == InferenceEngine::Full)
    problem = "`partition` is for `engine` layerwise";
  if (problem.empty()) {
    const std::string file = checkpoint_file(o.checkpoint);
    world.run_on(0, [&] {
      require(access(file.c_str(), R_OK) == 0, "`checkpoint` ", o.checkpoint, ": no checkpoint there (", file,
              " cannot be read; give the file or the directory train `checkpoint` wrote)");
    });
  }
  world.check(problem.empty(), problem);
  PathPlan plan;
  plan.input(o.data, "`data`");
  plan.input(checkpoint_file(o.checkpoint), "`checkpoint`");
  plan.output_file(o.output, "`output`");
  plan.output_file(o.csv, "`csv`");
  world.run_on(0, [&] { plan.check_and_prepare(); });
}

// What a link-prediction checkpoint can do (score `edges` on the full engine) and a node one cannot.
void check_link_request(const PredictOptions& o, const Plan& plan, const Communicator& world) {
  std::string problem;
  if (!plan.link && !o.edges.empty())
    problem =
        "`edges` scores node pairs with a link-prediction checkpoint; " + plan.checkpoint + " predicts nodes";
  else if (plan.link && o.edges.empty())
    problem = plan.checkpoint + " is a link-prediction checkpoint: give `edges` FILE of node pairs to score";
  else if (plan.link && (o.probabilities || o.embeddings || o.nodes != "all"))
    problem =
        std::string("`") +
        (o.probabilities ? "probabilities"
         : o.embeddings  ? "embeddings"
                         : "nodes") +
        "` is for node predictions; a link-prediction checkpoint writes each pair's score and probability";
  else if (plan.link && plan.engine != InferenceEngine::Full)
    problem = "`engine` layerwise: a link-prediction checkpoint predicts with `engine` full";
  world.check(problem.empty(), problem);
}

// The checkpoint's model, which parameters, which nodes and engine: everything known before the load.
Plan make_plan(const PredictOptions& o, const Communicator& world) {
  check_request(o, world);
  Plan plan;
  plan.checkpoint = checkpoint_file(o.checkpoint);
  plan.info = read_checkpoint_info(plan.checkpoint, world);
  std::string problem;
  try {
    // A link model's description ends with its decoder's: "gcn 2x16 (...) + mlp decoder 2x16".
    const size_t plus = plan.info.model.find(" + ");
    plan.config = model_config_from(plan.info.model.substr(0, plus));
    if (plus != std::string::npos) plan.decoder = link_decoder_options_from(plan.info.model.substr(plus + 3));
  } catch (const Error& e) {
    problem = plan.checkpoint + ": " + e.what();
  }
  world.check(problem.empty(), problem);
  // Before anything is built: a model attribute that claims more weights than the file stores was edited
  // or damaged, and building it could exhaust the memory.
  double least = minimum_weight_count(plan.config);
  if (plan.decoder) {  // its weights over the embeddings (the encoder's output), biases aside
    const double hidden = double(plan.decoder->hidden > 0 ? plan.decoder->hidden : plan.config.out);
    const int layers = plan.decoder->layers;
    least += layers == 1 ? double(plan.config.out)
                         : double(plan.config.out) * hidden + double(layers - 2) * hidden * hidden + hidden;
  }
  world.check(least <= double(plan.info.parameter_values),
              plan.checkpoint + ": its model attribute '" + plan.info.model + "' needs at least " +
                  std::to_string(int64_t(least)) + " weights, but the file stores " +
                  std::to_string(plan.info.parameter_values) +
                  " parameter values (an edited or damaged checkpoint); refused");
  plan.config.seed = plan.info.seed;
  plan.config.dropout = plan.config.input_dropout = 0;  // no dropout layer: evaluation passes skip them
  const nlohmann::json& run = plan.info.run;
  plan.normalize_features = run.value("normalize_features", false);
  const std::string dtype = run.value("feature_dtype", std::string("f32"));
  const std::optional<StorageDtype> feature_dtype = value_named(kStorageDtypeNames, dtype);
  world.check(feature_dtype.has_value(),
              plan.checkpoint + ": unknown feature dtype '" + dtype + "' in its run settings; refused");
  plan.feature_dtype = *feature_dtype;
  plan.best = o.parameters == CheckpointParameters::Best ||
              (o.parameters == CheckpointParameters::Auto && plan.info.has_best);
  world.check(!plan.best || plan.info.has_best,
              plan.checkpoint +
                  ": `parameters` best, but the checkpoint holds no best-validation parameters "
                  "(no evaluation ran); use `parameters` final");
  const int layers = plan.config.layers;
  if (o.embeddings) plan.keep_layer = o.embeddings_layer == -1 ? layers - 1 : o.embeddings_layer;
  world.check(plan.keep_layer <= layers && plan.keep_layer >= -1,
              "`embeddings-layer` must be in [0, " + std::to_string(layers) + "] for this " +
                  std::to_string(layers) + "-layer model, not " + std::to_string(o.embeddings_layer));
  plan.metric =
      o.metric != MetricKind::Auto
          ? o.metric
          : value_named(kMetricKindNames, run.value("metric", std::string())).value_or(MetricKind::Auto);
  plan.split = o.nodes == "train" ? 0 : o.nodes == "valid" ? 1 : o.nodes == "test" ? 2 : -1;
  plan.link = run.value("task", std::string()) == "link";
  // A link checkpoint scores pairs on the full engine, whichever mode trained it.
  plan.engine = o.engine != InferenceEngine::Auto                             ? o.engine
                : run.value("mode", std::string()) == "sampled" && !plan.link ? InferenceEngine::Layerwise
                                                                              : InferenceEngine::Full;
  check_link_request(o, plan, world);
  return plan;
}

// The graph against the model: same features and classes (tasks), a metric of its task; another graph than
// the training one is said.
void check_graph(const PredictOptions& o, const Plan& plan, const Communicator& world) {
  const GraphIdentity g = graph_identity(world, o.data);
  std::string problem;
  try {
    if (!plan.link) make_metric(plan.metric, g.meta.multi_label);
  } catch (const Error& e) {
    problem = o.data + ": " + e.what();
  }
  world.check(problem.empty(), problem);
  const ModelConfig& c = plan.config;
  const char* outputs = g.meta.multi_label ? " tasks" : " classes";
  world.check(g.meta.num_features == c.in && (plan.link || g.meta.num_classes == c.out),
              o.data + ": " + std::to_string(g.meta.num_features) + " features and " +
                  std::to_string(g.meta.num_classes) + outputs + ", but the checkpoint's model takes " +
                  std::to_string(c.in) + " features to " + std::to_string(c.out) + " classes");
  world.check(plan.split < 0 || g.splits.count(o.nodes) > 0,
              o.data + ": `nodes` " + o.nodes + ", but the file has no split of that name");
  const std::string trained_on = plan.info.run.value("graph_fingerprint", std::string());
  if (!o.quiet && trained_on != g.fingerprint)
    log_line("predict: " + o.data + " is not the graph the checkpoint was trained on (fingerprint " +
             g.fingerprint + ", trained on " + trained_on + "): inference on a new graph");
}

// Rows `ids` (valid leading ones) of a block at `layout`, from replica 0 of the layout.
NodeRowBlock rows_of(const Matrix<const float>& block, const LayerGraph& rows, const ActivationLayout& layout,
                     const GridCoords& me) {
  NodeRowBlock out;
  out.col_begin = layout.col_begin;
  out.cols = layout.local_cols;
  if (me.get(layout.replica_axis) != 0) return out;
  const auto ids = Kokkos::create_mirror_view_and_copy(HostSpace(), rows.output_ids);
  const auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), block);
  for (int64_t i = 0; i < rows.valid_rows; ++i) {
    out.nodes.push_back(ids(i));
    for (int64_t j = 0; j < out.cols; ++j) out.values.push_back(host(size_t(i), size_t(j)));
  }
  return out;
}

// `on_logits`: called on every rank with the forward's output block (every node), before it is gathered.
EngineRows run_full(
    const PredictOptions& o, const Plan& plan, const Communicator& world,
    const std::function<void(const LossInput&, const std::shared_ptr<MlpLinkDecoder>&)>& on_logits = {}) {
  const GraphFileReader reader(world, o.data);
  TrainOptions t;
  t.grid.shape = o.grid;
  t.grid.automatic = !o.grid && world.size() > 1;
  t.model = plan.config;
  t.grid.memory_per_rank = 0;  // the training memory model would over-predict a forward pass
  t.normalize_features = plan.normalize_features;
  t.compute.kernels = o.kernels;
  t.outputs.quiet = true;  // its memory line prices a training step
  const GridShape shape = choose_full_grid(t, reader.meta(), world);
  world.check(
      shape.d == 1 && shape.size() == world.size(),
      "`grid` " + shape.str() + " is not a 3D grid of the job's " + std::to_string(world.size()) + " ranks");
  const ProcessGrid grid(world, shape);
  Graph3DOptions load = graph3d_options(t);
  load.transposes = false;
  load.require_labels = !plan.link;
  load.bf16_feature_values = plan.feature_dtype == StorageDtype::Bf16;
  const Graph3D graph = load_graph_3d(reader, grid, load);
  // fp32 features of bf16 values, and graph layer 0 aggregating first as a model trained on bf16 features
  // on the 3D grid does: the same sums in the same order (its input also serves the embeddings of layer 0).
  RunOptions run{o.kernels};
  run.feature_dtype = plan.feature_dtype;
  const std::unique_ptr<Sequential> model = build_model(plan.config, grid, run, false);
  std::shared_ptr<MlpLinkDecoder> decoder;
  if (plan.decoder) model->attach(decoder = make_link_decoder(*model, *plan.decoder));
  load_model_state(plan.checkpoint, *model, plan.best, world);
  const GraphBatch views = full_graph_batch(graph, check_model_fits_graph(*model, graph));
  Stopwatch watch;
  EngineRows rows;
  const Matrix<const float> logits = model->forward(graph.features, views, PassInfo{false, 0, 0});
  Kokkos::fence();
  rows.seconds = watch.seconds();
  if (on_logits) {
    const ActivationLayout& out = model->output_layout();
    const LogitsLayout layout{&grid.axis(out.rows_axis), &grid.axis(out.cols_axis), out.col_begin, out.width};
    on_logits(LossInput{layout, logits, {}, {}, {}, rows_at(views, out).output_ids}, decoder);
  }
  const GridCoords& me = grid.coords();
  rows.logits = rows_of(logits, rows_at(views, model->output_layout()), model->output_layout(), me);
  rows.classes = plan.config.out;
  if (plan.keep_layer >= 0) {
    const ActivationLayout& at = model->graph_layer_input_layout(plan.keep_layer);
    rows.kept = rows_of(model->graph_layer_input(plan.keep_layer), rows_at(views, at), at, me);
    rows.kept_width = at.width;
  }
  if (!o.quiet) log_line("predict: full-graph forward on grid " + shape.str());
  return rows;
}

EngineRows run_layerwise(const PredictOptions& o, const Plan& plan, const Communicator& world) {
  const std::string partition = !o.partition.empty() ? o.partition : default_partition(world, o.data);
  PartitionedLoadOptions load;
  load.normalize_rows = plan.normalize_features;
  load.feature_dtype = plan.feature_dtype;
  PartitionedGraph g = load_partitioned(world, o.data, partition, load);
  const ProcessGrid grid(world, GridShape{world.size(), 1, 1, 1});
  const std::unique_ptr<Sequential> model = build_model(plan.config, grid, RunOptions{o.kernels}, false);
  std::shared_ptr<MlpLinkDecoder> decoder;
  if (plan.decoder) model->attach(decoder = make_link_decoder(*model, *plan.decoder));
  load_model_state(plan.checkpoint, *model, plan.best, world);
  LayerwiseOptions options;
  options.keep_layer = plan.keep_layer;
  options.progress = !o.quiet;
  const LayerwiseResult r =
      layerwise_inference(*model, g, world, normalization_for(plan.config.kind), options);
  EngineRows rows;
  rows.seconds = r.seconds;
  rows.classes = r.classes;
  rows.kept_width = r.kept_width;
  rows.logits.nodes = rows.kept.nodes = g.file_id;
  rows.logits.cols = r.classes;
  rows.logits.values = r.logits;
  rows.kept.cols = r.kept_width;
  rows.kept.values = r.kept;
  if (plan.keep_layer < 0) rows.kept.nodes.clear();
  if (!o.quiet)
    log_line("predict: layer-wise over partition " + partition + ", " + std::to_string(r.halo_rows) +
             " halo rows fetched");
  return rows;
}

std::string first_line(const Plan& plan) {
  const TrainingProgress& p = plan.info.progress;
  char line[320];
  if (plan.best)
    std::snprintf(line, sizeof(line),
                  "predict: %s, best-validation parameters of epoch %lld (valid %.4f), model %s",
                  plan.checkpoint.c_str(), (long long)p.best_epoch, p.best_valid, plan.info.model.c_str());
  else
    std::snprintf(line, sizeof(line), "predict: %s, final parameters of epoch %lld%s, model %s",
                  plan.checkpoint.c_str(), (long long)p.epochs_done,
                  plan.info.has_best ? "" : " (the checkpoint holds no best-validation parameters)",
                  plan.info.model.c_str());
  return line;
}

// A link-prediction checkpoint: the full forward's node embeddings score the pairs of `edges` (and the
// graph's link splits, where it has them, in the run's metric).
PredictResult predict_links(const PredictOptions& o, const Plan& plan, const Communicator& world) {
  const GraphFileReader reader(world, o.data);
  const NodePairs pairs = read_node_pairs(o.edges, reader.meta().num_nodes, world);
  std::unique_ptr<LinkLoss> splits;
  if (reader.meta().link_splits) {
    auto task = std::make_shared<const LinkTask>(read_link_task(reader, world, false));
    world.run_agreed([&] { splits = std::make_unique<LinkLoss>(task, LinkLossOptions{0, 1, plan.metric}); });
  }
  PredictResult result;
  result.accuracy.metric.clear();  // no link splits: no scores
  std::vector<double> scores;
  const auto score = [&](const LossInput& every_node, const std::shared_ptr<MlpLinkDecoder>& decoder) {
    scores = score_node_pairs(every_node, pairs, decoder.get());
    if (splits) splits->set_decoder(decoder);
    if (const std::optional<SplitScores> s = splits ? splits->score_splits(every_node) : std::nullopt)
      result.accuracy = Accuracy{s->train, s->valid, s->test, s->valid_loss, s->metric};
  };
  const EngineRows rows = run_full(o, plan, world, score);
  result.parameters = plan.best ? "best" : "final";
  result.epoch = plan.best ? plan.info.progress.best_epoch : plan.info.progress.epochs_done;
  result.engine = "full";
  result.seconds = rows.seconds;
  result.rows = pairs.size();
  const bool finite = std::all_of(scores.begin(), scores.end(), [](double x) { return std::isfinite(x); });
  world.check(finite,
              plan.checkpoint + ": the model's scores of " + o.edges + " are not finite; nothing written");
  nlohmann::json attributes = {{"format", "tessera-link-predictions"},
                               {"model", plan.info.model},
                               {"checkpoint", plan.checkpoint},
                               {"parameters", result.parameters},
                               {"epoch", result.epoch},
                               {"graph", o.data},
                               {"edges", o.edges}};
  if (!result.accuracy.metric.empty())
    attributes.update({{"metric", result.accuracy.metric},
                       {"metric_train", result.accuracy.train},
                       {"metric_valid", result.accuracy.valid},
                       {"metric_test", result.accuracy.test}});
  write_link_predictions(world, pairs, scores, o.output, o.csv, attributes);
  result.peak_bytes = all_reduce_value(world, int64_t(peak_rss_bytes()), ReduceOp::Max, "report");
  return result;
}

}  // namespace

PredictResult run_prediction(const PredictOptions& o, const Communicator& world) {
  const Plan plan = make_plan(o, world);
  if (!o.quiet) log_line(first_line(plan));
  check_graph(o, plan, world);
  if (plan.link) return predict_links(o, plan, world);
  // A reordered graph's outputs go in its original order: its original ids are checked before the forward.
  const GraphFileReader reader(world, o.data);
  const OutputOrder order = read_output_order(reader, world);
  const bool full = plan.engine == InferenceEngine::Full;
  const EngineRows rows = full ? run_full(o, plan, world) : run_layerwise(o, plan, world);
  const int64_t n = reader.meta().num_nodes;
  // Rows go to the blocks of the file's node ids, then, for a reordered file, to those of its original ids.
  const BlockRows logits =
      to_output_order(world, assemble_block_rows(world, n, rows.classes, rows.logits), order);
  const BlockRows kept = to_output_order(
      world, assemble_block_rows(world, n, plan.keep_layer >= 0 ? rows.kept_width : 0, rows.kept), order);
  // Finite parameters can still overflow in the forward: nothing is written from logits that are not finite
  // (the predicted class of a row of NaN would be class 0).
  int64_t nonfinite_rows = 0;
  for (size_t i = 0; i < logits.present.size(); ++i)
    for (int64_t j = 0; j < logits.width; ++j)
      if (logits.present[i] && !std::isfinite(logits.values[i * size_t(logits.width) + size_t(j)])) {
        ++nonfinite_rows;
        break;
      }
  nonfinite_rows = all_reduce_value(world, nonfinite_rows, ReduceOp::Sum, "predict");
  world.check(nonfinite_rows == 0,
              plan.checkpoint + ": the model's logits are not finite for " + std::to_string(nonfinite_rows) +
                  " nodes (its parameters are finite, but the forward overflows); nothing "
                  "written");
  PredictResult result;
  result.parameters = plan.best ? "best" : "final";
  result.epoch = plan.best ? plan.info.progress.best_epoch : plan.info.progress.epochs_done;
  result.engine = full ? "full" : "layerwise";
  result.seconds = rows.seconds;
  PredictionWrite what;
  what.path = o.output;
  what.csv = o.csv;
  what.split = plan.split;
  what.probabilities = o.probabilities;
  what.metric = plan.metric;
  what.attributes = {{"format", "tessera-predictions"},
                     {"model", plan.info.model},
                     {"checkpoint", plan.checkpoint},
                     {"parameters", result.parameters},
                     {"epoch", result.epoch},
                     {"engine", result.engine},
                     {"nodes", o.nodes},
                     {"graph", o.data},
                     {"embeddings_layer", plan.keep_layer}};
  result.accuracy = write_prediction_file(
      world, logits, kept, truth_in_output_order(world, read_block_truth(reader, world), order), what,
      result.rows);
  result.peak_bytes = all_reduce_value(world, int64_t(peak_rss_bytes()), ReduceOp::Max, "report");
  return result;
}

}  // namespace tessera
