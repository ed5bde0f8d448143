// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/synth.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/memory.hpp"
#include "tessera/core/random.hpp"
#include "tessera/core/threads.hpp"

namespace tessera {
namespace {

// Random streams: what each number is for.
enum Stream : uint64_t {
  kEdges = 1,
  kFeatures = 2,
  kClassMeans = 3,
  kSplit = 4,
  kTaskLean = 5,
  kTaskDraw = 6
};

int ceil_log2(int64_t n) {
  int bits = 0;
  while ((int64_t(1) << bits) < n) ++bits;
  return bits;
}

std::pair<int64_t, int64_t> rmat_edge(const SynthOptions& o, int64_t e) {
  const CounterRng rng(o.seed, kEdges);
  const int scale = ceil_log2(o.num_nodes);
  // Redraw (with a new counter) until both ends fall below N when N is not a power of two.
  for (uint64_t attempt = 0;; ++attempt) {
    int64_t u = 0, v = 0;
    for (int level = 0; level < scale; level += 4) {
      const Philox4x32Block r = rng.bits(uint64_t(e), attempt << 8 | uint64_t(level / 4));
      for (int k = 0; k < 4 && level + k < scale; ++k) {
        const double x = double(r.v[k]) * (1.0 / 4294967296.0);
        const int bu = x >= o.rmat_a + o.rmat_b;
        const int bv = (x >= o.rmat_a && x < o.rmat_a + o.rmat_b) || x >= o.rmat_a + o.rmat_b + o.rmat_c;
        u = u << 1 | bu;
        v = v << 1 | bv;
      }
    }
    if (u < o.num_nodes && v < o.num_nodes) return {u, v};
  }
}

std::pair<int64_t, int64_t> csbm_edge(const SynthOptions& o, int64_t e) {
  const CounterRng rng(o.seed, kEdges);
  const int64_t u = int64_t(rng.below(uint64_t(e), 0, uint64_t(o.num_nodes)));
  if (rng.uniform_double(uint64_t(e), 1) < o.intra_class) {
    // Another node of u's class: classes are residues modulo C.
    const int64_t c = csbm_class(o, u);
    const int64_t members = (o.num_nodes - c + o.num_classes - 1) / o.num_classes;
    return {u, c + o.num_classes * int64_t(rng.below(uint64_t(e), 2, uint64_t(members)))};
  }
  return {u, int64_t(rng.below(uint64_t(e), 3, uint64_t(o.num_nodes)))};
}

// Routes every generated directed edge (both directions of each undirected one) to the rank owning
// its destination row, in rounds that bound the send buffers. Returns (dst, src) pairs of own rows.
std::vector<std::pair<int64_t, int64_t>> generate_owned_edges(const SynthOptions& o,
                                                              const Communicator& comm) {
  const int p = comm.size();
  const auto [e_begin, e_end] = block_range(o.num_edges, comm.rank(), p);
  std::vector<int64_t> row_start(size_t(p) + 1);
  for (int r = 0; r <= p; ++r) row_start[size_t(r)] = block_range(o.num_nodes, r, p).first;
  row_start[size_t(p)] = o.num_nodes;
  auto owner = [&](int64_t v) {
    return int(std::upper_bound(row_start.begin(), row_start.end(), v) - row_start.begin()) - 1;
  };

  const int64_t round_edges = int64_t(1) << 22;
  const int64_t rounds =
      all_reduce_value(comm, (e_end - e_begin + round_edges - 1) / round_edges, ReduceOp::Max, "synth");
  std::vector<std::pair<int64_t, int64_t>> owned;
  Progress progress("prep: generating edges", rounds);
  std::vector<int64_t> send, recv, counts(static_cast<size_t>(p)), offsets(static_cast<size_t>(p));
  std::vector<std::pair<int64_t, int64_t>> batch;
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t lo = std::min(e_begin + round * round_edges, e_end), hi = std::min(lo + round_edges, e_end);
    batch.clear();
    for (int64_t e = lo; e < hi; ++e) {
      const auto [u, v] = synthetic_edge(o, e);
      if (u == v) continue;
      batch.push_back({v, u});
      batch.push_back({u, v});
    }
    std::fill(counts.begin(), counts.end(), 0);
    for (const auto& [dst, src] : batch) counts[size_t(owner(dst))] += 2;
    offsets[0] = 0;
    for (int r = 1; r < p; ++r) offsets[size_t(r)] = offsets[size_t(r - 1)] + counts[size_t(r - 1)];
    send.resize(batch.size() * 2);
    for (const auto& [dst, src] : batch) {
      int64_t& at = offsets[size_t(owner(dst))];
      send[size_t(at++)] = dst;
      send[size_t(at++)] = src;
    }
    const std::vector<int64_t> recv_counts = exchange_counts(comm, counts, "synth edges");
    int64_t total = 0;
    for (int64_t c : recv_counts) total += c;
    recv.resize(static_cast<size_t>(total));
    all_to_allv(comm, send.data(), counts, recv.data(), recv_counts, "synth edges");
    for (int64_t k = 0; k < total; k += 2) owned.push_back({recv[size_t(k)], recv[size_t(k + 1)]});
    progress.set(round + 1);
  }
  return owned;
}

}  // namespace

