// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/graph/partition.hpp"

#include "symmetric_csr.hpp"

#include <metis.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <limits>
#include <numeric>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/random.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera {


namespace {

struct GraphToPartition {
  std::vector<int64_t> indptr, indices;
  std::vector<uint8_t> train;  // per node
  bool has_train = false;
};

GraphToPartition read_whole(const std::string& path) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  const GraphFileReader reader(self, path);
  const int64_t n = reader.meta().num_nodes;
  GraphToPartition g;
  g.indptr = reader.read_indptr(0, n + 1);
  g.indices = reader.read_indices(0, g.indptr.back());
  g.train.assign(size_t(n), 0);
  for (const SplitInfo& s : reader.splits())
    if (s.name == "train") {
      g.has_train = s.size > 0;
      for (int64_t v : reader.read_split("train", 0, s.size)) g.train[size_t(v)] = 1;
    }
  return g;
}

// Undirected adjacency without self loops or duplicates, in METIS's 32-bit CSR.
void symmetrize(const GraphToPartition& g, const std::string& path, std::vector<idx_t>& xadj,
                std::vector<idx_t>& adjncy) {
  const int64_t limit = int64_t(std::numeric_limits<idx_t>::max()) - 1;
  const int64_t n = int64_t(g.indptr.size()) - 1;
  const int64_t total = impl::symmetric_csr(g.indptr, g.indices, n <= limit ? limit : -1, xadj, adjncy);
  require(total <= limit && n <= limit, path, ": ", total,
          " symmetric edges are too many for this METIS build (32-bit indices); use `method` random");
}

std::vector<int32_t> metis_parts(const GraphToPartition& g, const std::string& path, int64_t parts) {
  std::vector<idx_t> xadj, adjncy;
  symmetrize(g, path, xadj, adjncy);
  // Constraints: nodes, training nodes (when there is a split) and stored in-edges, the neighbour lists a
  // part's rank holds: balancing nodes alone gave one of 8 parts of a 2^21-node R-MAT graph 1.5x the
  // sampled mode's peak memory of the others (its hubs' edges), at a cut of 70.1% against 77.9% with edges.
  idx_t n = idx_t(xadj.size() - 1), ncon = g.has_train ? 3 : 2, nparts = idx_t(parts), objval = 0;
  std::vector<idx_t> vwgt(size_t(n) * size_t(ncon), 1);
  for (idx_t v = 0; v < n; ++v) {
    idx_t* w = &vwgt[size_t(v) * size_t(ncon)];
    if (g.has_train) w[1] = g.train[size_t(v)];
    w[ncon - 1] = idx_t(1 + g.indptr[size_t(v) + 1] - g.indptr[size_t(v)]);
  }
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = 1;  // the same file gives the same partition
  std::vector<real_t> ubvec(size_t(ncon), real_t(1.05));
  std::vector<idx_t> part(size_t(n), 0);
  const int status = METIS_PartGraphKway(&n, &ncon, xadj.data(), adjncy.data(), vwgt.data(), nullptr, nullptr,
                                         &nparts, nullptr, ubvec.data(), options, &objval, part.data());
  require(status == METIS_OK, path, ": METIS_PartGraphKway failed (status ", status, ")");
  return std::vector<int32_t>(part.begin(), part.end());
}

std::vector<int32_t> random_parts(int64_t n, int64_t parts, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<uint64_t> key(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) key[size_t(v)] = splitmix64(seed ^ splitmix64(uint64_t(v)));
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return key[size_t(a)] != key[size_t(b)] ? key[size_t(a)] < key[size_t(b)] : a < b;
  });
  std::vector<int32_t> part(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) part[size_t(order[size_t(i)])] = int32_t(i * parts / n);
  return part;
}

}  // namespace

std::vector<int32_t> compute_partition(const std::string& path, int64_t parts, PartitionMethod method,
                                       uint64_t seed) {
  const GraphToPartition g = read_whole(path);
  const int64_t n = int64_t(g.indptr.size()) - 1;
  require(parts >= 1, path, ": `parts` must be at least 1, not ", parts);
  require(parts <= n, path, ": `parts` ", parts, " is more than the graph's ", n, " nodes");
  if (parts == 1) return std::vector<int32_t>(size_t(n), 0);
  return method == PartitionMethod::Metis ? metis_parts(g, path, parts) : random_parts(n, parts, seed);
}

