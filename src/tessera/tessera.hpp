// SPDX-License-Identifier: BSD-3-Clause
// Everything an application embedding Tessera uses, in one include: the runtime, the process grid, graph
// files, graphs on the grid (from files or from the application's own rows), the layer API and library
// layers, models, batch sources, the trainer and its hooks, and run_training (what `tessera train` runs).
#pragma once

#include "tessera/comm/collectives.hpp"
#include "tessera/comm/process_grid.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/runtime.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/models/nn/activation.hpp"
#include "tessera/models/nn/conv.hpp"
#include "tessera/models/modes/full_graph.hpp"
#include "tessera/models/nn/graph_multiply.hpp"
#include "tessera/models/training/hooks.hpp"
#include "tessera/models/nn/layer.hpp"
#include "tessera/models/nn/link_loss.hpp"
#include "tessera/models/modes/layerwise.hpp"
#include "tessera/models/nn/metric.hpp"
#include "tessera/models/modes/minibatch.hpp"
#include "tessera/models/nn/model.hpp"
#include "tessera/models/nn/norm.hpp"
#include "tessera/models/predict.hpp"
#include "tessera/models/modes/sampled.hpp"
#include "tessera/models/nn/sequential.hpp"
#include "tessera/models/modes/step_uploads.hpp"
#include "tessera/models/train.hpp"
#include "tessera/models/training/trainer.hpp"
#include "tessera/parallel3d/graph3d.hpp"

/// Tessera: distributed graph neural network training — 3D full-graph (Plexus), 4D mini-batch (ScaleGNN)
/// and partition-parallel neighbour-sampled training with a prefetch cache (MassiveGNN, Rudder).
namespace tessera {}

/// Tessera's command line: its option parsers (apps/).
namespace tessera::app {}
