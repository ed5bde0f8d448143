// SPDX-License-Identifier: BSD-3-Clause
// `tessera bench spmm|gemm|stream`: measure this machine's kernels. Each prints one line per size with the
// median of --repeat runs after one warm-up.
//   spmm:   effective GB/s (bytes = CSR arrays + one read of X per nonzero + one write of Y) and GFLOP/s
//           (2 flops per nonzero and column), on a graph file's GCN matrix or a random graph
//   gemm:   GFLOP/s of the three products a layer calls on these sizes: C = A B (NN, forward), C = A B^T
//           (NT, input gradient; B stored n x k) and A^T G (TN, weight gradient: k x n, m reduced)
//   stream: GB/s of the triad a = b + s c (12 bytes per element), the memory-bandwidth ceiling
// With --write FILE each writes what it measured into a machine file for `plan` and `--grid auto`: comm the
// all-reduce fit, spmm --fit the SpMM coefficients, gemm the GEMM rate (fp32 or bf16), stream the bandwidth.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/options.hpp"
#include "tessera/comm/collectives.hpp"
#include "tessera/core/bf16.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/log.hpp"
#include "tessera/core/paths.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/graph/graph_file.hpp"
#include "tessera/graph/normalize.hpp"
#include "tessera/kernels/gemm.hpp"
#include "tessera/kernels/spmm.hpp"
#include "tessera/parallel3d/perf_model.hpp"

