// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/models/nn/link_loss.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/models/nn/random_streams.hpp"

namespace tessera {

namespace {

NodePairs pairs_of(const std::vector<int64_t>& rows) {
  NodePairs p;
  for (size_t i = 0; i + 1 < rows.size(); i += 2)
    p.source.push_back(rows[i]), p.target.push_back(rows[i + 1]);
  return p;
}

const LinkSplitInfo* find_split(const GraphFileReader& reader, const std::string& name) {
  for (const LinkSplitInfo& s : reader.link_splits())
    if (s.name == name) return &s;
  return nullptr;
}

// The split's datasets, every id checked against the node range on every rank.
LinkEvaluationSplit read_split(const GraphFileReader& reader, const LinkSplitInfo& info,
                               const Communicator& comm) {
  LinkEvaluationSplit s;
  s.positives = pairs_of(reader.read_link_rows(info.name, "edges", 0, info.edges));
  if (info.shared_negatives > 0)
    s.shared_negatives = pairs_of(reader.read_link_rows(info.name, "negatives", 0, info.shared_negatives));
  if (info.negatives_per_edge > 0) {
    s.negative_targets = reader.read_link_rows(info.name, "negative_targets", 0, info.edges);
    s.negatives_per_edge = info.negatives_per_edge;
  }
  const int64_t n = reader.meta().num_nodes;
  const auto outside = [n](const std::vector<int64_t>& ids) {
    return std::any_of(ids.begin(), ids.end(), [n](int64_t v) { return v < 0 || v >= n; });
  };
  const bool bad = outside(s.positives.source) || outside(s.positives.target) ||
                   outside(s.shared_negatives.source) || outside(s.shared_negatives.target) ||
                   outside(s.negative_targets);
  comm.check(!bad,
             reader.path() + ": /link/" + info.name + " names a node outside [0, " + std::to_string(n) + ")");
  return s;
}

}  // namespace

LinkTask read_link_task(const GraphFileReader& reader, const Communicator& comm, bool training) {
  LinkTask task;
  task.num_nodes = reader.meta().num_nodes;
  const LinkSplitInfo* train = find_split(reader, "train");
  comm.check(!training || (train != nullptr && train->edges > 0),
             reader.path() + " has no /link/train/edges: a link task trains on its pairs (tessera.convert " +
                 "--link-split writes them)");
  if (train != nullptr) task.train = read_split(reader, *train, comm).positives;
  for (const char* name : {"valid", "test"})
    if (const LinkSplitInfo* info = find_split(reader, name)) {
      comm.check(info->shared_negatives > 0 || info->negatives_per_edge > 0,
                 reader.path() + ": /link/" + name + " has no negatives (negatives or negative_targets) " +
                     "to rank its edges against");
      (std::string(name) == "valid" ? task.valid : task.test) = read_split(reader, *info, comm);
    }
  comm.check(!task.valid.empty() || !task.test.empty(),
             reader.path() + " has neither /link/valid nor /link/test: nothing to score a link task on");
  return task;
}

namespace {

// The local columns of the rows of `nodes` (sorted, distinct), gathered over the rows' axis: every rank of
// the axis holds the same matrix, nodes x cols, row-major.
struct GatheredRows {
  std::vector<int64_t> nodes;
  std::vector<float> values;
  int64_t cols = 0;
  // Index of `node` in nodes (it must be there).
  int64_t index(int64_t node) const {
    return int64_t(std::lower_bound(nodes.begin(), nodes.end(), node) - nodes.begin());
  }
};

// Host copies of a block's rows' nodes and logits.
struct HostBlock {
  decltype(Kokkos::create_mirror_view_and_copy(HostSpace(), Vector<const int64_t>())) nodes;
  decltype(Kokkos::create_mirror_view_and_copy(HostSpace(), Matrix<const float>())) logits;
};
HostBlock host_block(const LossInput& in) {
  require(in.nodes.extent(0) == in.logits.extent(0), "link loss: the batch gives no node per row ",
          "(LossInput::nodes)");
  return {Kokkos::create_mirror_view_and_copy(HostSpace(), in.nodes),
          Kokkos::create_mirror_view_and_copy(HostSpace(), in.logits)};
}

GatheredRows gather_rows(const LossInput& in, const HostBlock& block, std::vector<int64_t> nodes) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  GatheredRows g{std::move(nodes), {}, in.real_columns()};
  std::vector<int64_t> mine;
  std::vector<float> values;
  for (int64_t i = 0; i < int64_t(block.nodes.extent(0)); ++i) {
    const int64_t v = block.nodes(i);
    if (v < 0 || !std::binary_search(g.nodes.begin(), g.nodes.end(), v)) continue;
    mine.push_back(g.index(v));
    for (int64_t j = 0; j < g.cols; ++j) values.push_back(block.logits(i, j));
  }
  const Communicator& rows = *in.layout.rows;
  if (rows.size() == 1) {  // this rank holds every row
    g.values.assign(g.nodes.size() * size_t(g.cols), 0.0f);
    for (size_t r = 0; r < mine.size(); ++r)
      std::copy_n(values.begin() + int64_t(r) * g.cols, g.cols, g.values.begin() + mine[r] * g.cols);
    return g;
  }
  std::vector<int64_t> counts(size_t(rows.size()));
  const int64_t count = int64_t(mine.size());
  all_gather(rows, &count, 1, counts.data(), "link gather");
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<int64_t> where(static_cast<size_t>(total));
  all_gather_v(rows, mine.data(), counts, where.data(), "link gather");
  for (int64_t& c : counts) c *= g.cols;
  std::vector<float> got(size_t(total * g.cols));
  all_gather_v(rows, values.data(), counts, got.data(), "link gather");
  g.values.assign(g.nodes.size() * size_t(g.cols), 0.0f);
  for (int64_t r = 0; r < total; ++r)
    std::copy_n(got.begin() + r * g.cols, g.cols, g.values.begin() + where[size_t(r)] * g.cols);
  return g;
}

// Where pair e's rows are: this rank's columns of h_u and of h_v.
using RowsOf = std::function<std::pair<const float*, const float*>(int64_t)>;

constexpr int64_t kScoreChunk = 16384;  // pairs a decoder scores at once in evaluation

// Every pair's score, this rank's `cols` columns summed over the columns' axis: h_u . h_v, or the decoder's
// MLP(h_u * h_v) (with `keep`, in one pass that backward() follows; else in chunks). Every rank of the axis
// names the same pairs, so every rank enters the same reductions.
std::vector<double> pair_scores(const Communicator& columns, int64_t cols, int64_t count, const RowsOf& rows,
                                MlpLinkDecoder* decoder, bool keep) {
  std::vector<double> s;
  if (decoder == nullptr) {
    s.assign(size_t(count), 0.0);
    for (int64_t e = 0; e < count; ++e) {
      const auto [u, v] = rows(e);
      double sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += double(u[j]) * double(v[j]);
      s[size_t(e)] = sum;
    }
    if (columns.size() > 1) all_reduce(columns, s.data(), count, ReduceOp::Sum, "link scores");
    return s;
  }
  require(decoder->local_columns() == cols, "link loss: the decoder holds ", decoder->local_columns(),
          " columns of the embeddings, the logits ", cols);
  const int64_t chunk = keep ? std::max<int64_t>(count, 1) : kScoreChunk;
  for (int64_t first = 0; first < count || (keep && first == 0); first += chunk) {
    const int64_t n = std::min(chunk, count - first);
    std::vector<double> products(size_t(n * cols));
    for (int64_t e = 0; e < n; ++e) {
      const auto [u, v] = rows(first + e);
      for (int64_t j = 0; j < cols; ++j) products[size_t(e * cols + j)] = double(u[j]) * double(v[j]);
    }
    const std::vector<double> part = decoder->scores(std::move(products), n, keep);
    s.insert(s.end(), part.begin(), part.end());
  }
  return s;
}

// d(sum)/d(product) of each kept pair's columns from d(sum)/d(score): the decoder's backward, or for the dot
// product the pair's own d(score) in every column.
struct ProductGradient {
  std::vector<double> values;
  int64_t row_stride = 1, col_stride = 0;
  double at(int64_t e, int64_t j) const { return values[size_t(e * row_stride + j * col_stride)]; }
};
ProductGradient product_gradient(MlpLinkDecoder* decoder, std::vector<double> d_scores, int64_t cols) {
  if (decoder == nullptr) return {std::move(d_scores), 1, 0};
  return {decoder->backward(d_scores), cols, 1};
}

// log(1 + e^s) - y s without overflow.
double binary_cross_entropy(double s, double y) {
  return std::max(s, 0.0) - y * s + std::log1p(std::exp(-std::abs(s)));
}

std::vector<int64_t> endpoints(const NodePairs& p) {
  std::vector<int64_t> v(p.source);
  v.insert(v.end(), p.target.begin(), p.target.end());
  return v;
}

void append(NodePairs& to, const NodePairs& from) {
  to.source.insert(to.source.end(), from.source.begin(), from.source.end());
  to.target.insert(to.target.end(), from.target.begin(), from.target.end());
}

// The BCE sum over pairs of their scores (the first `positives` labelled 1 unless `labels` names each), and
// d(sum)/d(score) of each.
double bce_and_gradient(const std::vector<double>& scores, int64_t positives,
                        const std::vector<uint8_t>* labels, std::vector<double>& d_scores) {
  double sum = 0;
  d_scores.resize(scores.size());
  for (size_t e = 0; e < scores.size(); ++e) {
    const double y = labels != nullptr ? (*labels)[e] : int64_t(e) < positives ? 1.0 : 0.0, s = scores[e];
    sum += binary_cross_entropy(s, y);
    d_scores[e] = 1.0 / (1.0 + std::exp(-s)) - y;
  }
  return sum;
}

// The loss of pairs the batch names as rows of this rank's logits (every row of the replica here).
LossSum row_pairs_loss(const LossInput& in, const RowPairs& pairs, const Matrix<float>& grad,
                       MlpLinkDecoder* decoder) {
  require(in.layout.rows->size() == 1, "link loss: pairs named as rows need every row on the rank");
  const auto logits = Kokkos::create_mirror_view_and_copy(HostSpace(), in.logits);
  const int64_t cols = in.real_columns(), rows = int64_t(logits.extent(0));
  for (int64_t e = 0; e < pairs.size(); ++e) {
    const int64_t u = pairs.source[size_t(e)], v = pairs.target[size_t(e)];
    require(u >= 0 && u < rows && v >= 0 && v < rows, "link loss: pair ", e, " names a row outside [0, ",
            rows, ")");
  }
  const RowsOf rows_of = [&](int64_t e) {
    return std::make_pair(&logits(pairs.source[size_t(e)], 0), &logits(pairs.target[size_t(e)], 0));
  };
  const std::vector<double> scores =
      pair_scores(*in.layout.classes, cols, pairs.size(), rows_of, decoder, true);
  std::vector<double> d_scores;
  const double sum = bce_and_gradient(scores, 0, &pairs.label, d_scores);
  const ProductGradient d = product_gradient(decoder, std::move(d_scores), cols);
  // Summed in double, as the gathered path sums (a hub's row collects many pairs' terms).
  std::vector<double> d_rows(size_t(rows * cols), 0.0);
  for (int64_t e = 0; e < pairs.size(); ++e) {
    const int64_t u = pairs.source[size_t(e)], v = pairs.target[size_t(e)];
    for (int64_t j = 0; j < cols; ++j) {
      d_rows[size_t(u * cols + j)] += d.at(e, j) * double(logits(v, j));
      d_rows[size_t(v * cols + j)] += d.at(e, j) * double(logits(u, j));
    }
  }
  const auto host_grad = Kokkos::create_mirror_view(HostSpace(), grad);
  Kokkos::deep_copy(host_grad, 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) host_grad(i, j) = float(d_rows[size_t(i * cols + j)]);
  Kokkos::deep_copy(grad, host_grad);
  return {sum, pairs.size()};
}

// Every pair's score from rows gathered over the rows' axis.
std::vector<double> gathered_scores(const LossInput& in, const GatheredRows& g, const NodePairs& pairs,
                                    MlpLinkDecoder* decoder, bool keep) {
  const RowsOf rows_of = [&](int64_t e) {
    return std::make_pair(g.values.data() + g.index(pairs.source[size_t(e)]) * g.cols,
                          g.values.data() + g.index(pairs.target[size_t(e)]) * g.cols);
  };
  return pair_scores(*in.layout.classes, g.cols, pairs.size(), rows_of, decoder, keep);
}

}  // namespace

