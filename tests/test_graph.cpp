// SPDX-License-Identifier: BSD-3-Clause
// Graph files, generators and the OGB converter. Runs under mpiexec with 1, 2, 4 and 8 ranks; every
// check compares against data built here, independently of the rank count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "tessera/comm/collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/random.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/ogb.hpp"
#include "tessera/graph/synth.hpp"

using namespace tessera;

namespace {

// A scratch directory that every rank agrees on.
std::string shared_scratch_dir() {
  static std::string dir;
  if (!dir.empty()) return dir;
  const Communicator world = Communicator::world();
  char path[256] = {};
  if (world.rank() == 0) {
    std::snprintf(path, sizeof(path), "/tmp/tessera-test-XXXXXX");
    if (!mkdtemp(path)) path[0] = '\0';
  }
  MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
  dir = path;
  return dir;
}

struct ReferenceGraph {
  GraphMeta meta;
  std::vector<int64_t> indptr, indices, labels;
  std::vector<float> features;
  std::map<std::string, std::vector<int64_t>> splits;
};

// Random CSR with empty rows, one dense row, unlabeled nodes and uneven splits.
ReferenceGraph make_reference(int64_t n, int64_t f) {
  std::mt19937_64 gen(1234);
  ReferenceGraph g;
  g.meta = GraphMeta{"ref", "unit test", n, 0, f, 5, false};
  g.indptr.push_back(0);
  for (int64_t v = 0; v < n; ++v) {
    const int64_t degree = v == 3 ? n : (v % 4 == 1 ? 0 : int64_t(gen() % 6));
    for (int64_t k = 0; k < degree; ++k) g.indices.push_back(v == 3 ? k : int64_t(gen() % uint64_t(n)));
    g.indptr.push_back(int64_t(g.indices.size()));
    g.labels.push_back(v % 7 == 0 ? -1 : int64_t(gen() % 5));
    for (int64_t j = 0; j < f; ++j) g.features.push_back(float(int64_t(gen() % 2001) - 1000) / 64.0f);
    g.splits[v % 3 == 0 ? "train" : v % 3 == 1 ? "valid" : "test"].push_back(v);
  }
  g.meta.num_edges = int64_t(g.indices.size());
  return g;
}

std::map<std::string, int64_t> split_sizes(const ReferenceGraph& g) {
  std::map<std::string, int64_t> sizes;
  for (const auto& [name, ids] : g.splits) sizes[name] = int64_t(ids.size());
  return sizes;
}

// Every rank writes its block of rows and of each split, then commits.
void write_rows(const ReferenceGraph& g, GraphFileWriter& writer, const Communicator& comm) {
  const auto [b, e] = block_range(g.meta.num_nodes, comm.rank(), comm.size());
  const bool last = e == g.meta.num_nodes;
  writer.write_indptr(b, e - b + (last ? 1 : 0), &g.indptr[size_t(b)]);
  const auto [eb, ee] = block_range(g.meta.num_edges, comm.rank(), comm.size());
  writer.write_indices(eb, ee - eb, g.indices.data() + eb);
  writer.write_features(b, e - b, &g.features[size_t(b * g.meta.num_features)]);
  writer.write_labels(b, e - b, &g.labels[size_t(b)]);
  for (const auto& [name, ids] : g.splits) {
    const auto [sb, se] = block_range(int64_t(ids.size()), comm.rank(), comm.size());
    writer.write_split(name, sb, se - sb, ids.data() + sb);
  }
  writer.commit();
}

void write_distributed(const ReferenceGraph& g, const std::string& path, const Communicator& comm) {
  GraphFileWriter writer(comm, path, g.meta, split_sizes(g));
  write_rows(g, writer, comm);
}

bool file_exists(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

// Runs fn and returns the CollectiveError message (every rank must throw one).
template <class Fn>
std::string collective_error(Fn&& fn) {
  try {
    fn();
  } catch (const CollectiveError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a CollectiveError: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace

TEST(BlockRange, CoversEveryRowOnce) {
  for (int64_t n : {0, 1, 7, 37, 1000})
    for (int p : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int r = 0; r < p; ++r) {
        const auto [b, e] = block_range(n, r, p);
        EXPECT_EQ(b, next);
        EXPECT_LE(e - b, n / p + 1);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
}

TEST(GraphFile, RoundTripIsIdenticalOnAnyRankCount) {
  const Communicator world = Communicator::world();
  const ReferenceGraph g = make_reference(37, 5);
  const std::string path = shared_scratch_dir() + "/roundtrip.h5";
  write_distributed(g, path, world);
  ASSERT_TRUE(file_exists(path));
  ASSERT_FALSE(file_exists(path + ".tmp-0"));

  const GraphFileReader reader(world, path);
  EXPECT_EQ(reader.meta().num_nodes, 37);
  EXPECT_EQ(reader.meta().num_edges, g.meta.num_edges);
  EXPECT_EQ(reader.meta().num_features, 5);
  EXPECT_EQ(reader.meta().num_classes, 5);
  EXPECT_EQ(reader.meta().name, "ref");
  // Each rank reads its own block; gathering the blocks gives back the whole graph exactly.
  const auto [b, e] = block_range(37, world.rank(), world.size());
  const GraphSlice slice = reader.read_rows(b, e - b);
  for (int64_t i = 0; i < e - b; ++i) {
    const int64_t v = b + i;
    ASSERT_EQ(slice.adjacency.row_ptr(i + 1) - slice.adjacency.row_ptr(i),
              g.indptr[size_t(v + 1)] - g.indptr[size_t(v)]);
    for (int64_t k = 0; k < g.indptr[size_t(v + 1)] - g.indptr[size_t(v)]; ++k)
      EXPECT_EQ(slice.adjacency.col_idx(slice.adjacency.row_ptr(i) + k),
                g.indices[size_t(g.indptr[size_t(v)] + k)]);
    EXPECT_EQ(slice.labels(i), g.labels[size_t(v)]);
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(slice.features(i, j), g.features[size_t(v * 5 + j)]);
  }
  std::vector<int64_t> counts = {e - b}, all_counts(size_t(world.size()));
  all_gather(world, counts.data(), 1, all_counts.data(), "test");
  int64_t total = 0;
  for (int64_t c : all_counts) total += c;
  EXPECT_EQ(total, 37);
  // And the whole file, read by every rank at once.
  EXPECT_EQ(reader.read_indices(0, g.meta.num_edges), g.indices);
  EXPECT_EQ(reader.read_indptr(0, 38), g.indptr);
  for (const auto& [name, ids] : g.splits) EXPECT_EQ(reader.read_split(name, 0, int64_t(ids.size())), ids);
  const GraphSummary s = validate_graph(reader, world);
  EXPECT_EQ(s.max_degree, 37);
  EXPECT_EQ(s.min_degree, 0);
  EXPECT_EQ(s.labeled_nodes, 37 - 6);
}

// A writer, like a reader, keeps a view of the communicator it was given, so one built from a temporary
// works (it held a reference once: a dangling one here, which AddressSanitizer reports).
TEST(GraphFile, WriterAndReaderFromTemporaryCommunicators) {
  const ReferenceGraph g = make_reference(11, 3);
  const std::string path = shared_scratch_dir() + "/temporary-communicator.h5";
  GraphFileWriter writer(Communicator::world(), path, g.meta, split_sizes(g));
  write_rows(g, writer, Communicator::world());
  const GraphFileReader reader(Communicator::world(), path);
  EXPECT_EQ(reader.read_indices(0, g.meta.num_edges), g.indices);
  EXPECT_EQ(validate_graph(reader, Communicator::world()).labeled_nodes, g.meta.num_nodes - 2);
}

TEST(GraphFile, UncommittedWriterLeavesNoFile) {
  const Communicator world = Communicator::world();
  const ReferenceGraph g = make_reference(9, 2);
  const std::string path = shared_scratch_dir() + "/abandoned.h5";
  { GraphFileWriter writer(world, path, g.meta, {}); }
  world.barrier();
  EXPECT_FALSE(file_exists(path));
  EXPECT_EQ(collective_error([&] { GraphFileWriter w(world, "/nonexistent-dir/x.h5", g.meta, {}); }),
            "/nonexistent-dir/x.h5: cannot write the graph file (No such file or directory)");
}

TEST(GraphFile, SchemaViolationsAreCollectiveErrorsNamingTheDataset) {
  const Communicator world = Communicator::world();
  const std::string dir = shared_scratch_dir();
  const ReferenceGraph g = make_reference(12, 3);
  const std::string good = dir + "/schema.h5";
  write_distributed(g, good, world);
  EXPECT_EQ(collective_error([&] { GraphFileReader r(world, dir + "/missing.h5"); }),
            dir + "/missing.h5: cannot read (No such file or directory)");
  const std::string text = dir + "/text.h5";
  if (world.rank() == 0) {
    std::FILE* f = std::fopen(text.c_str(), "w");
    std::fputs("not hdf5 at all\n", f);
    std::fclose(f);
  }
  world.barrier();
  EXPECT_EQ(collective_error([&] { GraphFileReader r(world, text); }), text + ": not an HDF5 file");

  // Tamper through the HDF5 API on rank 0, then read on all ranks.
  auto tampered = [&](const std::string& name, const std::function<void(hid_t)>& damage) {
    const std::string path = dir + "/" + name + ".h5";
    write_distributed(g, path, world);
    if (world.rank() == 0) {
      hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      damage(file);
      H5Fclose(file);
    }
    world.barrier();
    return path;
  };
  const std::string v4 = tampered("version4", [](hid_t f) {
    const int64_t version = 4;
    hid_t a = H5Aopen(f, "version", H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &version);
    H5Aclose(a);
  });
  EXPECT_EQ(collective_error([&] { GraphFileReader r(world, v4); }),
            v4 + ": schema version 4, this Tessera reads versions 1 to 3");
  const std::string shape = tampered("shape", [](hid_t f) {
    H5Ldelete(f, "/node/labels", H5P_DEFAULT);
    hsize_t dims[1] = {5};
    hid_t s = H5Screate_simple(1, dims, nullptr);
    H5Dclose(H5Dcreate2(f, "/node/labels", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(s);
  });
  EXPECT_EQ(collective_error([&] { GraphFileReader r(world, shape); }),
            shape + ": dataset /node/labels has shape [5], expected [12]");
  const std::string dropped =
      tampered("dropped", [](hid_t f) { H5Ldelete(f, "/graph/indices", H5P_DEFAULT); });
  EXPECT_EQ(collective_error([&] { GraphFileReader r(world, dropped); }),
            dropped + ": dataset /graph/indices is missing");

  // Values: caught by the deep validation, wherever the bad row lives.
  const std::string label = tampered("label", [](hid_t f) {
    hid_t d = H5Dopen2(f, "/node/labels", H5P_DEFAULT);
    std::vector<int64_t> y(12, 1);
    y[10] = 9;
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, y.data());
    H5Dclose(d);
  });
  EXPECT_EQ(collective_error([&] { validate_graph(GraphFileReader(world, label), world); }),
            label + ": dataset /node/labels: row 10 has label 9, outside [-1, 5)");
  const std::string nan = tampered("nan", [](hid_t f) {
    hid_t d = H5Dopen2(f, "/node/features", H5P_DEFAULT);
    std::vector<float> x(36, 0.0f);
    x[3 * 7 + 2] = std::nanf("");
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data());
    H5Dclose(d);
  });
  EXPECT_EQ(collective_error([&] { validate_graph(GraphFileReader(world, nan), world); }),
            nan + ": dataset /node/features: row 7, column 2 is nan");
}

namespace {
// Independent serial construction of a synthetic graph's CSR from its edge function.
std::vector<std::set<int64_t>> reference_adjacency(const SynthOptions& o) {
  std::vector<std::set<int64_t>> in(static_cast<size_t>(o.num_nodes));
  for (int64_t e = 0; e < o.num_edges; ++e) {
    const auto [u, v] = synthetic_edge(o, e);
    EXPECT_GE(u, 0);
    EXPECT_LT(v, o.num_nodes);
    if (u == v) continue;
    in[size_t(v)].insert(u);
    in[size_t(u)].insert(v);
  }
  return in;
}
}  // namespace

TEST(Synthetic, GeneratedFileMatchesASerialReferenceOnAnyRankCount) {
  const Communicator world = Communicator::world();
  for (SynthKind kind : {SynthKind::Rmat, SynthKind::Csbm}) {
    SynthOptions o;
    o.kind = kind;
    o.num_nodes = 1000;  // not a power of two: R-MAT rejection path
    o.num_edges = 6000;
    o.num_features = 4;
    o.num_classes = 5;
    o.seed = 11;
    const std::string path = shared_scratch_dir() + (kind == SynthKind::Rmat ? "/rmat.h5" : "/csbm.h5");
    const GraphMeta meta = generate_synthetic(o, path, world);
    const auto in = reference_adjacency(o);
    int64_t edges = 0;
    for (const auto& row : in) edges += int64_t(row.size());
    EXPECT_EQ(meta.num_edges, edges);

    const GraphFileReader reader(world, path);
    const std::vector<int64_t> indptr = reader.read_indptr(0, o.num_nodes + 1);
    const std::vector<int64_t> indices = reader.read_indices(0, edges);
    const std::vector<int64_t> labels = reader.read_labels(0, o.num_nodes);
    const std::vector<float> x = reader.read_features(0, o.num_nodes);
    for (int64_t v = 0; v < o.num_nodes; ++v) {
      const std::vector<int64_t> row(indices.begin() + indptr[size_t(v)],
                                     indices.begin() + indptr[size_t(v + 1)]);
      ASSERT_EQ(row, std::vector<int64_t>(in[size_t(v)].begin(), in[size_t(v)].end())) << "row " << v;
      const int64_t degree = int64_t(row.size());
      const int64_t expected_label =
          kind == SynthKind::Rmat ? std::min<int64_t>(4, int64_t(std::ceil(std::log2(double(degree + 1)))))
                                  : v % 5;
      EXPECT_EQ(labels[size_t(v)], expected_label);
    }
    // R-MAT is skewed: the top node has far more edges than the mean.
    if (kind == SynthKind::Rmat) {
      int64_t max_degree = 0;
      for (const auto& row : in) max_degree = std::max<int64_t>(max_degree, int64_t(row.size()));
      EXPECT_GT(max_degree, 8 * edges / o.num_nodes);
    }
    // CSBM features carry the class: the class-mean projection separates classes.
    if (kind == SynthKind::Csbm) {
      int64_t same = 0, total = 0;
      for (int64_t v = 0; v < o.num_nodes; ++v)
        for (int64_t u : in[size_t(v)]) same += (u % 5) == (v % 5), ++total;
      EXPECT_GT(double(same) / double(total), 0.75);  // intra_class = 0.8 plus chance
    }
    // Splits partition the nodes.
    std::vector<int> seen(size_t(o.num_nodes), 0);
    for (const SplitInfo& s : reader.splits())
      for (int64_t id : reader.read_split(s.name, 0, s.size)) ++seen[size_t(id)];
    for (int count : seen) ASSERT_EQ(count, 1);
    EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); }));
  }
}

TEST(Synthetic, BadOptionsAreCollectiveErrors) {
  const Communicator world = Communicator::world();
  SynthOptions o;
  o.num_nodes = 1;
  EXPECT_EQ(collective_error([&] { generate_synthetic(o, shared_scratch_dir() + "/bad.h5", world); }),
            "synthetic graph: `nodes` must be at least 2");
  o.num_nodes = 10;
  o.rmat_a = 0.9;
  EXPECT_NE(
      collective_error([&] { generate_synthetic(o, shared_scratch_dir() + "/bad.h5", world); }).find("R-MAT"),
      std::string::npos);
}

namespace {

// Cora's source files, read with gzip(1): row sums of features and the edge list.
std::vector<std::vector<std::string>> read_gz_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::FILE* pipe = popen(("gzip -dc '" + path + "'").c_str(), "r");
  if (!pipe) return rows;
  std::string line;
  for (int c; (c = std::fgetc(pipe)) != EOF;) {
    if (c != '\n') {
      line += char(c);
      continue;
    }
    std::vector<std::string> fields(1);
    for (char ch : line) {
      if (ch == ',')
        fields.emplace_back();
      else
        fields.back().push_back(ch);
    }
    rows.push_back(fields);
    line.clear();
  }
  pclose(pipe);
  return rows;
}

GraphMeta convert_on_rank0(const OgbConvertOptions& options) {
  const Communicator world = Communicator::world();
  const Communicator self(MPI_COMM_SELF, false, nullptr);
  GraphMeta meta;
  world.run_on(0, [&] { meta = convert_ogb(options, self); });
  return meta;
}

}  // namespace

