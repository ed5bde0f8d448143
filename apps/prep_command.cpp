// SPDX-License-Identifier: BSD-3-Clause
#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/options.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/ogb.hpp"
#include "tessera/graph/reorder.hpp"
#include "tessera/graph/synth.hpp"

namespace tessera::app {
namespace {

void print_written(const std::string& path, const GraphMeta& meta, double seconds) {
  char line[512];
  std::snprintf(line, sizeof(line), "wrote %s: %lld nodes, %lld edges, %lld %sfeatures, %lld %s (%.1f s)",
                path.c_str(), (long long)meta.num_nodes, (long long)meta.num_edges,
                (long long)meta.num_features, meta.feature_dtype == StorageDtype::Bf16 ? "bf16 " : "",
                (long long)meta.num_classes, meta.multi_label ? "tasks (multi-label)" : "classes", seconds);
  log_line(line);
}

// --feature-dtype of the commands that write a graph: how the file stores the node features.
void add_feature_dtype_option(CLI::App* cmd, std::string& dtype) {
  cmd->add_option("--feature-dtype", dtype,
                  "Store the node features as f32 or bf16 (half the bytes, rounded to nearest even; read "
                  "back as fp32)")
      ->capture_default_str();
}

// The files a conversion reads (every file under DIR/raw and DIR/split, two levels down), so the output
// can be checked against them.
void add_dataset_inputs(PathPlan& plan, const std::string& dir) {
  const auto add_files = [&](const std::string& folder, int depth, const auto& self) -> void {
    DIR* d = opendir(folder.c_str());
    if (d == nullptr) return;
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name, path = folder + "/" + name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (stat(path.c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode) && depth > 0) self(path, depth - 1, self);
      if (S_ISREG(st.st_mode)) plan.input(path, "the dataset " + dir);
    }
    closedir(d);
  };
  add_files(dir + "/raw", 0, add_files);
  add_files(dir + "/split", 1, add_files);
}

// Collective: the output checked against the inputs and refused if it is a directory (PathPlan).
void check_prep_paths(const Communicator& world, const std::string& dataset, const std::string& output,
                      const std::string& input_graph = "") {
  PathPlan plan;
  if (!dataset.empty()) add_dataset_inputs(plan, dataset);
  if (!input_graph.empty()) plan.input(input_graph, "prep reorder");
  plan.output_file(output, "--output");
  world.run_on(0, [&] { plan.check_and_prepare(); });
}

void print_reordered(const ReorderOptions& o, const ReorderReport& r, double seconds) {
  print_written(o.output, r.meta, seconds);
  char line[320];
  std::snprintf(line, sizeof(line), "order %s (%.1f s): edges within %lld ids of their row %.1f%% -> %.1f%%",
                node_ordering_name(o.ordering), r.order_seconds, (long long)o.window, 100.0 * r.within_before,
                100.0 * r.within_after);
  log_line(line);
  for (const std::string& name : r.dropped)
    log_line("partition " + name + " of " + o.input + " is not carried over: run tessera partition on " +
             o.output);
}

void add_reorder_command(CLI::App& prep, Command& selected) {
  auto o = std::make_shared<ReorderOptions>();
  auto ordering = std::make_shared<std::string>("metis");
  CLI::App* cmd = prep.add_subcommand(
      "reorder", "Renumber a graph file's nodes for locality (outputs keep the input's node order)");
  cmd->add_option("input", o->input, "Tessera graph file to reorder")->required();
  cmd->add_option("-o,--output", o->output, "Output .h5 file")->required();
  cmd->add_option("--order", *ordering, "rcm, degree or metis")
      ->check(CLI::IsMember(names_of(kNodeOrderingNames)))
      ->capture_default_str();
  cmd->add_option("--part-nodes", o->part_nodes, "metis: nodes per part")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([&selected, o, ordering] {
    selected = [o, ordering](const Communicator& world) {
      check_prep_paths(world, "", o->output, o->input);
      o->ordering = *value_named(kNodeOrderingNames, *ordering);  // --order's check admitted it
      Stopwatch watch;
      ReorderReport report;
      // Serial: rank 0 reorders, the others wait for its verdict.
      world.run_on(0, [&] { report = reorder_graph_file(*o); });
      print_reordered(*o, report, watch.seconds());
      return 0;
    };
  });
}

}  // namespace

