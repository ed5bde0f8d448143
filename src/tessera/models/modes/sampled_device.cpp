// SPDX-License-Identifier: BSD-3-Clause
// A sampled training step built in kernels (DeviceSampledSteps): block_operator, transpose and
// leading_identity of sampled.cpp written for the execution space, giving the same entries in the same order
// (so the same bits), and the input rows and labels gathered where the features live.
#include <Kokkos_Sort.hpp>
#include <cmath>
#include <limits>

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/models/modes/sampled.hpp"

namespace tessera {

namespace {
using Policy = Kokkos::RangePolicy<ExecSpace>;
using DeviceCsr = CsrMatrix<float, DeviceSpace, SpmmColumn>;

}  // namespace

DeviceCsr device_block_operator(const DeviceSampledBlock& b, Normalization normalization) {
  const bool gcn = normalization == Normalization::Symmetric;
  const int64_t n = b.num_dst, own = gcn ? 1 : 0;  // GCN puts each row's own entry first
  DeviceCsr a;
  a.num_rows = n;
  a.num_cols = b.num_src();
  a.row_ptr = Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("sample_row_ptr"), size_t(n + 1));
  a.col_idx = Vector<SpmmColumn>(Kokkos::ViewAllocateWithoutInitializing("sample_col_idx"),
                                 size_t(b.nnz() + own * n));
  a.values = Vector<float>(Kokkos::ViewAllocateWithoutInitializing("sample_values"), a.col_idx.extent(0));
  const Vector<const int64_t> ptr = b.row_ptr, col = b.col, degree = b.src_degree;
  const Vector<int64_t> out_ptr = a.row_ptr;
  const Vector<SpmmColumn> out_col = a.col_idx;
  const Vector<float> out_value = a.values;
  Kokkos::parallel_for(
      "tessera::sample_weights", Policy(0, n + 1), KOKKOS_LAMBDA(int64_t i) {
        out_ptr(i) = ptr(i) + own * i;
        if (i == n) return;
        const int64_t begin = ptr(i), end = ptr(i + 1), k = end - begin;
        const double d = double(degree(i));
        int64_t at = begin + own * i;
        if (gcn) {
          out_col(at) = SpmmColumn(i);
          out_value(at++) = sampled_self_weight(d);
        }
        for (int64_t e = begin; e < end; ++e, ++at) {
          const int64_t j = col(e);
          out_col(at) = SpmmColumn(j);
          out_value(at) = sampled_edge_weight(normalization, d, double(degree(j)), double(k));
        }
      });
  return a;
}

// Each entry k becomes the key column * nnz + k; sorted, the keys list the transpose's entries row by row,
// and within a row by k, that is by the original row, as transpose(HostCsr) places them.
DeviceCsr device_transpose(const DeviceCsr& a) {
  const int64_t nnz = a.nnz(), rows = a.num_rows, cols = a.num_cols;
  require(nnz == 0 || cols <= std::numeric_limits<int64_t>::max() / nnz, "device_transpose: ", cols,
          " columns x ", nnz, " entries pass the 64-bit sort key");
  DeviceCsr t;
  t.num_rows = cols;
  t.num_cols = rows;
  t.row_ptr = Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("sample_row_ptr"), size_t(cols + 1));
  t.col_idx = Vector<SpmmColumn>(Kokkos::ViewAllocateWithoutInitializing("sample_col_idx"), size_t(nnz));
  if (!a.is_pattern())
    t.values = Vector<float>(Kokkos::ViewAllocateWithoutInitializing("sample_values"), size_t(nnz));
  const Vector<int64_t> count("sample_column_count", size_t(cols)), key("sample_keys", size_t(nnz));
  const Vector<const SpmmColumn> col = a.col_idx;
  Kokkos::parallel_for(
      "tessera::transpose_keys", Policy(0, nnz), KOKKOS_LAMBDA(int64_t k) {
        key(k) = int64_t(col(k)) * nnz + k;
        Kokkos::atomic_add(&count(col(k)), int64_t(1));
      });
  prefix_offsets(
      cols, KOKKOS_LAMBDA(int64_t c) { return count(c); }, t.row_ptr, "tessera::transpose_offsets");
  if (nnz == 0) return t;
  Kokkos::sort(key);
  const Vector<const int64_t> ptr = a.row_ptr;
  const Vector<const float> value = a.values;
  const Vector<SpmmColumn> out_col = t.col_idx;
  const Vector<float> out_value = t.values;
  const bool valued = !a.is_pattern();
  Kokkos::parallel_for(
      "tessera::transpose_entries", Policy(0, nnz), KOKKOS_LAMBDA(int64_t q) {
        const int64_t k = key(q) % nnz;
        out_col(q) = SpmmColumn(row_of_entry(ptr, rows, k));
        if (valued) out_value(q) = value(k);
      });
  return t;
}

