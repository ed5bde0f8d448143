// SPDX-License-Identifier: BSD-3-Clause
#include <cstdio>
#include <memory>

#include "tessera/cli/commands.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/graph_file.hpp"

namespace tessera::app {

void add_info_command(CLI::App& app, Command& selected) {
  auto path = std::make_shared<std::string>();
  CLI::App* info =
      app.add_subcommand("info", "Print a graph file's sizes and statistics, and validate every value");
  // --data as train, plan and partition take it; the positional file as before.
  CLI::Option* data = info->add_option("--data", *path, "Tessera .h5 graph file");
  info->add_option("file", *path, "Tessera .h5 graph file (the same as --data)")->excludes(data);
  info->callback([&selected, path] {
    selected = [path](const Communicator& world) {
      world.check(!path->empty(), "info needs a graph file: tessera info --data FILE (or tessera info FILE)");
      Stopwatch watch;
      const GraphFileReader reader(world, *path);
      const GraphSummary s = validate_graph(reader, world);
      const GraphMeta& m = reader.meta();
      char line[512];
      log_line("file:      " + *path);
      log_line("name:      " + m.name);
      log_line("source:    " + m.source);
      std::snprintf(line, sizeof(line), "nodes:     %lld", (long long)m.num_nodes);
      log_line(line);
      std::snprintf(line, sizeof(line), "edges:     %lld (%s, %lld self loops)", (long long)m.num_edges,
                    m.symmetric ? "symmetric" : "directed", (long long)s.self_loops);
      log_line(line);
      std::snprintf(line, sizeof(line), "in-degree: min %lld, mean %.2f, max %lld", (long long)s.min_degree,
                    s.mean_degree, (long long)s.max_degree);
      log_line(line);
      std::snprintf(line, sizeof(line), "features:  %lld%s", (long long)m.num_features,
                    m.feature_dtype == StorageDtype::Bf16 ? " (stored in bf16)" : "");
      log_line(line);
      if (m.num_edge_features > 0) {
        std::snprintf(line, sizeof(line), "edge features: %lld per edge", (long long)m.num_edge_features);
        log_line(line);
      }
      if (m.multi_label) {
        const double observed = double(m.num_nodes) * double(m.num_classes);
        std::snprintf(line, sizeof(line),
                      "tasks:     %lld, multi-label (%lld labeled nodes; %.1f%% of entries observed, "
                      "%.1f%% of those positive)",
                      (long long)m.num_classes, (long long)s.labeled_nodes,
                      100.0 * s.observed_labels / observed,
                      s.observed_labels ? 100.0 * s.positive_labels / s.observed_labels : 0.0);
      } else if (m.num_classes == 0 && s.labeled_nodes == 0) {
        std::snprintf(line, sizeof(line), "classes:   none (no node labels)");
      } else {
        std::snprintf(line, sizeof(line), "classes:   %lld (%lld labeled nodes; single-label)",
                      (long long)m.num_classes, (long long)s.labeled_nodes);
      }
      log_line(line);
      std::string splits;
      for (const SplitInfo& split : reader.splits())
        splits += (splits.empty() ? "" : ", ") + split.name + " " + std::to_string(split.size);
      log_line("splits:    " + (splits.empty() ? std::string("none") : splits));
      std::string links;
      for (const LinkSplitInfo& link : reader.link_splits()) {
        links += (links.empty() ? "" : ", ") + link.name + " " + std::to_string(link.edges) + " edges";
        if (link.shared_negatives > 0) links += " + " + std::to_string(link.shared_negatives) + " negatives";
        if (link.negatives_per_edge > 0)
          links += " x " + std::to_string(link.negatives_per_edge) + " negatives each";
      }
      if (!links.empty()) log_line("links:     " + links);
      if (reader.has_original_ids())
        log_line(
            "order:     reordered; /node/original_id gives each node's id in the file it was made from "
            "(node outputs are written in that order)");
      std::snprintf(line, sizeof(line), "valid:     yes (checked by %d ranks in %.2f s)", world.size(),
                    watch.seconds());
      log_line(line);
      log_line(peak_memory_report(world));
      return 0;
    };
  });
}

}  // namespace tessera::app