std::vector<int64_t> shuffled_pairs(uint64_t seed, int64_t epoch, const std::vector<int64_t>& pairs) {
  const CounterRng rng(seed, streams::kLinkOrder);
  std::vector<std::pair<uint64_t, int64_t>> keyed;
  for (int64_t i : pairs) {
    const Philox4x32Block b = rng.bits(uint64_t(epoch), uint64_t(i));
    keyed.emplace_back(uint64_t(b.v[0]) << 32 | b.v[1], i);
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int64_t> order;
  for (const auto& entry : keyed) order.push_back(entry.second);
  return order;
}

int64_t link_negative_target(uint64_t seed, int64_t key, int64_t pair, int64_t negatives, int64_t d,
                             int64_t num_nodes) {
  const CounterRng rng(seed, streams::kLinkNegatives);
  return int64_t(rng.below(uint64_t(key), uint64_t(pair * negatives + d), uint64_t(num_nodes)));
}

std::vector<double> score_node_pairs(const LossInput& in, const NodePairs& pairs, MlpLinkDecoder* decoder) {
  const HostBlock block = host_block(in);
  return gathered_scores(in, gather_rows(in, block, endpoints(pairs)), pairs, decoder, false);
}

LinkLoss::LinkLoss(std::shared_ptr<const LinkTask> task, LinkLossOptions options)
    : task_(std::move(task)), options_(options) {
  require(task_ != nullptr, "LinkLoss: no task");
  require(options_.negatives >= 1, "`link-negatives` must be at least 1, not ", options_.negatives);
  require(options_.batch >= 0, "`link-batch` must not be negative, not ", options_.batch);
  bool shared = true, per_edge = true;
  for (const LinkEvaluationSplit* s : {&task_->valid, &task_->test})
    if (!s->empty()) shared &= s->shared_negatives.size() > 0, per_edge &= s->negatives_per_edge > 0;
  const MetricKind m = options_.metric;
  const char* name = name_of(kMetricKindNames, m);
  require(m == MetricKind::Auto || m == MetricKind::RocAuc || m == MetricKind::AveragePrecision ||
              is_link_metric(m),
          "`metric` ", name, " scores a node task; a link task is scored by rocauc, ap, hits@20, hits@50, ",
          "hits@100 or mrr");
  const bool hits = m == MetricKind::Hits20 || m == MetricKind::Hits50 || m == MetricKind::Hits100;
  require(!hits || shared, "`metric` ", name, " ranks each positive against a shared negative set (",
          "/link/SPLIT/negatives), which a split of this graph lacks");
  require(m != MetricKind::Mrr || per_edge, "`metric` mrr ranks each positive against its own negatives (",
          "/link/SPLIT/negative_targets), which a split of this graph lacks");
  metric_ = m != MetricKind::Auto ? m : per_edge ? MetricKind::Mrr : MetricKind::RocAuc;
}

void LinkLoss::set_decoder(std::shared_ptr<MlpLinkDecoder> decoder) {
  decoder_ = std::move(decoder);
}

std::vector<ParameterRef> LinkLoss::parameters() {
  return decoder_ ? decoder_->parameters() : std::vector<ParameterRef>{};
}

std::string LinkLoss::metric_name() const {
  switch (metric_) {
    case MetricKind::AveragePrecision:
      return "average_precision";
    case MetricKind::Hits20:
      return "hits@20";
    case MetricKind::Hits50:
      return "hits@50";
    case MetricKind::Hits100:
      return "hits@100";
    case MetricKind::Mrr:
      return "mrr";
    default:
      return "roc_auc";
  }
}

std::unique_ptr<Metric> LinkLoss::metric() const {
  throw Error("link_binary_cross_entropy scores node pairs (LinkLoss::score_splits), not node rows");
}

int64_t LinkLoss::steps_per_epoch() const {
  const int64_t pairs = task_->train.size();
  return options_.batch > 0 && pairs > options_.batch ? (pairs + options_.batch - 1) / options_.batch : 1;
}

std::vector<int64_t> LinkLoss::step_pairs(int64_t key) {
  const int64_t steps = steps_per_epoch(), epoch = key / steps, step = key % steps, n = task_->train.size();
  std::vector<int64_t> mine;
  if (steps == 1) {
    for (int64_t i = 0; i < n; ++i) mine.push_back(i);
    return mine;
  }
  if (order_epoch_ != epoch) {
    std::vector<int64_t> every(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) every[size_t(i)] = i;
    order_ = shuffled_pairs(options_.seed, epoch, every);
    order_epoch_ = epoch;
  }
  const int64_t first = step * options_.batch, last = std::min(n, first + options_.batch);
  return std::vector<int64_t>(order_.begin() + first, order_.begin() + last);
}

LossSum LinkLoss::sum_and_gradient(const LossInput& in, const Matrix<float>& grad) {
  if (in.pairs != nullptr) return row_pairs_loss(in, *in.pairs, grad, decoder_.get());
  const int64_t k = options_.negatives;
  const std::vector<int64_t> chosen = step_pairs(in.step_key);
  NodePairs pairs;
  for (int64_t i : chosen)
    pairs.source.push_back(task_->train.source[size_t(i)]),
        pairs.target.push_back(task_->train.target[size_t(i)]);
  const int64_t positives = pairs.size();
  for (size_t p = 0; p < chosen.size(); ++p)
    for (int64_t d = 0; d < k; ++d) {
      pairs.source.push_back(pairs.source[p]);
      pairs.target.push_back(
          link_negative_target(options_.seed, in.step_key, chosen[p], k, d, task_->num_nodes));
    }
  const HostBlock block = host_block(in);
  const GatheredRows g = gather_rows(in, block, endpoints(pairs));
  std::vector<double> d_scores;
  const double sum =
      bce_and_gradient(gathered_scores(in, g, pairs, decoder_.get(), true), positives, nullptr, d_scores);
  const ProductGradient d = product_gradient(decoder_.get(), std::move(d_scores), g.cols);
  // d(sum)/d(h) of every gathered row, this rank's columns.
  std::vector<double> d_rows(g.values.size(), 0.0);
  for (int64_t e = 0; e < pairs.size(); ++e) {
    const int64_t u = g.index(pairs.source[size_t(e)]), v = g.index(pairs.target[size_t(e)]);
    for (int64_t j = 0; j < g.cols; ++j) {
      d_rows[size_t(u * g.cols + j)] += d.at(e, j) * double(g.values[size_t(v * g.cols + j)]);
      d_rows[size_t(v * g.cols + j)] += d.at(e, j) * double(g.values[size_t(u * g.cols + j)]);
    }
  }
  const auto host_grad = Kokkos::create_mirror_view(HostSpace(), grad);
  Kokkos::deep_copy(host_grad, 0.0f);
  for (int64_t i = 0; i < int64_t(block.nodes.extent(0)); ++i) {
    const int64_t v = block.nodes(i);
    if (v < 0 || !std::binary_search(g.nodes.begin(), g.nodes.end(), v)) continue;
    const int64_t r = g.index(v);
    for (int64_t j = 0; j < g.cols; ++j) host_grad(i, j) = float(d_rows[size_t(r * g.cols + j)]);
  }
  Kokkos::deep_copy(grad, host_grad);
  // Every rank scored every pair: the sum and count are already the grid's.
  return {sum, pairs.size()};
}

namespace {

// One split's pairs inside the evaluation's list: positives, shared negatives, per-positive negatives.
struct SplitRange {
  int64_t positives = 0, shared = 0, per_edge = 0, per_edge_columns = 0;
  int64_t first = 0;  // of the positives; the others follow in that order
};

SplitRange add_split(NodePairs& all, const NodePairs& positives, const NodePairs& shared,
                     const std::vector<int64_t>& targets, int64_t columns) {
  SplitRange r{positives.size(), shared.size(), int64_t(targets.size()), columns, all.size()};
  append(all, positives);
  append(all, shared);
  for (size_t i = 0; i < targets.size(); ++i)
    all.source.push_back(positives.source[i / size_t(columns)]), all.target.push_back(targets[i]);
  return r;
}

std::vector<float> slice(const std::vector<double>& s, int64_t first, int64_t count) {
  return std::vector<float>(s.begin() + first, s.begin() + first + count);
}

// A split's score in `metric` from every pair's score.
double split_score(MetricKind metric, const std::vector<double>& s, const SplitRange& r) {
  if (r.positives == 0) return 0.0;
  const std::vector<float> pos = slice(s, r.first, r.positives);
  const std::vector<float> shared = slice(s, r.first + r.positives, r.shared);
  const std::vector<float> own = slice(s, r.first + r.positives + r.shared, r.per_edge);
  switch (metric) {
    case MetricKind::Hits20:
      return hits_at_k(pos, shared, 20);
    case MetricKind::Hits50:
      return hits_at_k(pos, shared, 50);
    case MetricKind::Hits100:
      return hits_at_k(pos, shared, 100);
    case MetricKind::Mrr:
      return mean_reciprocal_rank(pos, own, r.per_edge_columns);
    default:
      break;
  }
  std::vector<float> all = pos;
  all.insert(all.end(), shared.begin(), shared.end());
  all.insert(all.end(), own.begin(), own.end());
  std::vector<uint8_t> positive(all.size(), 0);
  std::fill_n(positive.begin(), pos.size(), uint8_t(1));
  return metric == MetricKind::AveragePrecision ? average_precision(all, positive) : roc_auc(all, positive);
}

// The loss's mean over a split's positives and negatives.
double split_loss(const std::vector<double>& s, const SplitRange& r) {
  const int64_t count = r.positives + r.shared + r.per_edge;
  double sum = 0;
  for (int64_t e = 0; e < count; ++e) sum += binary_cross_entropy(s[size_t(r.first + e)], e < r.positives);
  return count > 0 ? sum / double(count) : 0.0;
}

}  // namespace

std::optional<SplitScores> LinkLoss::score_splits(const LossInput& in) {
  const LinkEvaluationSplit& reference = task_->valid.empty() ? task_->test : task_->valid;
  // The training pairs scored: evenly spaced, as many as the reference split's positives.
  NodePairs train;
  const int64_t size = std::min(task_->train.size(), reference.positives.size());
  for (int64_t i = 0; i < size; ++i) {
    const size_t at = size_t(i * task_->train.size() / std::max<int64_t>(size, 1));
    train.source.push_back(task_->train.source[at]), train.target.push_back(task_->train.target[at]);
  }
  std::vector<int64_t> train_targets;
  const int64_t columns = reference.negatives_per_edge;
  if (metric_ == MetricKind::Mrr) {  // each its own targets, drawn once
    const CounterRng rng(options_.seed, streams::kLinkScoreNegatives);
    for (int64_t i = 0; i < size * columns; ++i)
      train_targets.push_back(int64_t(rng.below(uint64_t(i), 0, uint64_t(task_->num_nodes))));
  }
  NodePairs all;
  SplitRange t;
  if (metric_ == MetricKind::Mrr) {
    t = add_split(all, train, {}, train_targets, columns);
  } else {  // against the reference split's negatives, as OGB scores training edges; ROC-AUC and AP pool
            // its per-pair negatives too
    NodePairs negatives = reference.shared_negatives;
    const bool pooled = metric_ == MetricKind::RocAuc || metric_ == MetricKind::AveragePrecision;
    for (size_t i = 0; pooled && i < reference.negative_targets.size(); ++i)
      negatives.source.push_back(reference.positives.source[i / size_t(columns)]),
          negatives.target.push_back(reference.negative_targets[i]);
    t = add_split(all, train, negatives, {}, 0);
  }
  const LinkEvaluationSplit& v = task_->valid;
  const LinkEvaluationSplit& x = task_->test;
  const SplitRange valid =
      add_split(all, v.positives, v.shared_negatives, v.negative_targets, v.negatives_per_edge);
  const SplitRange test =
      add_split(all, x.positives, x.shared_negatives, x.negative_targets, x.negatives_per_edge);
  const HostBlock block = host_block(in);
  const std::vector<double> s =
      gathered_scores(in, gather_rows(in, block, endpoints(all)), all, decoder_.get(), false);
  return SplitScores{split_score(metric_, s, t), split_score(metric_, s, valid),
                     split_score(metric_, s, test), split_loss(s, valid), metric_name()};
}

}  // namespace tessera
