// SPDX-License-Identifier: BSD-3-Clause
// --config files: a subcommand's options as TOML key = value lines (keys are the long option names without
// dashes), read and written by one strict reader and writer, so that what --print-config writes reads back
// to the same options for any string (quotes, '#', backslashes, unicode; a value with a line break is
// refused). Every problem names the line.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tessera::app {

/// CLI11's configuration formatter for Tessera's TOML files.
class TomlConfig : public CLI::ConfigBase {
 public:
  /// Keys outside a section, and those of [NAME] for the subcommand chain's NAME, belong to `chain`
  /// (e.g. {"train"}); other sections are refused. `root` is the program's app: unknown keys are named
  /// with their line.
  /// `given`: the long options on the command line, which override the file's.
  void select(const CLI::App* root, std::vector<std::string> chain, std::string file,
              std::set<std::string> given) {
    root_ = root;
    chain_ = std::move(chain);
    file_ = std::move(file);
    given_ = std::move(given);
  }
  /// "FILE: line N: " when `message` is about an option (it starts with --NAME or `NAME`) whose value came from
  /// line N of the file read last, else "".
  std::string origin_of(const std::string& message) const;
  /// The options of `app` as TOML (its groups as comments when write_description), each value quoted and
  /// escaped as a TOML basic string unless it is a number or a boolean. Throws CLI::ConfigError for a value
  /// holding a line break or another control character.
  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;
  /// Parses TOML key = value lines (basic and literal strings, numbers, booleans, one-line arrays,
  /// comments). Throws CLI::ConfigError "line N: ..." on anything else.
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

 private:
  const CLI::App* root_ = nullptr;
  std::vector<std::string> chain_;
  std::string file_;
  std::set<std::string> given_;
  mutable std::map<std::string, int> lines_;  // key -> its line in the file read last
};

/// The subcommand of `app` named `name`, or null.
const CLI::App* find_subcommand(const CLI::App* app, const std::string& name);

/// `text` as a TOML value: bare for integers, floats and booleans, else a basic string with \" \\ and
/// four-hex-digit \u escapes. Throws CLI::ConfigError for text with a line break or another control character.
std::string toml_value(const std::string& text);

}  // namespace tessera::app