int64_t csbm_class(const SynthOptions& o, int64_t v) {
  return v % o.num_classes;
}

int8_t synthetic_task_label(const SynthOptions& o, int64_t cls, int64_t v, int64_t t) {
  const CounterRng lean(o.seed, kTaskLean), draw(o.seed, kTaskDraw);
  if (draw.uniform_double(uint64_t(v), uint64_t(2 * t + 1)) < o.unobserved_fraction) return -1;
  const double p = lean.uniform_double(uint64_t(cls), uint64_t(t)) < 0.5 ? 0.85 : 0.15;
  return draw.uniform_double(uint64_t(v), uint64_t(2 * t)) < p ? 1 : 0;
}

std::pair<int64_t, int64_t> synthetic_edge(const SynthOptions& o, int64_t e) {
  return o.kind == SynthKind::Rmat ? rmat_edge(o, e) : csbm_edge(o, e);
}

namespace {

// Refused before any allocation when a rank's share (its rows' features, both directions of its edges as
// pairs while they are sorted, labels and offsets) exceeds the memory the node has for it.
void check_synthetic_memory(const SynthOptions& o, const Communicator& comm) {
  const double p = double(comm.size());
  const double rows = double(o.num_nodes) / p, edges = 2.0 * double(o.num_edges) / p;
  const double need = rows * (4.0 * double(o.num_features) + 24.0) + edges * 32.0;
  const AvailableMemory node = available_memory();
  const int sharing = thread_choice().known ? std::max(1, thread_choice().node_ranks) : 1;
  const double have = node.bytes < 0 ? -1.0 : double(node.bytes) / double(sharing);
  char line[320];
  std::snprintf(
      line, sizeof(line),
      "synthetic graph: about %.1f GiB per rank are needed for %lld nodes, %lld edges and %lld "
      "features on %d ranks, more than the %.1f GiB each rank has; use more ranks or a smaller graph",
      need / 1073741824.0, (long long)o.num_nodes, (long long)o.num_edges, (long long)o.num_features,
      comm.size(), have / 1073741824.0);
  comm.check(have < 0 || need <= have, line);
}

}  // namespace