void add_prep_command(CLI::App& app, Command& selected) {
  CLI::App* prep = app.add_subcommand("prep", "Convert or generate a graph into a Tessera HDF5 file");
  prep->require_subcommand(1);

  auto ogb = std::make_shared<OgbConvertOptions>();
  auto ogb_budget_gib = std::make_shared<double>(2.0);
  CLI::App* ogb_cmd =
      prep->add_subcommand("ogb", "Convert an OGB node-property dataset (raw directory layout)");
  ogb_cmd->add_option("dir", ogb->dataset_dir, "Dataset directory holding raw/ and split/")->required();
  ogb_cmd->add_option("-o,--output", ogb->output, "Output .h5 file")->required();
  ogb_cmd->add_flag("--symmetrize", ogb->symmetrize, "Add reverse edges and drop duplicates");
  ogb_cmd->add_option("--split", ogb->split, "Split kind under split/ (default: the only one)");
  ogb_cmd->add_option("--name", ogb->name, "Graph name (default: the directory's name)");
  ogb_cmd
      ->add_option("--edge-memory-gib", *ogb_budget_gib,
                   "Memory for edges per pass; more edges take more passes")
      ->check(CLI::PositiveNumber);
  auto ogb_dtype = std::make_shared<std::string>("f32");
  add_feature_dtype_option(ogb_cmd, *ogb_dtype);
  ogb_cmd->callback([&selected, ogb, ogb_budget_gib, ogb_dtype] {
    selected = [ogb, ogb_budget_gib, ogb_dtype](const Communicator& world) {
      ogb->feature_dtype = parse_feature_dtype(*ogb_dtype);
      check_prep_paths(world, ogb->dataset_dir, ogb->output);
      ogb->edge_memory_bytes = int64_t(*ogb_budget_gib * double(int64_t(1) << 30));
      Stopwatch watch;
      GraphMeta meta;
      // Reading a gzip stream is sequential: rank 0 converts, the others wait for its verdict.
      const Communicator self(MPI_COMM_SELF, false, world.shared_stats());
      world.run_on(0, [&] { meta = convert_ogb(*ogb, self); });
      print_written(ogb->output, meta, watch.seconds());
      return 0;
    };
  });

  auto synth = std::make_shared<SynthOptions>();
  auto synth_out = std::make_shared<std::string>();
  auto kind = std::make_shared<std::string>("csbm");
  CLI::App* synth_cmd = prep->add_subcommand("synth", "Generate a synthetic graph (R-MAT or contextual SBM)");
  synth_cmd->add_option("--kind", *kind, "rmat or csbm")
      ->check(CLI::IsMember({"rmat", "csbm"}))
      ->capture_default_str();
  synth_cmd->add_option("--nodes", synth->num_nodes, "Nodes")->capture_default_str();
  synth_cmd->add_option("--edges", synth->num_edges, "Undirected edges to draw")->capture_default_str();
  synth_cmd->add_option("--features", synth->num_features, "Features per node")->capture_default_str();
  synth_cmd->add_option("--classes", synth->num_classes, "Classes")->capture_default_str();
  synth_cmd
      ->add_option("--tasks", synth->tasks,
                   "> 0: a multi-label graph of that many binary tasks, each leaning on the classes")
      ->capture_default_str();
  synth_cmd
      ->add_option("--unobserved", synth->unobserved_fraction,
                   "Multi-label: share of label entries stored unobserved (-1)")
      ->capture_default_str();
  add_seed_option(synth_cmd, synth->seed, "Random seed");
  synth_cmd->add_option("--intra-class", synth->intra_class, "CSBM: fraction of edges inside a class")
      ->capture_default_str();
  synth_cmd->add_option("--signal", synth->feature_signal, "CSBM: class-mean scale (noise is 1)")
      ->capture_default_str();
  synth_cmd->add_option("--train-fraction", synth->train_fraction, "Fraction of nodes in split/train")
      ->capture_default_str();
  synth_cmd->add_option("--valid-fraction", synth->valid_fraction, "Fraction of nodes in split/valid")
      ->capture_default_str();
  synth_cmd->add_option("--name", synth->name, "Graph name");
  synth_cmd->add_option("-o,--output", *synth_out, "Output .h5 file")->required();
  auto synth_dtype = std::make_shared<std::string>("f32");
  add_feature_dtype_option(synth_cmd, *synth_dtype);
  synth_cmd->callback([&selected, synth, synth_out, kind, synth_dtype] {
    selected = [synth, synth_out, kind, synth_dtype](const Communicator& world) {
      synth->feature_dtype = parse_feature_dtype(*synth_dtype);
      check_prep_paths(world, "", *synth_out);
      synth->kind = *kind == "rmat" ? SynthKind::Rmat : SynthKind::Csbm;
      Stopwatch watch;
      const GraphMeta meta = generate_synthetic(*synth, *synth_out, world);
      print_written(*synth_out, meta, watch.seconds());
      log_line(peak_memory_report(world));
      return 0;
    };
  });
  add_reorder_command(*prep, selected);
}

}  // namespace tessera::app