DeviceCsr device_leading_identity(int64_t dst, int64_t src) {
  DeviceCsr a;
  a.num_rows = dst;
  a.num_cols = src;
  a.row_ptr = Vector<int64_t>(Kokkos::ViewAllocateWithoutInitializing("sample_row_ptr"), size_t(dst + 1));
  a.col_idx = Vector<SpmmColumn>(Kokkos::ViewAllocateWithoutInitializing("sample_col_idx"), size_t(dst));
  write_leading_identity(dst, src, a.row_ptr, a.col_idx);
  return a;
}

void write_leading_identity(int64_t rows, int64_t cols, const Vector<int64_t>& row_ptr,
                            const Vector<SpmmColumn>& col_idx) {
  const int64_t diagonal = rows < cols ? rows : cols;
  const Vector<int64_t> ptr = row_ptr;
  const Vector<SpmmColumn> col = col_idx;
  Kokkos::parallel_for(
      "tessera::sample_identity", Policy(0, rows + 1), KOKKOS_LAMBDA(int64_t i) {
        ptr(i) = i < diagonal ? i : diagonal;
        if (i < diagonal) col(i) = SpmmColumn(i);
      });
}

SamplePlace sampled_step_place(SamplePlace asked, bool device_build, int ranks, int64_t resident_bytes,
                               int64_t device_free) {
  const bool fits = device_free < 0 || resident_bytes <= device_free / 2;
  if (asked == SamplePlace::Auto)
    return device_build && ranks == 1 && fits ? SamplePlace::Device : SamplePlace::Host;
  if (asked == SamplePlace::Host) return SamplePlace::Host;
  require(
      ranks == 1,
      "`sample-on` device: sampled mode builds its steps on the device on one rank only (remote neighbour "
      "lists and the feature cache are host memory), not on ",
      ranks, " ranks; use `sample-on` host or auto");
  require(fits, "`sample-on` device: the graph's features, neighbour lists and labels take ",
          double(resident_bytes) / double(1 << 30), " GiB of device memory, more than half of the ",
          double(device_free) / double(1 << 30), " GiB free; use `sample-on` host or auto");
  return SamplePlace::Device;
}

int64_t DeviceSampledSteps::resident_bytes(const PartitionedGraph& graph) {
  return int64_t(graph.features.size() * sizeof(float)) +
         int64_t((graph.row_ptr.size() + graph.col.size() + graph.labels.size()) * sizeof(int64_t)) +
         int64_t(graph.targets.size()) + graph.count * int64_t(sizeof(int64_t));
}

DeviceSampledSteps::DeviceSampledSteps(const PartitionedGraph& graph, const std::vector<int>& fanouts,
                                       uint64_t seed, Normalization normalization, const BatchNeeds& needs)
    : graph_(graph),
      sampler_(graph, fanouts, seed),
      normalization_(normalization),
      needs_(needs),
      features_(
          kernel_view(graph.features, size_t(graph.count), size_t(graph.num_features), "sample.features")),
      labels_(kernel_view(graph.labels, "sample.labels")),
      targets_(graph.multi_label ? kernel_view(graph.targets, size_t(graph.count), size_t(graph.num_classes),
                                               "sample.targets")
                                 : Matrix<const int8_t>()) {
  require(!fanouts.empty(), "sampled training on the device: the model has no graph layer");
}

namespace {

// A block's weights and, when `transposed`, its transpose, as the step's adjacency.
std::unique_ptr<AdjacencyBlock> adjacency_of(DeviceCsr forward, bool transposed) {
  auto block = std::make_unique<AdjacencyBlock>();
  block->nnz = forward.nnz();
  if (transposed) block->transpose = CsrSpmm<float>(device_transpose(forward));
  block->has_transpose = transposed;
  block->forward = CsrSpmm<float>(std::move(forward));
  return block;
}

// x(i, :) = features(ids(i) - first, :).
void gather_rows(const Matrix<const float>& features, const Vector<const int64_t>& ids, int64_t first,
                 const Matrix<float>& x) {
  const int64_t rows = int64_t(x.extent(0)), width = int64_t(x.extent(1));
  Kokkos::parallel_for(
      "tessera::sample_gather", Policy(0, rows * width), KOKKOS_LAMBDA(int64_t k) {
        const int64_t i = k / width, c = k % width;
        x(i, c) = features(ids(i) - first, c);
      });
}

}  // namespace

