// SPDX-License-Identifier: BSD-3-Clause
// Full-graph training, on one rank or on a 3D process grid (DESIGN §4): loads a graph file, builds the
// aggregation operators, runs epochs of forward / masked cross-entropy / backward / Adam, evaluates
// train/valid/test accuracy after each, reports (console line, --metrics JSON lines), keeps the
// best-validation predictions, checkpoints and resumes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/reduced_precision.hpp"
#include "tessera/graph/permutation.hpp"
#include "tessera/models/model.hpp"
#include "tessera/models/optimizer.hpp"
#include "tessera/prefetch/controller.hpp"

namespace tessera {

/// Partition-parallel neighbour-sampled training (DESIGN §6): --mode sampled.
struct SampledOptions {
  std::string partition;  // /partition/<name>; empty: metis-<ranks> (block on one rank); "block": file order
  std::string fanouts;    // "15,10,5", input layer first; empty: 10 per layer
  int64_t batch_size = 1024;  // seeds per rank per step
  PrefetchPolicy policy = PrefetchPolicy::Periodic;
  double fraction = 0.25;        // cache capacity, a fraction of the halo
  double alpha = 0.05;           // per-step score decay
  int64_t interval = 16;         // Delta: steps between evictions / a controller window
  std::string agent;             // external controller command
  double agent_timeout_s = 5;    // external: wait per window's answer before falling back to periodic
  bool thread = true;            // prepare step t + 1 on a worker thread (needs MPI_THREAD_MULTIPLE)
  std::string simulate_network;  // "LAT_US,GBPS": benchmarks only
};

struct TrainOptions {
  std::string data;
  std::string grid;  // "XxYxZ" or "auto": 3D full-graph training (GCN); empty: one rank (required on several)
  PermuteMode permute = PermuteMode::Double;  // 3D only
  std::string machine = "local";              // --grid auto: the performance model's machine profile
  std::string machine_file;                   // ... or a file from tessera bench comm / spmm --fit
  bool overlap = false;                       // 3D: chunked SpMM with non-blocking all-reduces
  CommDtype comm_dtype = CommDtype::F32;      // 3D: activations' all-reduces in fp32 or bf16
  // Mini-batch training on a 4D grid DxXxYxZ (DESIGN §5): --mode minibatch --batch-size B.
  bool minibatch = false;
  std::string batch_size;       // a count ("1024") or a fraction of the nodes ("0.25")
  int64_t steps_per_epoch = 0;  // 0: N / (B * D) rounded up, so an epoch sees about N vertices
  bool sampler_thread = true;   // build step t + 1's batch while step t trains
  bool sampled = false;         // --mode sampled
  SampledOptions sampling;
  bool fuse = true;   // 3D: bias + norm + ReLU + dropout fused into the norm's passes
  ModelConfig model;  // in / out are taken from the data
  AdamSettings optimizer;
  int64_t epochs = 200;
  bool normalize_features = false;
  std::string metrics_path;      // JSON lines, one per epoch
  std::string predictions_path;  // one predicted class per node (best-validation epoch)
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  bool resume = false;
  int64_t eval_every = 1;       // evaluate accuracy every K epochs (and after the last)
  bool quiet = false;           // no per-epoch console lines
  bool keep_last_step = false;  // fill TrainResult::last_logits / last_gradients (tests, debugging)
};

struct EpochRecord {
  int64_t epoch = 0;
  bool evaluated = false;  // the accuracies are set
  double loss = 0, train_acc = 0, valid_acc = 0, test_acc = 0;
  double seconds = 0, forward_s = 0, backward_s = 0, optimizer_s = 0, eval_s = 0;
};

struct TrainResult {
  std::vector<EpochRecord> history;  // epochs run by this call (after a resume: from the resumed epoch)
  int64_t best_epoch = -1;
  double best_valid = 0, test_at_best = 0;
  std::vector<float> final_weights;  // every parameter, concatenated (for resume checks)
  // With keep_last_step: the last training step's logits (nodes x classes, node order) and every
  // parameter's gradient of that step (before the optimizer), global layout, in final_weights order.
  std::vector<float> last_logits, last_gradients;
  // Sampled mode, summed over ranks and the run: what the feature cache saved.
  int64_t remote_rows = 0, cache_hits = 0, fetched_rows = 0, fetched_bytes = 0, evictions = 0;
};

/// Collective over world: one rank without --grid (GCN or GraphSAGE), else the 3D grid (GCN); with
/// options.minibatch, mini-batches on the 4D grid (GCN); with options.sampled, partition-parallel
/// neighbour-sampled training (GCN or GraphSAGE, one replica per rank).
/// Throws Error / CollectiveError on bad input.
TrainResult train_full_graph(const TrainOptions& options, const Communicator& world);

}  // namespace tessera
