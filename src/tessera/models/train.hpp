// SPDX-License-Identifier: BSD-3-Clause
// `tessera train` as a library call: run_training, which loads the graph for the mode, builds the model
// (model.hpp), the batch source and the hooks the options (train_options.hpp) ask for, and runs the Trainer.
// Applications that want their own model, graph or hooks assemble the same pieces (docs/library.md).
#pragma once

#include <optional>
#include <string>

#include "tessera/models/train_options.hpp"
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera {

struct GraphMeta;  // graph/graph_file.hpp

/// Collective over `world`: the run the options describe (full mode on several ranks without a grid: the
/// grid --grid auto would pick). Throws CollectiveError (or Error) on bad input, naming the file or option.
TrainResult run_training(const TrainOptions& options, const Communicator& world);
/// The same with an application's hooks, run after the ones the options ask for, in this order (hooks.hpp
/// lists the library's); the run owns them.
TrainResult run_training(const TrainOptions& options, const Communicator& world,
                         std::vector<std::unique_ptr<TrainerHook>> hooks);

/// Collective: the checks run_training makes on the options before it reads anything (ranges, the grid's
/// form for the mode, kernels this build has); throws CollectiveError on every rank with the first problem.
void check_options(const TrainOptions& options, const Communicator& world);

/// Collective, before anything is loaded: every output path (metrics, predictions, embeddings, the
/// checkpoint) checked against the inputs (graph, partition file, the checkpoint resumed from) and each other
/// (PathPlan), the checkpoint directory created; throws CollectiveError with the first problem.
void check_paths(const TrainOptions& options, const Communicator& world);

/// The options that change a run's result, as a flat object (the run identity a checkpoint stores; the
/// graph's is added by the caller). Epochs, outputs and pure performance settings are left out.
nlohmann::json run_identity(const TrainOptions& options, int world_size);

/// Whether `options` train a link task on a graph of `meta`: `task` link, or auto on a graph of link splits
/// without node labels.
bool is_link_task(const TrainOptions& options, const GraphMeta& meta);

/// What the performance model needs of a graph file's sizes and a model (plan_grids, predict_memory).
ProblemSize problem_size(const GraphMeta& meta, const ModelConfig& model, bool recompute_aggregation = false,
                         int64_t exchange_budget = kDefaultExchangeBudget);

}  // namespace tessera