const Batch& DeviceSampledSteps::build(const std::vector<int64_t>& seeds, int64_t epoch, int64_t step) {
  Stopwatch watch;
  const size_t n = seeds.size();
  reserve_vector(seeds_, int64_t(n), "sample.seeds");
  const Vector<int64_t> seed_ids = Kokkos::subview(seeds_, std::make_pair(size_t(0), n));
  Kokkos::deep_copy(seed_ids, HostVector<const int64_t>(seeds.data(), n));
  const std::vector<DeviceSampledBlock> blocks = sampler_.sample(seed_ids, epoch, step);
  views_ = GraphBatch();
  shapes_.clear();
  for (size_t l = 0; l < blocks.size(); ++l) {
    const DeviceSampledBlock& b = blocks[l];
    const bool transposed = needs_.transposed(int(l));
    views_.blocks.push_back(adjacency_of(device_block_operator(b, normalization_), transposed));
    const AdjacencyBlock* adjacency = views_.blocks.back().get();
    const AdjacencyBlock* self = nullptr;
    if (needs_.self_blocks) {
      views_.blocks.push_back(adjacency_of(device_leading_identity(b.num_dst, b.num_src()), transposed));
      self = views_.blocks.back().get();
    }
    const Vector<const int64_t> dst = Kokkos::subview(b.src, std::make_pair(int64_t(0), b.num_dst));
    views_.layers.push_back(LayerGraph{adjacency, self, dst, b.num_dst, b.num_dst, false});
    shapes_.push_back(Shape{b.num_dst, b.num_src(), b.nnz()});
  }
  const DeviceSampledBlock& input = blocks.front();
  const int64_t rows = input.num_src();
  views_.input = LayerGraph{nullptr, nullptr, input.src, rows, rows, false};
  Kokkos::fence();
  sample_s_ = watch.seconds();
  Stopwatch gather_watch;
  if (int64_t(x_.extent(0)) < rows)
    x_ = Matrix<float>(Kokkos::ViewAllocateWithoutInitializing("step.features"),
                       size_t(grown_capacity(int64_t(x_.extent(0)), rows)), size_t(graph_.num_features));
  const Matrix<float> x(Kokkos::subview(x_, std::make_pair(int64_t(0), rows), Kokkos::ALL()));
  gather_rows(features_, input.src, graph_.first, x);
  if (batch_labels_.extent(0) < n) {
    reserve_vector(batch_labels_, int64_t(n), "step.labels");
    ones_ = Vector<uint8_t>("step.mask", batch_labels_.extent(0));
    Kokkos::deep_copy(ones_, uint8_t(1));
  }
  const Vector<int64_t> labels = Kokkos::subview(batch_labels_, std::make_pair(size_t(0), n));
  const Vector<const int64_t> all_labels = labels_;
  const int64_t first = graph_.first;
  Kokkos::parallel_for(
      "tessera::sample_labels", Policy(0, int64_t(n)),
      KOKKOS_LAMBDA(int64_t i) { labels(i) = all_labels(seed_ids(i) - first); });
  Matrix<int8_t> targets;
  if (graph_.multi_label) {
    if (batch_targets_.extent(0) < n)
      batch_targets_ = Matrix<int8_t>(Kokkos::ViewAllocateWithoutInitializing("step.targets"),
                                      size_t(grown_capacity(int64_t(batch_targets_.extent(0)), int64_t(n))),
                                      targets_.extent(1));
    targets = Kokkos::subview(batch_targets_, std::make_pair(size_t(0), n), Kokkos::ALL());
    const Matrix<const int8_t> all_targets = targets_;
    const int64_t tasks = int64_t(targets_.extent(1));
    Kokkos::parallel_for(
        "tessera::sample_targets", Policy(0, int64_t(n) * tasks), KOKKOS_LAMBDA(int64_t e) {
          targets(e / tasks, e % tasks) = all_targets(seed_ids(e / tasks) - first, e % tasks);
        });
  }
  Kokkos::fence();
  gather_s_ = gather_watch.seconds();
  views_.scratch_input = x.data();  // the step's own rows: an input dropout may overwrite them
  batch_ = Batch{&views_, x, labels, Kokkos::subview(ones_, std::make_pair(size_t(0), n)), targets};
  return batch_;
}

}  // namespace tessera
