// SPDX-License-Identifier: BSD-3-Clause
// The command line's parsers (apps/options.hpp): every string option into the library's types, and the
// messages a bad value gets.
#include <gtest/gtest.h>

#include <functional>

#include <sstream>

#include "tessera/cli/config_file.hpp"
#include "tessera/cli/options.hpp"
#include "tessera/core/error.hpp"

using namespace tessera;
using namespace tessera::app;

namespace {
std::string message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(Options, Grids) {
  EXPECT_EQ(parse_grid("2x3x4").str(), "2x3x4");
  EXPECT_EQ(parse_grid("2x1x3x4").d, 2);
  EXPECT_EQ(parse_grid("2x1x3x4").size(), 24);
  EXPECT_EQ(parse_grid("1x2x2x2").str(), "2x2x2");
  for (const char* bad :
       {"2x2", "2x0x2", "axbxc", "2x2x2x2x2", "2xx2x2", "-1x2x2", "2x2x2 ", "2x2x2x", "", "x2x2"})
    EXPECT_THROW(parse_grid(bad), Error) << bad;
  EXPECT_EQ(message([] { parse_grid("0x2x1"); }), "grid '0x2x1': every axis must be at least 1");
}

TEST(Options, BatchSizesAndFanouts) {
  MinibatchOptions m;
  parse_minibatch_size("0.25", m);
  EXPECT_EQ(m.batch_fraction, 0.25);
  EXPECT_EQ(m.batch_size, 0);
  parse_minibatch_size("64", m);
  EXPECT_EQ(m.batch_size, 64);
  EXPECT_EQ(m.batch_fraction, 0);
  for (const char* bad : {"0", "-3", "1.5", "ten", "", "nan"})
    EXPECT_THROW(parse_minibatch_size(bad, m), Error) << bad;
  EXPECT_EQ(message([&] { parse_minibatch_size("half", m); }),
            "--batch-size: expected a count or a fraction of the nodes, got 'half'");
  EXPECT_EQ(parse_seed_count("32"), 32);
  EXPECT_EQ(message([] { parse_seed_count("0.5"); }),
            "--batch-size: --mode sampled takes a count of seeds per rank from 1 to 2^30, not '0.5'");
  EXPECT_EQ(parse_fanouts("15,10,-1"), (std::vector<int>{15, 10, -1}));
  for (const char* bad : {"", "5,", ",5", "0", "5,x", "-2", "1.5"})
    EXPECT_THROW(parse_fanouts(bad), Error) << bad;
}

TEST(Options, ByteSizes) {
  EXPECT_EQ(parse_byte_size("1000000", "--m"), 1000000);
  EXPECT_EQ(parse_byte_size("0", "--m"), 0);
  EXPECT_EQ(parse_byte_size("4G", "--m"), int64_t(4) << 30);
  EXPECT_EQ(parse_byte_size("512m", "--m"), int64_t(512) << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB", "--m"), int64_t(3) << 29);
  EXPECT_EQ(parse_byte_size("2KB", "--m"), 2048);
  EXPECT_EQ(parse_byte_size("1T", "--m"), int64_t(1) << 40);
  for (const char* bad : {"", "G", "-1G", "4x", "4GG", "4 G", "nan", "inf", "1e30"})
    EXPECT_THROW(parse_byte_size(bad, "--m"), Error) << bad;
  EXPECT_EQ(message([] { parse_byte_size("4x", "--memory-per-rank"); }),
            "--memory-per-rank: expected a size such as 4G, 512M or 1000000 (bytes), not '4x'");
}

TEST(Options, SimulatedNetwork) {
  EXPECT_FALSE(parse_network("").enabled());
  const SimulatedNetwork n = parse_network("2,25");
  EXPECT_DOUBLE_EQ(n.latency_s, 2e-6);
  EXPECT_DOUBLE_EQ(n.bytes_per_s, 25e9);
  for (const char* bad : {"25", "2,", ",25", "2,0", "-1,25", "a,b", "2,25,3"})
    EXPECT_THROW(parse_network(bad), Error) << bad;
}

TEST(Options, NamesRoundTripAndBadNamesListTheChoices) {
  for (KernelPath p : {KernelPath::Auto, KernelPath::Host, KernelPath::Team, KernelPath::Vendor})
    EXPECT_EQ(parse_kernel_path(kernel_path_name(p)), p);
  for (CommBackend b : {CommBackend::Auto, CommBackend::Mpi, CommBackend::MpiHost, CommBackend::Nccl})
    EXPECT_EQ(parse_comm_backend(comm_backend_name(b)), b);
  EXPECT_EQ(message([] { parse_comm_backend("rccl"); }),
            "--comm must be auto, mpi, mpi-host or nccl, not 'rccl'");
  for (PrefetchPolicy p : {PrefetchPolicy::None, PrefetchPolicy::Static, PrefetchPolicy::Periodic,
                           PrefetchPolicy::Adaptive, PrefetchPolicy::External})
    EXPECT_EQ(parse_prefetch_policy(prefetch_policy_name(p)), p);
  for (TrainMode m : {TrainMode::Full, TrainMode::Minibatch, TrainMode::Sampled})
    EXPECT_EQ(parse_mode(train_mode_name(m)), m);
  for (NormKind k : {NormKind::None, NormKind::Batch, NormKind::Rms}) EXPECT_EQ(parse_norm(norm_name(k)), k);
  for (ModelKind k : {ModelKind::Gcn, ModelKind::Sage, ModelKind::Gat})
    EXPECT_EQ(parse_model_kind(model_kind_name(k)), k);
  for (Selection s : {Selection::Accuracy, Selection::AccuracyAndLoss})
    EXPECT_EQ(parse_selection(selection_name(s)), s);
  for (PermuteMode p : {PermuteMode::None, PermuteMode::Single, PermuteMode::Double})
    EXPECT_EQ(parse_permute_mode(permute_mode_name(p)), p);
  EXPECT_EQ(parse_comm_dtype("fp32"), CommDtype::F32);
  EXPECT_EQ(parse_comm_dtype("bf16"), CommDtype::Bf16);
  EXPECT_EQ(message([] { parse_comm_dtype("fp8"); }), "--comm-dtype: expected f32 or bf16, got 'fp8'");
  EXPECT_EQ(message([] { parse_prefetch_policy("lru"); }),
            "--prefetch-policy must be none, static, periodic, adaptive or external, not 'lru'");
  EXPECT_EQ(message([] { parse_kernel_path("gpu"); }),
            "--kernels must be auto, host, team or vendor, not 'gpu'");
  EXPECT_EQ(message([] { parse_model_kind("gin"); }), "--model must be gcn, sage or gat, not 'gin'");
  EXPECT_EQ(message([] { parse_selection("loss"); }),
            "--selection must be accuracy or accuracy-and-loss, not 'loss'");
  EXPECT_EQ(message([] { parse_mode("mini"); }), "--mode: expected full, minibatch or sampled, got 'mini'");
  EXPECT_EQ(parse_optimizer("adamw"), OptimizerKind::AdamW);
  EXPECT_EQ(parse_partition_method("random"), PartitionMethod::Random);
}

TEST(Options, SeedsAreWholeNumbersUpTo2To63) {
  EXPECT_EQ(parse_seed("0"), 0u);
  EXPECT_EQ(parse_seed("9223372036854775807"), 9223372036854775807u);
  for (const char* bad : {"-1", "9223372036854775808", "18446744073709551615", "18446744073709551616", "1e23",
                          "0x10", "1.5", "", " 7", "+3"})
    EXPECT_EQ(message([&] { parse_seed(bad); }),
              std::string("--seed must be a whole number from 0 to 2^63 - 1 (9223372036854775807), not '") + bad +
                  "'");
}

// What --print-config writes reads back to the same string, whatever the string holds.
TEST(Options, ConfigValuesReadBackAsWritten) {
  TomlConfig config;
  for (const std::string text : {"run#1", "a \"quoted\" name", "back\\slash \\n", "ünïcødé",
                                 "tab\there", "", "12abc", "1e3x"}) {
    std::istringstream file("key=" + toml_value(text) + "  # a comment\n");
    const std::vector<CLI::ConfigItem> items = config.from_config(file);
    ASSERT_EQ(items.size(), 1u) << text;
    EXPECT_EQ(items[0].inputs, std::vector<std::string>{text}) << toml_value(text);
  }
  EXPECT_EQ(toml_value("12"), "12");
  EXPECT_EQ(toml_value("5e-4"), "5e-4");
  EXPECT_EQ(toml_value("true"), "true");
  EXPECT_EQ(toml_value("g.h5"), "\"g.h5\"");
  EXPECT_THROW(toml_value("two\nlines"), CLI::ConfigError);
  const auto problem = [&](const std::string& text) {
    std::istringstream file(text);
    try {
      config.from_config(file);
    } catch (const CLI::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(problem("a=1\nb = \"open\n"), "line 2: a string without its closing quote");
  EXPECT_EQ(problem("\n\nc = bare"), "line 3: 'bare' is not a TOML value (strings are quoted: \"bare\")");
  EXPECT_EQ(problem("d = 1 2"), "line 1: unexpected '2' after the value");
  EXPECT_EQ(problem("e = \"\\q\""), "line 1: unknown escape \\q (a backslash is written \\\\)");
  EXPECT_EQ(problem("f = 1\nf = 2"), "line 2: 'f' is given twice");
  EXPECT_EQ(problem("g = \"\"\"x\"\"\""), "line 1: multi-line strings are not supported: give the value on one line");
}
