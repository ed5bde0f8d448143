// SPDX-License-Identifier: BSD-3-Clause
// An application that builds its graph in memory: it reads OGB's raw Cora files with its own code (zlib),
// keeps the rows (destination nodes) of its rank's block, adds the reverse of every edge, and hands the rows
// to build_graph_3d. It trains GraphSAGE from library layers on a 1x2x2 grid (4 ranks; 1x1x1 on one rank)
// with a hook of its own that reports every 50 epochs.
//   mpiexec -n 4 in_memory_graph <cora>     (OGB layout: raw/*.csv.gz, split/public/*.csv.gz)
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <tessera/tessera.hpp>

namespace {

using namespace tessera;

// Every line of a gzip file.
std::vector<std::string> lines_of(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  require(f != nullptr, path, ": cannot open");
  std::vector<std::string> out;
  std::string line;
  char buffer[1 << 16];
  while (gzgets(f, buffer, sizeof(buffer))) {
    line += buffer;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      out.push_back(line);
      line.clear();
    }
  }
  if (!line.empty()) out.push_back(line);
  gzclose(f);
  return out;
}

// This rank's block of Cora's rows: an even split of the nodes in rank order.
GraphRows read_cora(const std::string& dir, const Communicator& world) {
  GraphRows rows;
  rows.name = dir;
  rows.num_nodes = std::stoll(lines_of(dir + "/raw/num-node-list.csv.gz").at(0));
  const int64_t n = rows.num_nodes, p = world.size(), r = world.rank();
  const int64_t begin = n * r / p, end = n * (r + 1) / p;
  rows.first_row = begin;
  std::vector<std::set<int64_t>> in(size_t(end - begin));
  for (const std::string& line : lines_of(dir + "/raw/edge.csv.gz")) {
    const int64_t u = std::stoll(line), v = std::stoll(line.substr(line.find(',') + 1));
    if (v >= begin && v < end) in[size_t(v - begin)].insert(u);  // u -> v
    if (u >= begin && u < end) in[size_t(u - begin)].insert(v);  // and its reverse
  }
  for (const std::set<int64_t>& sources : in) {
    rows.indices.insert(rows.indices.end(), sources.begin(), sources.end());
    rows.indptr.push_back(int64_t(rows.indices.size()));
  }
  const std::vector<std::string> features = lines_of(dir + "/raw/node-feat.csv.gz");
  for (int64_t v = begin; v < end; ++v) {
    std::istringstream values(features[size_t(v)]);
    int64_t width = 0;
    for (std::string x; std::getline(values, x, ',');)
      rows.features.push_back(std::strtof(x.c_str(), nullptr)), ++width;
    rows.num_features = width;
  }
  const std::vector<std::string> labels = lines_of(dir + "/raw/node-label.csv.gz");
  for (const std::string& y : labels)
    rows.num_classes = std::max<int64_t>(rows.num_classes, std::stoll(y) + 1);
  for (int64_t v = begin; v < end; ++v) rows.labels.push_back(std::stoll(labels[size_t(v)]));
  // Bit k of a row's splits: the node is in split rows.split_names[k] ("train", "valid", "test"), each a
  // node mask of that name on the graph.
  rows.splits.assign(size_t(end - begin), 0);
  for (size_t k = 0; k < rows.split_names.size(); ++k)
    for (const std::string& id : lines_of(dir + "/split/public/" + rows.split_names[k] + ".csv.gz")) {
      const int64_t v = std::stoll(id);
      if (v >= begin && v < end) rows.splits[size_t(v - begin)] |= uint8_t(1u << k);
    }
  // Ranks with no rows still report the graph's width.
  rows.num_features = all_reduce_value(world, rows.num_features, ReduceOp::Max, "app");
  return rows;
}

// The application's own hook: a line every 50 epochs from rank 0.
class EveryFifty : public TrainerHook {
 public:
  bool on_epoch(Trainer& trainer, const EpochRecord& r) override {
    if (r.epoch % 50 == 0 && trainer.world().rank() == 0)
      std::printf("epoch %lld: loss %.4f, valid %.4f (best so far %.4f)\n", (long long)r.epoch, r.loss,
                  r.valid_acc, trainer.progress().best_valid);
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  return run_main(argc, argv, MPI_THREAD_FUNNELED, [](int argc, char** argv) {
    const Communicator world = Communicator::world();
    world.check(argc == 2, "usage: in_memory_graph CORA_DIR (OGB layout)");
    const ProcessGrid grid(world,
                           world.size() == 4 ? GridShape{1, 1, 2, 2} : GridShape{1, 1, 1, world.size()});
    Graph3DOptions load;
    load.normalization = Normalization::Mean;  // GraphSAGE's neighbour mean
    load.normalize_features = true;
    const Graph3D graph = build_graph_3d(read_cora(argv[1], world), grid, load);

    const uint64_t seed = 3;  // the run's one seed: weights, dropout, sampling
    Sequential model(grid, graph.num_features, RunOptions{}, seed);
    model.add<Dropout>(0.5f);
    ConvOptions hidden;
    hidden.relu = true;
    hidden.dropout = 0.5f;
    model.add<SageConv>(16, hidden);
    model.add<SageConv>(graph.num_classes);

    FullGraphSource source(graph, grid, world, model);  // refuses a graph SageConv cannot use
    TrainerOptions options;
    options.optimizer.weight_decay = 5e-4f;
    options.epochs = 200;
    Trainer trainer(model, source, world, options);
    trainer.emplace_hook<EveryFifty>();
    const TrainResult r = trainer.run();
    if (world.rank() == 0)
      std::printf("in_memory_graph on grid %s: best valid %.4f at epoch %lld, test accuracy %.4f\n",
                  grid.shape().str().c_str(), r.best_valid, (long long)r.best_epoch, r.test_at_best);
    return 0;
  });
}