namespace tessera::app {

namespace {

// A CLI11 check that also refuses NaN (CLI::Range lets it through: every comparison with NaN is false).
CLI::Validator finite_in(double low, double high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < low || v > high)
          return "must be a number in [" + CLI::detail::to_string(low) + ", " + CLI::detail::to_string(high) +
                 "], not '" + text + "'";
        return std::string();
      },
      "NUMBER");
}
}  // namespace
namespace {

template <class Fn>
double median_seconds(int repeat, const Fn& fn) {
  fn();  // warm-up
  Kokkos::fence();
  std::vector<double> times;
  for (int r = 0; r < repeat; ++r) {
    Stopwatch w;
    fn();
    Kokkos::fence();
    times.push_back(w.seconds());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The machine file a measurement updates (--write): its path checked against the input (`input_option`'s
// file, when given) and the output rules, then the file read and validated, or the profile `base` taken when
// it does not exist: all before anything is measured.
MachineProfile machine_file_to_update(const std::string& path, const std::string& base,
                                      const std::string& input = "", const std::string& input_option = "") {
  PathPlan plan;
  if (!input.empty()) plan.input(input, input_option);
  plan.output_file(path, "--write");
  plan.check_and_prepare();
  return file_kind(path).empty() ? builtin_machine(base) : load_machine_file(path);
}

// --write FILE and --base NAME of a measurement that can update a machine file; returns --write.
CLI::Option* add_machine_file_options(CLI::App* command, std::string& write, std::string& base,
                                      const std::string& write_help) {
  CLI::Option* option = command->add_option("--write", write, write_help);
  command->add_option("--base", base, "Profile to start the machine file from when it does not exist")
      ->capture_default_str();
  return option;
}

void save_measured(const MachineProfile& m, const std::string& path) {
  save_machine_file(m, path);
  log_line("wrote " + path);
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) out.push_back(std::stoll(part));
  return out;
}

CsrMatrix<float, HostSpace> random_graph(int64_t n, double degree, uint64_t seed) {
  std::mt19937_64 gen(seed);
  const int64_t per_row = int64_t(degree);
  CsrMatrix<float, HostSpace> a;
  a.num_rows = a.num_cols = n;
  a.row_ptr = HostVector<int64_t>("p", size_t(n + 1));
  a.col_idx = HostVector<int64_t>("i", size_t(n * per_row));
  for (int64_t v = 0; v < n; ++v) {
    a.row_ptr(v + 1) = (v + 1) * per_row;
    for (int64_t k = 0; k < per_row; ++k) a.col_idx(v * per_row + k) = int64_t(gen() % uint64_t(n));
    std::sort(&a.col_idx(v * per_row), &a.col_idx(v * per_row) + per_row);
  }
  return a;
}

}  // namespace

void add_bench_command(CLI::App& app, Command& selected) {
  CLI::App* bench =
      app.add_subcommand("bench", "Measure this machine's kernels (SpMM, GEMM, memory bandwidth)");
  bench->require_subcommand(1);

  struct CommArgs {
    std::string write, base = "local";
    int repeat = 10;
  };
  auto cm = std::make_shared<CommArgs>();
  CLI::App* comm_cmd =
      bench->add_subcommand("comm", "All-reduce latency and bandwidth over all ranks (run with mpiexec)");
  comm_cmd->add_option("--repeat", cm->repeat, "Timed runs per size")
      ->capture_default_str()
      ->check(finite_in(1, 1e6));
  add_machine_file_options(comm_cmd, cm->write, cm->base,
                           "Write the fitted alpha and beta into this machine file");
  comm_cmd->callback([&selected, cm] {
    selected = [cm](const Communicator& world) {
      world.check(world.size() > 1, "tessera bench comm needs at least 2 ranks (mpiexec -n P)");
      MachineProfile m;
      if (!cm->write.empty()) world.run_on(0, [&] { m = machine_file_to_update(cm->write, cm->base); });
      const int p = world.size();
      std::vector<double> sizes, times;
      char line[256];
      for (int64_t bytes :
           {int64_t(1) << 12, int64_t(1) << 16, int64_t(1) << 20, int64_t(1) << 24, int64_t(1) << 26}) {
        std::vector<float> buffer(size_t(bytes / 4), 1.0f);
        const double t = median_seconds(cm->repeat, [&] {
          all_reduce(world, buffer.data(), int64_t(buffer.size()), ReduceOp::Sum, "bench");
        });
        // Every rank must agree on the measurement: take the slowest.
        const double slowest = all_reduce_value(world, t, ReduceOp::Max, "bench");
        sizes.push_back(double(bytes));
        times.push_back(slowest);
        std::snprintf(line, sizeof(line),
                      "allreduce %9lld bytes over %d ranks: %9.1f us  %7.2f GB/s bus bandwidth",
                      (long long)bytes, p, 1e6 * slowest, 2.0 * (p - 1) / p * double(bytes) / slowest / 1e9);
        log_line(line);
      }
      // t = 2(p-1)/p * bytes / beta + 2(p-1) alpha.
      // Plain names, not structured bindings: the lambda below captures them (C++20 for bindings).
      const std::pair<double, double> fit = fit_allreduce_model(sizes, times, p);
      const double alpha = fit.first, beta = fit.second;
      std::snprintf(line, sizeof(line), "fit: alpha %.2f us, beta %.2f GB/s", 1e6 * alpha, beta / 1e9);
      log_line(line);
      if (!cm->write.empty())
        world.run_on(0, [&] {
          m.alpha_intra = m.alpha_inter = alpha;
          m.beta_intra = m.beta_inter = beta;
          save_measured(m, cm->write);
        });
      return 0;
    };
  });

  struct SpmmArgs {
    std::string data, widths = "16,64,128,256", write, base = "local", kernels = "auto", dtype = "f32",
                      host_loop = "auto";
    bool fit = false;
    int64_t nodes = 169343;
    double degree = 8;
    int repeat = 10;
  };
  auto s = std::make_shared<SpmmArgs>();
  CLI::App* spmm = bench->add_subcommand("spmm", "CSR x dense: effective GB/s and GFLOP/s");
  spmm->add_option("--data", s->data, "Use this graph file's GCN-normalized adjacency");
  spmm->add_option("--nodes", s->nodes, "Random graph: nodes")
      ->capture_default_str()
      ->check(finite_in(1, 1e10));
  spmm->add_option("--degree", s->degree, "Random graph: nonzeros per row")
      ->capture_default_str()
      ->check(finite_in(1e-6, 1e6));
  spmm->add_option("--widths", s->widths, "Dense widths, comma-separated")->capture_default_str();
  spmm->add_option("--repeat", s->repeat, "Timed runs per width")
      ->capture_default_str()
      ->check(finite_in(1, 1e6));
  spmm->add_option("--kernels", s->kernels, "auto, host, team or vendor")->capture_default_str();
  spmm->add_option("--host-loop", s->host_loop,
                   "The host kernels' row loop: auto (the widest this CPU has), avx512, avx2 or plain")
      ->capture_default_str()
      ->check(CLI::IsMember(names_of(kHostSpmmLoopNames)));
  spmm->add_option("--dtype", s->dtype,
                   "X held as f32, or bf16 (widened as read, fp32 sums; vendor runs team)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  CLI::Option* fit = spmm->add_flag(
      "--fit", s->fit, "Also time block shapes of 3D grids and fit the model's SpMM coefficients");
  add_machine_file_options(spmm, s->write, s->base,
                           "With --fit: write the fitted coefficients into this machine file")
      ->needs(fit);
  spmm->callback([&selected, s] {
    selected = [s](const Communicator& world) {
      world.check(world.size() == 1, "tessera bench spmm measures one process: run it with mpiexec -n 1");
      const HostSpmmLoop loop =
          *value_named(kHostSpmmLoopNames, s->host_loop);  // --host-loop's check admitted it
      world.check(host_spmm_loop_available(loop),
                  "tessera bench spmm: --host-loop " + s->host_loop + ": this CPU or build cannot run it");
      use_host_spmm_loop(loop);
      MachineProfile m;
      if (!s->write.empty()) m = machine_file_to_update(s->write, s->base, s->data, "--data");
      CsrMatrix<float, HostSpace> a;
      if (!s->data.empty()) {
        const GraphFileReader reader(world, s->data);
        a = gcn_normalize(reader.read_rows(0, reader.meta().num_nodes).adjacency);
      } else {
        a = gcn_normalize(random_graph(s->nodes, s->degree, 1));
      }
      const CsrSpmm<float> op(csr_to_space<float, DeviceSpace>(a));
      const KernelPath path = resolve_kernel_path(parse_kernel_path(s->kernels), KernelKind::Spmm);
      char line[256];
      const bool bf16 = s->dtype == "bf16";
      const std::string kernels =
          path == KernelPath::Host
              ? std::string("host kernels (") + host_spmm_loop_name(host_spmm_loop()) + " loop)"
              : std::string(kernel_path_name(path)) + " kernels";
      std::snprintf(line, sizeof(line), "spmm: %lld rows, %lld nonzeros, %s, %d threads, X in %s",
                    (long long)a.num_rows, (long long)a.nnz(), kernels.c_str(),
                    int(ExecSpace().concurrency()), s->dtype.c_str());
      log_line(line);
      for (int64_t w : parse_list(s->widths)) {
        Matrix<float> x("x", size_t(a.num_cols), size_t(bf16 ? 0 : w)), y("y", size_t(a.num_rows), size_t(w));
        Matrix<uint16_t> x_bf16("x_bf16", size_t(a.num_cols), size_t(bf16 ? w : 0));
        Kokkos::deep_copy(x, 1.0f);
        Kokkos::deep_copy(x_bf16, to_bf16(1.0f));
        const double t = median_seconds(s->repeat, [&] {
          if (bf16)
            op.apply_bf16(x_bf16, y, 1.0f, 0.0f, path);
          else
            op.apply(x, y, 1.0f, 0.0f, path);
        });
        const double bytes = 8.0 * double(a.num_rows + 1) + 12.0 * double(a.nnz()) +
                             (bf16 ? 2.0 : 4.0) * double(w) * double(a.nnz()) +
                             4.0 * double(w) * double(a.num_rows);
        const double flops = 2.0 * double(a.nnz()) * double(w);
        std::snprintf(line, sizeof(line), "spmm width %4lld: %8.2f ms  %7.2f GB/s  %7.2f GFLOP/s",
                      (long long)w, 1e3 * t, bytes / t / 1e9, flops / t / 1e9);
        log_line(line);
      }
      if (!s->fit) return 0;
      // Blocks as 3D grids cut them: rows split by Gc, columns by Ga (Plexus eq. 4.4), at several widths.
      std::vector<SpmmSample> samples;
      for (int gc : {1, 4})
        for (int ga : {1, 4})
          for (int64_t w : {8, 32, 128}) {
            const int64_t rows = s->nodes / gc, cols = s->nodes / ga;
            CsrMatrix<float, HostSpace> block = random_graph(rows, s->degree / ga, 3);
            block.num_cols = cols;
            for (int64_t k = 0; k < block.nnz(); ++k) block.col_idx(k) %= cols;
            const CsrSpmm<float> op(csr_to_space<float, DeviceSpace>(block));
            Matrix<float> x("x", size_t(cols), size_t(w)), y("y", size_t(rows), size_t(w));
            const double t = median_seconds(s->repeat, [&] { op.apply(x, y); });
            samples.push_back(SpmmSample{double(block.nnz()), double(w), double(rows), double(cols), t});
          }
      const std::vector<double> c = fit_spmm_model(samples);
      std::snprintf(line, sizeof(line), "fit (eq. 4.4) over %zu block shapes: c0 %.3e  c1 %.3e  c2 %.3e",
                    samples.size(), c[0], c[1], c[2]);
      log_line(line);
      if (!s->write.empty()) {
        m.spmm_c0 = c[0], m.spmm_c1 = c[1], m.spmm_c2 = c[2];
        save_measured(m, s->write);
      }
      return 0;
    };
  });

  struct GemmArgs {
    int64_t m = 169343, n = 256, k = 128;
    int repeat = 5;
    std::string kernels = "auto", dtype = "f32", host_gemm = "auto", write, base = "local";
  };
  auto g = std::make_shared<GemmArgs>();
  CLI::App* gemm_cmd = bench->add_subcommand("gemm", "Dense C = A B: GFLOP/s");
  gemm_cmd->add_option("--m", g->m, "Rows of A and C")->capture_default_str()->check(finite_in(1, 1 << 24));
  gemm_cmd->add_option("--n", g->n, "Columns of B and C")
      ->capture_default_str()
      ->check(finite_in(1, 1 << 24));
  gemm_cmd->add_option("--k", g->k, "Columns of A, rows of B")
      ->capture_default_str()
      ->check(finite_in(1, 1 << 24));
  gemm_cmd->add_option("--repeat", g->repeat, "Timed runs")->capture_default_str()->check(finite_in(1, 1e6));
  gemm_cmd->add_option("--kernels", g->kernels, "auto, host, team or vendor")->capture_default_str();
  gemm_cmd->add_option("--gemm-dtype", g->dtype, "f32, or bf16 (host path: operands rounded, fp32 sums)")
      ->capture_default_str();
  gemm_cmd->add_option("--host-gemm", g->host_gemm, "host fp32 GEMMs through auto, blas or onednn")
      ->capture_default_str();
  add_machine_file_options(gemm_cmd, g->write, g->base,
                           "Write the rate of the three products into this machine file (gemm_rate, or "
                           "gemm_rate_bf16 with --gemm-dtype bf16)");
  gemm_cmd->callback([&selected, g] {
    selected = [g](const Communicator& world) {
      world.check(world.size() == 1, "tessera bench gemm measures one process: run it with mpiexec -n 1");
      const GemmDtype dtype = parse_gemm_dtype(g->dtype);
      check_gemm_dtype(dtype, parse_kernel_path(g->kernels));
      set_host_gemm_library(parse_host_gemm(g->host_gemm));
      MachineProfile m;
      if (!g->write.empty()) m = machine_file_to_update(g->write, g->base);
      Matrix<float> a("a", size_t(g->m), size_t(g->k)), b("b", size_t(g->k), size_t(g->n)),
          c("c", size_t(g->m), size_t(g->n)), at("at", size_t(g->m), size_t(g->n));
      Kokkos::deep_copy(a, 0.5f);
      Kokkos::deep_copy(b, 0.25f);
      Kokkos::deep_copy(at, 1.0f);
      const double flops = 2.0 * double(g->m) * double(g->n) * double(g->k);
      const KernelPath path = resolve_kernel_path(parse_kernel_path(g->kernels), KernelKind::Gemm);
      set_gemm_dtype(dtype);
      const double nn =
          median_seconds(g->repeat, [&] { gemm<float>(Trans::No, Trans::No, 1.0f, a, b, 0.0f, c, path); });
      // The input-gradient shape: G W^T, with B stored n x k.
      Matrix<float> bt("bt", size_t(g->n), size_t(g->k));
      Kokkos::deep_copy(bt, 0.25f);
      const double nt =
          median_seconds(g->repeat, [&] { gemm<float>(Trans::No, Trans::Yes, 1.0f, a, bt, 0.0f, c, path); });
      // The weight-gradient shape: A^T G with the long dimension reduced.
      Matrix<float> w("w", size_t(g->k), size_t(g->n));
      const double tn =
          median_seconds(g->repeat, [&] { gemm<float>(Trans::Yes, Trans::No, 1.0f, a, at, 0.0f, w, path); });
      // Which library a host-path fp32 GEMM went through (bf16 always goes through oneDNN's matmul).
      const std::string library = path == KernelPath::Host && dtype == GemmDtype::F32
                                      ? std::string(" ") + host_gemm_library_name(host_gemm_library())
                                      : std::string();
      char line[320];
      std::snprintf(line, sizeof(line),
                    "gemm %lldx%lldx%lld: NN %.2f ms %.1f GFLOP/s, NT %.2f ms %.1f GFLOP/s, TN %.2f ms %.1f "
                    "GFLOP/s (%s kernels%s, %s, %d threads)",
                    (long long)g->m, (long long)g->n, (long long)g->k, 1e3 * nn, flops / nn / 1e9, 1e3 * nt,
                    flops / nt / 1e9, 1e3 * tn, flops / tn / 1e9, kernel_path_name(path), library.c_str(),
                    gemm_dtype_name(dtype), int(ExecSpace().concurrency()));
      log_line(line);
      if (!g->write.empty()) {
        // A layer calls each of the three products once: the rate of the three together.
        const double rate = 3.0 * flops / (nn + nt + tn);
        (dtype == GemmDtype::Bf16 ? m.gemm_rate_bf16 : m.gemm_rate) = rate;
        save_measured(m, g->write);
      }
      return 0;
    };
  });

  struct StreamArgs {
    int64_t elements = int64_t(1) << 25;
    int repeat = 10;
    std::string write, base = "local";
  };
  auto st = std::make_shared<StreamArgs>();
  CLI::App* stream = bench->add_subcommand("stream", "Memory bandwidth: triad a = b + s c");
  stream->add_option("--elements", st->elements, "Floats per array")
      ->capture_default_str()
      ->check(finite_in(1, 1e11));
  stream->add_option("--repeat", st->repeat, "Timed runs")->capture_default_str()->check(finite_in(1, 1e6));
  add_machine_file_options(stream, st->write, st->base,
                           "Write the faster triad's bandwidth into this machine file (memory_bandwidth)");
  stream->callback([&selected, st] {
    selected = [st](const Communicator& world) {
      world.check(world.size() == 1, "tessera bench stream measures one process: run it with mpiexec -n 1");
      MachineProfile m;
      if (!st->write.empty()) m = machine_file_to_update(st->write, st->base);
      Vector<float> a("a", size_t(st->elements)), b("b", size_t(st->elements)), c("c", size_t(st->elements));
      Kokkos::deep_copy(b, 1.0f);
      Kokkos::deep_copy(c, 2.0f);
      const double t = median_seconds(st->repeat, [&] {
        Kokkos::parallel_for(
            "tessera::triad", Kokkos::RangePolicy<ExecSpace>(0, st->elements),
            KOKKOS_LAMBDA(int64_t i) { a(i) = b(i) + 3.0f * c(i); });
      });
      // The same with 8 entries per thread, strided so that a warp's reads stay neighbours: Kokkos 3.4
      // launches a range in 64-thread blocks on a GPU, and one entry per thread left the triad at a third of
      // a copy's bandwidth on an H100 and an H200.
      const int64_t n = st->elements, items = (n + 7) / 8;
      const double t8 = median_seconds(st->repeat, [&] {
        Kokkos::parallel_for(
            "tessera::triad_8", Kokkos::RangePolicy<ExecSpace>(0, items), KOKKOS_LAMBDA(int64_t w) {
              for (int64_t k = 0; k < 8; ++k)
                if (w + k * items < n) a(w + k * items) = b(w + k * items) + 3.0f * c(w + k * items);
            });
      });
      // The library's own copy (cudaMemcpy on a GPU, memcpy on a host) as a third reading of the ceiling.
      const double copy = median_seconds(st->repeat, [&] { Kokkos::deep_copy(a, b); });
      char line[256];
      std::snprintf(line, sizeof(line),
                    "stream triad: %lld floats, %.2f ms, %.2f GB/s (8 per thread %.2f GB/s); copy %.2f GB/s "
                    "(%d threads)",
                    (long long)n, 1e3 * t, 12.0 * double(n) / t / 1e9, 12.0 * double(n) / t8 / 1e9,
                    8.0 * double(n) / copy / 1e9, int(ExecSpace().concurrency()));
      log_line(line);
      if (!st->write.empty()) {
        // The model prices streamed bytes (the triad's kind of traffic), not a copy.
        m.memory_bandwidth = 12.0 * double(n) / std::min(t, t8);
        save_measured(m, st->write);
      }
      return 0;
    };
  });
}

}  // namespace tessera::app
