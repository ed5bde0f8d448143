// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/cli/usage.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>

#include "tessera/kernels/kernel_path.hpp"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif
#ifndef TESSERA_GIT_COMMIT
#define TESSERA_GIT_COMMIT "unknown"
#endif
#ifndef TESSERA_PYTHON
#define TESSERA_PYTHON ""
#endif
#ifndef TESSERA_PYTHON_BINDINGS
#define TESSERA_PYTHON_BINDINGS 0
#endif

namespace tessera::app {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string near = closest_spelling(word, candidates);
  return near.empty() ? "" : "; did you mean '" + near + "'?";
}

std::string help_of(const CLI::App* app) {
  std::string path;
  for (const CLI::App* a = app; a != nullptr && a->get_parent() != nullptr; a = a->get_parent())
    path = " " + a->get_name() + path;
  return "tessera" + path + " --help";
}

}  // namespace

std::string closest_spelling(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string unknown_word_message(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* current = &app;
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string& arg = args[k];
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      const std::string name = arg.substr(0, arg.find('='));
      bool known = false;
      for (const CLI::App* a = current; a != nullptr && !known; a = a->get_parent())
        known = a->get_option_no_throw(name) != nullptr;
      if (known) continue;
      std::vector<std::string> names;
      for (const CLI::Option* o : current->get_options())
        for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
      return (current == &app ? "" : current->get_name() + ": ") + "unknown option '" + name + "'" +
             suggestion(name, names) + " (see " + help_of(current) + ")";
    }
    if (arg.empty() || arg[0] == '-') continue;
    const std::vector<const CLI::App*> subs = current->get_subcommands({});
    const auto sub =
        std::find_if(subs.begin(), subs.end(), [&](const CLI::App* s) { return s->get_name() == arg; });
    if (sub != subs.end()) {
      current = *sub;
      continue;
    }
    // A word where a subcommand is required (the top level and `prep`, `bench`), not an option's value.
    const bool value = k > 0 && args[k - 1].rfind("-", 0) == 0 && args[k - 1].find('=') == std::string::npos;
    if (value || current->get_require_subcommand_min() == 0 || subs.empty()) continue;
    std::vector<std::string> names;
    for (const CLI::App* s : subs) names.push_back(s->get_name());
    if (arg == "version" && current == &app) names.push_back("--version");
    return "unknown subcommand '" + arg + "'" + suggestion(arg, names) + " (see " + help_of(current) + ")";
  }
  return "";
}

std::string version_short() {
  return TESSERA_VERSION " (git " TESSERA_GIT_COMMIT ")";
}

std::string version_text() {
  std::string text = "tessera " + version_short() + "\n";
  text += "Kokkos " + std::to_string(KOKKOS_VERSION / 10000) + "." +
          std::to_string(KOKKOS_VERSION / 100 % 100) + "." + std::to_string(KOKKOS_VERSION % 100) +
          ", backends:";
#if defined(KOKKOS_ENABLE_SERIAL)
  text += " Serial";
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  text += " OpenMP";
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  text += " CUDA";
#endif
#if defined(KOKKOS_ENABLE_HIP)
  text += " HIP";
#endif
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi, &length);
  std::string mpi_line(mpi, size_t(length));
  mpi_line = mpi_line.substr(0, mpi_line.find_first_of("\n,"));
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  text += "\nMPI: " + mpi_line + "\nHDF5 " + std::to_string(major) + "." + std::to_string(minor) + "." +
          std::to_string(release) + " (parallel)\nvendor libraries:";
  std::string vendor;
#if defined(TESSERA_VENDOR_CUDA)
  vendor += " cuSPARSE cuBLAS";
#endif
#if defined(TESSERA_HAVE_NCCL)
  vendor += " NCCL";
#endif
#if defined(TESSERA_VENDOR_HIP)
  vendor += " rocSPARSE";
#endif
  if (onednn_gemm_available()) vendor += " oneDNN";
  text += (vendor.empty() ? " none" : vendor) + "; host BLAS: CBLAS\n";
  const std::string python = TESSERA_PYTHON;
  text += "Python: " + (python.empty() ? std::string("none found at configure time") : python) +
          (TESSERA_PYTHON_BINDINGS ? " (the bindings are built for it: PYTHONPATH=<build>/python " + python +
                                         ")\n"
                                   : " (tessera data; the bindings are not built)\n");
  return text;
}

}  // namespace tessera::app
