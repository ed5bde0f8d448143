// SPDX-License-Identifier: BSD-3-Clause
// What the command line tells a user who mistyped or asks what this build is: an unknown subcommand or
// option named with the closest valid spelling and the right --help, and `tessera --version`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tessera::app {

/// "" when every subcommand and long option in `args` (the program's name left out) is known to `app`;
/// else one line naming the first unknown word, the closest valid spelling when one is near, and the
/// --help of the subcommand it was given to.
std::string unknown_word_message(const CLI::App& app, const std::vector<std::string>& args);

/// The closest of `candidates` to `word` (edit distance at most a third of its length, at least 2), or "".
std::string closest_spelling(const std::string& word, const std::vector<std::string>& candidates);

/// "0.x.y (git abcdef012345)": Tessera's version and the commit it was configured at.
std::string version_short();

/// `tessera --version`: Tessera's version and git commit, Kokkos' version and backends, MPI, HDF5 and the
/// vendor libraries this build uses.
std::string version_text();

}  // namespace tessera::app
