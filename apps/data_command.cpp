// SPDX-License-Identifier: BSD-3-Clause
// `tessera data list|get ...`: benchmark datasets by name. The downloads and conversions are the Python
// package's (tessera/data.py, which the readers of every format live beside), so this command runs the
// interpreter the build recorded on `-m tessera.data`, before MPI starts: a download is not an MPI job.
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/cli/commands.hpp"

#ifndef TESSERA_PYTHON
#define TESSERA_PYTHON ""
#endif
#ifndef TESSERA_PYTHON_PACKAGE_DIR
#define TESSERA_PYTHON_PACKAGE_DIR ""
#endif

namespace tessera::app {

namespace {

bool has_package(const std::string& dir) {
  struct stat st {};
  return !dir.empty() && stat((dir + "/tessera/data.py").c_str(), &st) == 0;
}

std::string own_path() {
  char buffer[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return length > 0 ? std::string(buffer, size_t(length)) : std::string();
}

// The package: $TESSERA_PYTHONPATH, an installed tree's (PREFIX/lib/tessera/python beside PREFIX/bin), or
// the build's.
std::string package_dir(const std::string& program) {
  if (const char* given = std::getenv("TESSERA_PYTHONPATH"); given != nullptr && has_package(given)) return given;
  const size_t slash = program.find_last_of('/');
  const std::string installed = slash == std::string::npos ? "" : program.substr(0, slash) + "/../lib/tessera/python";
  if (has_package(installed)) return installed;
  return has_package(TESSERA_PYTHON_PACKAGE_DIR) ? TESSERA_PYTHON_PACKAGE_DIR : "";
}

}  // namespace

int run_data_command(int argc, char** argv) {
  const char* chosen = std::getenv("TESSERA_PYTHON");
  const std::string python = chosen != nullptr && *chosen != '\0' ? chosen : TESSERA_PYTHON;
  const std::string program = own_path();
  const std::string package = package_dir(program);
  if (python.empty() || package.empty()) {
    std::fprintf(stderr, "tessera: error: data: %s\n",
                 python.empty() ? "this build found no Python interpreter (configure with -DPython3_EXECUTABLE=...)"
                                : "the Python package tessera/data.py is not here (set TESSERA_PYTHONPATH to the "
                                  "repository's python/ folder)");
    return 1;
  }
  const char* path = std::getenv("PYTHONPATH");
  const std::string pythonpath = package + (path != nullptr && *path != '\0' ? ":" + std::string(path) : "");
  setenv("PYTHONPATH", pythonpath.c_str(), 1);
  if (!program.empty()) setenv("TESSERA", program.c_str(), 0);  // OGB datasets convert with tessera prep ogb
  std::vector<char*> args{const_cast<char*>(python.c_str()), const_cast<char*>("-m"),
                          const_cast<char*>("tessera.data")};
  for (int k = 2; k < argc; ++k) args.push_back(argv[k]);
  args.push_back(nullptr);
  execv(python.c_str(), args.data());
  std::fprintf(stderr, "tessera: error: data: cannot run %s (%s)\n", python.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace tessera::app
