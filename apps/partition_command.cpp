// SPDX-License-Identifier: BSD-3-Clause
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <memory>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/options.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/fingerprint.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/partition.hpp"

namespace tessera::app {

namespace {

struct Args {
  std::string data, method = "metis", name, output;
  int64_t parts = 0;
  uint64_t seed = 1;
};

// Rank 0: a partition file of its own, written under a temporary name beside its target (links followed),
// flushed and renamed (removed on failure).
void write_partition_file(const Args& a, const GraphIdentity& identity, const std::string& name,
                          const std::vector<int32_t>& part, PartitionMethod method,
                          const PartitionReport& report) {
  const std::string target = output_target(a.output), temp = temporary_beside(target, long(getpid()));
  try {
    create_partition_file(temp, a.data, identity.meta.num_nodes, identity.fingerprint);
    write_partition(temp, name, part, a.parts, method, report);
  } catch (...) {
    std::remove(temp.c_str());
    throw;
  }
  commit_output(temp, target, "partition file");
}

// Rank 0: without --output the partition goes into the graph file, which must then be writable: said
// before METIS runs, not after.
void require_graph_writable(const std::string& data) {
  const int fd = open(data.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    fail(data, ": cannot add the partition to --data (", std::strerror(errno),
         "); write it to a file of its own with --output FILE");
  close(fd);
}

}  // namespace

void add_partition_command(CLI::App& app, Command& selected) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "partition", "Partition a graph file for --mode sampled (one part per rank), stored in the file");
  cmd->add_option("--data", a->data,
                  "Tessera .h5 graph file (the partition is added to it, unless --output names a file)")
      ->required();
  cmd->add_option("-o,--output", a->output,
                  "Write the partition to this file of its own (read by tessera train --partition-file) and "
                  "leave --data unchanged: for a graph shared read-only");
  cmd->add_option("--parts", a->parts, "Number of parts (the rank count of the training job)")->required();
  cmd->add_option("--method", a->method,
                  "metis (k-way, balanced by nodes, training nodes and edges) or random")
      ->capture_default_str();
  cmd->add_option("--name", a->name, "Stored as /partition/NAME (default: METHOD-PARTS)");
  add_seed_option(cmd, a->seed, "random: the permutation's seed");
  cmd->callback([&selected, a] {
    selected = [a](const Communicator& world) {
      std::string invalid;
      PartitionMethod method = PartitionMethod::Metis;
      try {
        method = app::parse_partition_method(a->method);
      } catch (const Error& e) {
        invalid = e.what();
      }
      world.check(invalid.empty(), invalid);
      const std::string name = a->name.empty() ? a->method + "-" + std::to_string(a->parts) : a->name;
      PathPlan paths;
      paths.input(a->data, "--data");
      paths.output_file(a->output, "--output");
      world.run_on(0, [&] {
        paths.check_and_prepare();
        if (a->output.empty()) require_graph_writable(a->data);
      });
      const GraphIdentity identity = graph_identity(world, a->data);
      Stopwatch watch;
      // Every value checked by all ranks before rank 0's serial METIS reads them (a node id out of range
      // would otherwise index past its arrays).
      validate_graph(GraphFileReader(world, a->data), world);
      PartitionReport report;
      // METIS is serial: rank 0 partitions and writes, the others wait for its verdict.
      world.run_on(0, [&] {
        const std::vector<int32_t> part = compute_partition(a->data, a->parts, method, a->seed);
        report = evaluate_partition(a->data, part, a->parts);
        if (a->output.empty())
          write_partition(a->data, name, part, a->parts, method, report);
        else
          write_partition_file(*a, identity, name, part, method, report);
      });
      char line[512];
      std::snprintf(
          line, sizeof(line),
          "wrote /partition/%s to %s: %lld parts (%s), edge cut %lld of %lld edges (%.1f%%), node balance "
          "%.3f, training-node balance %.3f, edge balance %.3f (%.1f s)",
          name.c_str(), (a->output.empty() ? a->data : a->output).c_str(), (long long)report.parts,
          a->method.c_str(), (long long)report.cut_edges, (long long)report.edges,
          report.edges > 0 ? 100.0 * double(report.cut_edges) / double(report.edges) : 0.0,
          report.node_balance, report.train_balance, report.edge_balance, watch.seconds());
      log_line(line);
      return 0;
    };
  });
}

}  // namespace tessera::app