TEST(OgbConverter, CoraSymmetrized) {
  const std::string cora = TESSERA_SHARED_DIR "/datasets/cora";
  if (access((cora + "/raw/edge.csv.gz").c_str(), R_OK) != 0)
    GTEST_SKIP() << "skipped: " << cora
                 << " is absent (the shared data directory is not beside the checkout)";
  const Communicator world = Communicator::world();
  OgbConvertOptions options;
  options.dataset_dir = cora;
  options.output = shared_scratch_dir() + "/cora.h5";
  options.symmetrize = true;
  convert_on_rank0(options);
  const GraphFileReader reader(world, options.output);
  const GraphMeta& m = reader.meta();
  EXPECT_EQ(m.num_nodes, 2708);
  EXPECT_EQ(m.num_edges, 10556);
  EXPECT_EQ(m.num_features, 1433);
  EXPECT_EQ(m.num_classes, 7);
  EXPECT_TRUE(m.symmetric);
  std::map<std::string, int64_t> sizes;
  for (const SplitInfo& s : reader.splits()) sizes[s.name] = s.size;
  EXPECT_EQ(sizes, (std::map<std::string, int64_t>{{"train", 140}, {"valid", 500}, {"test", 1000}}));

  const std::vector<int64_t> indptr = reader.read_indptr(0, m.num_nodes + 1);
  const std::vector<int64_t> indices = reader.read_indices(0, m.num_edges);
  std::set<std::pair<int64_t, int64_t>> stored;
  for (int64_t v = 0; v < m.num_nodes; ++v)
    for (int64_t k = indptr[size_t(v)]; k < indptr[size_t(v + 1)]; ++k)
      stored.insert({indices[size_t(k)], v});
  EXPECT_EQ(int64_t(stored.size()), m.num_edges) << "duplicate edges";
  const auto edges = read_gz_csv(cora + "/raw/edge.csv.gz");
  ASSERT_EQ(edges.size(), 5278u);
  for (const auto& e : edges) {
    const int64_t u = std::stoll(e[0]), v = std::stoll(e[1]);
    EXPECT_TRUE(stored.count({u, v}) && stored.count({v, u})) << u << " - " << v;
  }
  const auto features = read_gz_csv(cora + "/raw/node-feat.csv.gz");
  ASSERT_EQ(features.size(), 2708u);
  const auto [b, e] = block_range(m.num_nodes, world.rank(), world.size());
  const std::vector<float> x = reader.read_features(b, e - b);
  for (int64_t v = b; v < e; ++v) {
    double expected = 0, got = 0;
    for (const std::string& field : features[size_t(v)]) expected += std::stod(field);
    for (int64_t j = 0; j < m.num_features; ++j) got += x[size_t((v - b) * m.num_features + j)];
    ASSERT_EQ(got, expected) << "row " << v;
  }
  validate_graph(reader, world);
}