GraphMeta generate_synthetic(const SynthOptions& o, const std::string& output, const Communicator& comm) {
  comm.check(o.num_nodes >= 2, "synthetic graph: `nodes` must be at least 2");
  comm.check(o.num_edges >= 1, "synthetic graph: `edges` must be at least 1");
  comm.check(o.num_features >= 1, "synthetic graph: `features` must be at least 1");
  comm.check(o.num_classes >= 1 && o.num_classes <= o.num_nodes,
             "synthetic graph: `classes` must be in [1, nodes]");
  comm.check(o.rmat_a > 0 && o.rmat_b >= 0 && o.rmat_c >= 0 && o.rmat_a + o.rmat_b + o.rmat_c < 1,
             "synthetic graph: R-MAT probabilities need a > 0, b, c >= 0 and a + b + c < 1");
  comm.check(o.intra_class >= 0 && o.intra_class <= 1, "synthetic graph: `intra-class` must be in [0, 1]");
  comm.check(o.tasks >= 0 && o.tasks <= (int64_t(1) << 24), "synthetic graph: `tasks` must be in [0, 2^24]");
  comm.check(o.unobserved_fraction >= 0 && o.unobserved_fraction < 1,
             "synthetic graph: `unobserved` must be in [0, 1)");
  comm.check(o.train_fraction >= 0 && o.valid_fraction >= 0 && o.train_fraction + o.valid_fraction <= 1,
             "synthetic graph: split fractions must be non-negative and sum to at most 1");
  constexpr int64_t kMaxCount = int64_t(1) << 40, kMaxFeatures = int64_t(1) << 20;
  comm.check(o.num_nodes <= kMaxCount && o.num_edges <= kMaxCount && o.num_features <= kMaxFeatures,
             "synthetic graph: `nodes` and `edges` must be at most 2^40, `features` at most 2^20");
  const int p = comm.size();
  check_synthetic_memory(o, comm);
  const auto [begin, end] = block_range(o.num_nodes, comm.rank(), p);
  const int64_t rows = end - begin;

  // Edges: gather own rows' in-edges, sort, drop duplicates, build the local CSR rows.
  std::vector<std::pair<int64_t, int64_t>> pairs = generate_owned_edges(o, comm);
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  std::vector<int64_t> degree(size_t(rows), 0), indices(pairs.size());
  for (size_t k = 0; k < pairs.size(); ++k) {
    ++degree[size_t(pairs[k].first - begin)];
    indices[k] = pairs[k].second;
  }
  std::vector<std::pair<int64_t, int64_t>>().swap(pairs);
  int64_t local_edges = int64_t(indices.size()), edge_offset = 0;
  check_mpi(MPI_Exscan(&local_edges, &edge_offset, 1, MPI_INT64_T, MPI_SUM, comm.get()), "MPI_Exscan");
  if (comm.rank() == 0) edge_offset = 0;
  const int64_t total_edges = all_reduce_value(comm, local_edges, ReduceOp::Sum, "synth");

  // Splits: a uniform draw per node decides train / valid / test.
  const CounterRng split_rng(o.seed, kSplit);
  std::map<std::string, std::vector<int64_t>> split_ids;
  for (int64_t v = begin; v < end; ++v) {
    const double x = split_rng.uniform_double(uint64_t(v), 0);
    split_ids[x < o.train_fraction                      ? "train"
              : x < o.train_fraction + o.valid_fraction ? "valid"
                                                        : "test"]
        .push_back(v);
  }
  std::map<std::string, int64_t> split_sizes, split_offsets;
  for (const char* kind : {"train", "valid", "test"}) {
    int64_t count = int64_t(split_ids[kind].size()), offset = 0;
    check_mpi(MPI_Exscan(&count, &offset, 1, MPI_INT64_T, MPI_SUM, comm.get()), "MPI_Exscan");
    split_offsets[kind] = comm.rank() == 0 ? 0 : offset;
    split_sizes[kind] = all_reduce_value(comm, count, ReduceOp::Sum, "synth");
  }

  GraphMeta meta;
  const bool rmat = o.kind == SynthKind::Rmat;
  meta.name =
      o.name.empty() ? std::string(rmat ? "rmat" : "csbm") + "-seed" + std::to_string(o.seed) : o.name;
  meta.source = std::string("tessera synthetic ") + (rmat ? "R-MAT" : "contextual SBM") + ", seed " +
                std::to_string(o.seed) + ", " + std::to_string(o.num_edges) + " undirected edges drawn";
  meta.num_nodes = o.num_nodes;
  meta.num_edges = total_edges;
  meta.num_features = o.num_features;
  meta.num_classes = o.tasks > 0 ? o.tasks : o.num_classes;
  meta.multi_label = o.tasks > 0;
  meta.symmetric = true;
  meta.feature_dtype = o.feature_dtype;
  GraphFileWriter writer(comm, output, meta, split_sizes);

  std::vector<int64_t> indptr(size_t(rows) + 1);
  indptr[0] = edge_offset;
  for (int64_t i = 0; i < rows; ++i) indptr[size_t(i + 1)] = indptr[size_t(i)] + degree[size_t(i)];
  // The last rank also writes entry N (the total).
  writer.write_indptr(begin, rows + (end == o.num_nodes ? 1 : 0), indptr.data());
  writer.write_indices(edge_offset, local_edges, indices.data());
  std::vector<int64_t>().swap(indices);

  // Labels: degree buckets (R-MAT) or the block (CSBM).
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    labels[size_t(i)] = rmat ? std::min<int64_t>(o.num_classes - 1, ceil_log2(degree[size_t(i)] + 1))
                             : csbm_class(o, begin + i);
  if (o.tasks > 0) {
    std::vector<int8_t> matrix(size_t(rows * o.tasks));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t t = 0; t < o.tasks; ++t)
        matrix[size_t(i * o.tasks + t)] = synthetic_task_label(o, labels[size_t(i)], begin + i, t);
    writer.write_label_matrix(begin, rows, matrix.data());
  } else {
    writer.write_labels(begin, rows, labels.data());
  }
  for (const char* kind : {"train", "valid", "test"})
    writer.write_split(kind, split_offsets[kind], int64_t(split_ids[kind].size()), split_ids[kind].data());

  // Features, in row blocks (collective writes: every rank runs the same number of rounds).
  const CounterRng noise(o.seed, kFeatures), means(o.seed, kClassMeans);
  const int64_t f = o.num_features, block = std::max<int64_t>(1, (int64_t(32) << 20) / (4 * f));
  const int64_t rounds = all_reduce_value(comm, (rows + block - 1) / block, ReduceOp::Max, "synth");
  std::vector<float> values;
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t first = std::min(begin + round * block, end), count = std::min(block, end - first);
    values.resize(size_t(count * f));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t v = first + i;
      for (int64_t j = 0; j < f; ++j) {
        float x = noise.normal(uint64_t(v), uint64_t(j));
        if (!rmat) x += float(o.feature_signal) * means.normal(uint64_t(csbm_class(o, v)), uint64_t(j));
        values[size_t(i * f + j)] = x;
      }
    }
    writer.write_features(first, count, values.data());
  }
  writer.commit();
  return meta;
}

}  // namespace tessera