PartitionReport evaluate_partition(const std::string& path, const std::vector<int32_t>& part, int64_t parts) {
  const GraphToPartition g = read_whole(path);
  PartitionReport r;
  r.parts = parts;
  r.edges = int64_t(g.indices.size());
  std::vector<int64_t> nodes(size_t(parts), 0), train(size_t(parts), 0), edges(size_t(parts), 0);
  int64_t train_total = 0;
  for (size_t v = 0; v + 1 < g.indptr.size(); ++v) {
    ++nodes[size_t(part[v])];
    edges[size_t(part[v])] += g.indptr[v + 1] - g.indptr[v];
    train[size_t(part[v])] += g.train[v];
    train_total += g.train[v];
    for (int64_t k = g.indptr[v]; k < g.indptr[v + 1]; ++k)
      r.cut_edges += part[size_t(g.indices[size_t(k)])] != part[v];
  }
  const double n = double(g.indptr.size() - 1);
  r.node_balance = double(*std::max_element(nodes.begin(), nodes.end())) * double(parts) / n;
  r.edge_balance =
      r.edges > 0 ? double(*std::max_element(edges.begin(), edges.end())) * double(parts) / double(r.edges)
                  : 0.0;
  r.train_balance = train_total > 0 ? double(*std::max_element(train.begin(), train.end())) * double(parts) /
                                          double(train_total)
                                    : 0.0;
  return r;
}

void write_partition(const std::string& path, const std::string& name, const std::vector<int32_t>& part,
                     int64_t parts, PartitionMethod method, const PartitionReport& report) {
  require(!name.empty() && name.find('/') == std::string::npos && name[0] != '.', path, ": partition name '",
          name, "' must be non-empty, without '/' and not start with '.'");
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  prepare_hdf5();
  const H5Handle file = h5_open_file(self, path, true);
  const std::string final_name = "/partition/" + name, temp_name = "/partition/.incomplete-" + name;
  if (h5_exists(file.get(), temp_name)) H5Ldelete(file.get(), temp_name.c_str(), H5P_DEFAULT);
  {
    const H5Handle data =
        h5_create_dataset(file.get(), temp_name, H5T_STD_I32LE, {int64_t(part.size())}, 0, false);
    h5_write_rows(data.get(), H5T_NATIVE_INT32, 0, int64_t(part.size()), part.data());
    h5_write_attr(data.get(), "parts", parts);
    h5_write_attr(data.get(), "method", std::string(partition_method_name(method)));
    h5_write_attr(data.get(), "cut_edges", report.cut_edges);
    h5_write_attr(data.get(), "node_balance", report.node_balance);
    h5_write_attr(data.get(), "train_balance", report.train_balance);
    h5_write_attr(data.get(), "edge_balance", report.edge_balance);
  }
  if (h5_exists(file.get(), final_name))
    require(H5Ldelete(file.get(), final_name.c_str(), H5P_DEFAULT) >= 0, path, ": cannot replace ",
            final_name);
  require(
      H5Lmove(file.get(), temp_name.c_str(), file.get(), final_name.c_str(), H5P_DEFAULT, H5P_DEFAULT) >= 0,
      path, ": cannot rename ", temp_name, " to ", final_name);
}

namespace {

constexpr const char* kPartitionFormat = "tessera-partition";

bool is_partition_file(const std::string& path) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  prepare_hdf5();
  const H5Handle file = h5_open_file(self, path, false);
  std::string format;
  return file.valid() && h5_read_attr(file.get(), "format", format) && format == kPartitionFormat;
}

}  // namespace

void create_partition_file(const std::string& path, const std::string& graph_path, int64_t num_nodes,
                           const std::string& graph_fingerprint) {
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  prepare_hdf5();
  const H5Handle file = h5_create_file(self, path);
  h5_write_attr(file.get(), "format", std::string(kPartitionFormat));
  h5_write_attr(file.get(), "graph", graph_path);
  h5_write_attr(file.get(), "num_nodes", num_nodes);
  h5_write_attr(file.get(), "graph_fingerprint", graph_fingerprint);
}

void check_partition_file(const Communicator& comm, const std::string& path, int64_t num_nodes,
                          const std::string& graph_fingerprint) {
  comm.run_on(0, [&] {
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    prepare_hdf5();
    require(access(path.c_str(), R_OK) == 0, path, ": `partition-file` cannot be read (",
            std::strerror(errno), ")");
    const H5Handle file = h5_open_file(self, path, false);
    std::string format, fingerprint, graph;
    int64_t nodes = 0;
    require(file.valid() && h5_read_attr(file.get(), "format", format) && format == kPartitionFormat, path,
            ": not a partition file (make one with tessera partition --output)");
    require(h5_read_attr(file.get(), "num_nodes", nodes) &&
                h5_read_attr(file.get(), "graph_fingerprint", fingerprint),
            path, ": partition file attributes are missing (corrupt file?)");
    h5_read_attr(file.get(), "graph", graph);
    require(nodes == num_nodes && fingerprint == graph_fingerprint, path, ": made for another graph (", graph,
            ", ", nodes, " nodes, fingerprint ", fingerprint, "), not this one (", num_nodes,
            " nodes, fingerprint ", graph_fingerprint, ")");
  });
}