TEST(OgbConverter, NpzLayoutGivesTheSameGraphAsCsv) {
  const Communicator world = Communicator::world();
  const std::string dir = shared_scratch_dir();
  world.run_on(0, [&] {
    for (const char* layout : {"csv", "npz"}) {
      const std::string cmd =
          std::string("python3 " TESSERA_SOURCE_DIR "/tests/fixtures/make_ogb_fixture.py ") + dir + "/fx_" +
          layout + " --layout " + layout;
      require(std::system(cmd.c_str()) == 0, "fixture generation failed: ", cmd);
    }
  });
  GraphMeta meta[2];
  std::vector<float> x[2];
  std::vector<int64_t> idx[2], ptr[2], y[2];
  for (int i = 0; i < 2; ++i) {
    OgbConvertOptions o;
    o.dataset_dir = dir + (i == 0 ? "/fx_csv" : "/fx_npz");
    o.output = dir + (i == 0 ? "/fx_csv.h5" : "/fx_npz.h5");
    o.symmetrize = true;
    o.edge_memory_bytes = 64;  // force many passes over the edges
    convert_on_rank0(o);
    const GraphFileReader r(world, o.output);
    meta[i] = r.meta();
    ptr[i] = r.read_indptr(0, meta[i].num_nodes + 1);
    idx[i] = r.read_indices(0, meta[i].num_edges);
    x[i] = r.read_features(0, meta[i].num_nodes);
    y[i] = r.read_labels(0, meta[i].num_nodes);
  }
  EXPECT_EQ(meta[0].num_nodes, 50);
  EXPECT_EQ(meta[0].num_edges, meta[1].num_edges);
  EXPECT_EQ(ptr[0], ptr[1]);
  EXPECT_EQ(idx[0], idx[1]);
  EXPECT_EQ(y[0], y[1]);
  ASSERT_EQ(x[0].size(), x[1].size());
  for (size_t k = 0; k < x[0].size(); ++k) EXPECT_NEAR(x[0][k], x[1][k], 2e-3) << k;  // npz stores float16
}