std::string default_partition(const Communicator& comm, const std::string& path,
                              const std::string& partition_file) {
  if (comm.size() == 1) return "block";
  const std::string metis = "metis-" + std::to_string(comm.size());
  const std::string& source = partition_file.empty() ? path : partition_file;
  int has = 0;
  comm.run_on(0, [&] {
    prepare_hdf5();
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    const H5Handle file = h5_open_file(self, source, false);
    has = h5_exists(file.get(), "/partition") && h5_exists(file.get(), "/partition/" + metis);
  });
  broadcast(comm, &has, 1, 0, "default_partition");
  if (has) return metis;
  // A partition file names what it holds; read_partition refuses it with the command that makes metis-P.
  if (!partition_file.empty()) return metis;
  log_line("no partition " + metis + " in " + path + ": using block (contiguous ranges of nodes); for fewer "
           "edges between ranks make it with: tessera partition --data " + path + " --parts " +
           std::to_string(comm.size()));
  return "block";
}

std::vector<int32_t> read_partition(const Communicator& comm, const std::string& path,
                                    const std::string& name, int64_t expected_parts, int64_t first,
                                    int64_t count) {
  std::vector<int32_t> part;
  std::string error;
  try {
    const Communicator self(MPI_COMM_SELF, false, nullptr);
    prepare_hdf5();
    int64_t n = 0;
    const bool own_file = is_partition_file(path);
    if (!own_file) {
      const GraphFileReader reader(self, path);
      n = reader.meta().num_nodes;
    }
    const H5Handle file = h5_open_file(self, path, false);
    if (n == 0) require(h5_read_attr(file.get(), "num_nodes", n), path, ": no 'num_nodes' attribute");
    const std::string dataset = "/partition/" + name;
    // The command that makes it: into the graph file, or (a partition file) from the graph it was made for.
    std::string graph = path, output;
    if (own_file && h5_read_attr(file.get(), "graph", graph)) output = " --output " + path;
    require(h5_exists(file.get(), "/partition") && h5_exists(file.get(), dataset), path, ": no partition '",
            name, "' (make it with: tessera partition --data ", graph, " --parts ", expected_parts, " --name ",
            name, output, ")");
    const H5Handle data = h5_open_dataset(file.get(), path, dataset);
    const std::vector<int64_t> shape = h5_shape(data.get());
    require(shape.size() == 1 && shape[0] == n, path, ": ", dataset, " has ", shape.empty() ? 0 : shape[0],
            " entries, the graph ", n, " nodes");
    int64_t parts = 0;
    require(h5_read_attr(data.get(), "parts", parts), path, ": ", dataset, " has no 'parts' attribute");
    require(parts == expected_parts, path, ": partition '", name, "' has ", parts,
            " parts but the job runs on ", expected_parts, " ranks (one part per rank)");
    if (count < 0) count = n - first;
    require(first >= 0 && first + count <= n, "read_partition: nodes [", first, ", ", first + count,
            ") outside [0, ", n, ")");
    part.resize(size_t(count));
    h5_read_rows(data.get(), H5T_NATIVE_INT32, first, count, part.data());
    for (int64_t v = 0; v < count; ++v)
      require(part[size_t(v)] >= 0 && part[size_t(v)] < parts, path, ": ", dataset, "[", first + v,
              "] = ", part[size_t(v)], " is not a part id in [0, ", parts, ")");
  } catch (const std::exception& e) {
    error = e.what();
  }
  comm.check(error.empty(), error);
  return part;
}

Renumbering renumber_by_part(const std::vector<int32_t>& part, int64_t parts) {
  Renumbering r;
  r.begin.assign(size_t(parts + 1), 0);
  for (int32_t p : part) ++r.begin[size_t(p + 1)];
  for (int64_t p = 0; p < parts; ++p) r.begin[size_t(p + 1)] += r.begin[size_t(p)];
  std::vector<int64_t> at(r.begin.begin(), r.begin.end() - 1);
  r.new_of_old.resize(part.size());
  for (size_t v = 0; v < part.size(); ++v) r.new_of_old[v] = at[size_t(part[v])]++;
  return r;
}

}  // namespace tessera
