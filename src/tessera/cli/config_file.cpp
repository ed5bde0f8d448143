// SPDX-License-Identifier: BSD-3-Clause
#include "tessera/cli/config_file.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>

namespace tessera::app {

namespace {

[[noreturn]] void refuse(int line, const std::string& what) {
  throw CLI::ConfigError("line " + std::to_string(line) + ": " + what);
}

bool is_bare_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// TOML's numbers and booleans, which go unquoted (digits may be grouped with '_').
bool is_bare_value(const std::string& text) {
  static const std::regex number(
      R"([+-]?(0|[1-9](_?[0-9])*)(\.[0-9](_?[0-9])*)?([eE][+-]?[0-9](_?[0-9])*)?|[+-]?(inf|nan))");
  return text == "true" || text == "false" || std::regex_match(text, number);
}

void append_utf8(std::string& out, uint32_t code, int line) {
  if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) refuse(line, "\\u escape of an invalid code point");
  if (code < 0x80) {
    out += char(code);
  } else if (code < 0x800) {
    out += char(0xC0 | (code >> 6));
    out += char(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += char(0xE0 | (code >> 12));
    out += char(0x80 | ((code >> 6) & 0x3F));
    out += char(0x80 | (code & 0x3F));
  } else {
    out += char(0xF0 | (code >> 18));
    out += char(0x80 | ((code >> 12) & 0x3F));
    out += char(0x80 | ((code >> 6) & 0x3F));
    out += char(0x80 | (code & 0x3F));
  }
}

// One line of a file, read left to right.
class LineReader {
 public:
  LineReader(const std::string& text, int line) : s_(text), line_(line) {}

  void skip_space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t')) ++at_;
  }
  bool done() const { return at_ >= s_.size() || s_[at_] == '#'; }
  char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
  void expect(char c, const std::string& what) {
    skip_space();
    if (peek() != c) refuse(line_, "expected " + what + (done() ? "" : std::string(" before '") + peek() + "'"));
    ++at_;
  }
  // Nothing but space and a comment left.
  void finish() {
    skip_space();
    if (!done()) refuse(line_, std::string("unexpected '") + s_.substr(at_) + "' after the value");
  }

  std::string key() {
    skip_space();
    if (peek() == '"' || peek() == '\'') return quoted();
    const size_t begin = at_;
    while (at_ < s_.size() && is_bare_key_char(s_[at_])) ++at_;
    if (at_ == begin) refuse(line_, "expected an option name (key = value)");
    return s_.substr(begin, at_ - begin);
  }

  // [NAME] or [NAME.SUB]: the names joined by '.'.
  std::string section() {
    expect('[', "'['");
    std::string name = key();
    for (skip_space(); peek() == '.'; skip_space()) {
      ++at_;
      name += "." + key();
    }
    expect(']', "']' to end the section name");
    return name;
  }

  // A scalar: a quoted string, or a bare number or boolean.
  std::string scalar() {
    skip_space();
    if (peek() == '"' || peek() == '\'') return quoted();
    const size_t begin = at_;
    while (at_ < s_.size() && s_[at_] != ' ' && s_[at_] != '\t' && s_[at_] != '#' && s_[at_] != ',' &&
           s_[at_] != ']')
      ++at_;
    const std::string token = s_.substr(begin, at_ - begin);
    if (token.empty()) refuse(line_, "expected a value");
    if (!is_bare_value(token))
      refuse(line_, "'" + token + "' is not a TOML value (strings are quoted: \"" + token + "\")");
    std::string out;
    for (char c : token)
      if (c != '_') out += c;
    return out;
  }

  // A one-line array of scalars, or a scalar.
  std::vector<std::string> value() {
    skip_space();
    if (peek() != '[') return {scalar()};
    ++at_;
    std::vector<std::string> values;
    skip_space();
    while (peek() != ']') {
      values.push_back(scalar());
      skip_space();
      if (peek() == ',') {
        ++at_;
        skip_space();
      } else if (peek() != ']') {
        refuse(line_, at_ >= s_.size() ? "an array must end on its line with ']'" : "expected ',' or ']'");
      }
    }
    ++at_;
    return values;
  }

 private:
  std::string quoted() {
    const char quote = s_[at_++];
    if (s_.compare(at_, 2, std::string(2, quote)) == 0)
      refuse(line_, "multi-line strings are not supported: give the value on one line");
    std::string out;
    while (at_ < s_.size() && s_[at_] != quote) {
      const char c = s_[at_++];
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t') refuse(line_, "a control character in a string");
      if (c != '\\' || quote == '\'') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) break;
      const char e = s_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'b': out += '\b'; break;
        case 't': out += '\t'; break;
        case 'n': out += '\n'; break;
        case 'f': out += '\f'; break;
        case 'r': out += '\r'; break;
        case 'u':
        case 'U': {
          const size_t digits = e == 'u' ? 4 : 8;
          const std::string hex = s_.substr(at_, digits);
          if (hex.size() != digits || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            refuse(line_, std::string("\\") + e + " needs " + std::to_string(digits) + " hexadecimal digits");
          append_utf8(out, uint32_t(std::strtoul(hex.c_str(), nullptr, 16)), line_);
          at_ += digits;
          break;
        }
        default: refuse(line_, std::string("unknown escape \\") + e + " (a backslash is written \\\\)");
      }
    }
    if (at_ >= s_.size()) refuse(line_, "a string without its closing quote");
    ++at_;
    return out;
  }

  const std::string& s_;
  int line_;
  size_t at_ = 0;
};

std::string dotted(const std::vector<std::string>& chain) {
  std::string out;
  for (const std::string& part : chain) out += (out.empty() ? "" : ".") + part;
  return out;
}

const CLI::App* subcommand_of(const CLI::App* root, const std::vector<std::string>& chain) {
  const CLI::App* app = root;
  for (const std::string& name : chain)
    if (app != nullptr) app = find_subcommand(app, name);
  return app;
}

}  // namespace

const CLI::App* find_subcommand(const CLI::App* app, const std::string& name) {
  for (const CLI::App* sub : app->get_subcommands({}))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

std::string toml_value(const std::string& text) {
  if (is_bare_value(text)) return text;
  std::string out = "\"";
  for (const char c : text) {
    if (c == '\n' || c == '\r')
      throw CLI::ConfigError("a value with a line break cannot be written to a configuration file");
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", unsigned(static_cast<unsigned char>(c)));
      out += escape;
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string TomlConfig::to_config(const CLI::App* app, bool default_also, bool write_description,
                                  std::string prefix) const {
  std::ostringstream out;
  std::vector<std::string> groups = app->get_groups();
  groups.insert(groups.begin(), std::string("Options"));
  bool default_done = false;
  for (const std::string& group : groups) {
    if (group == "Options" || group.empty()) {
      if (default_done) continue;
      default_done = true;
    }
    if (write_description && group != "Options" && !group.empty()) out << "\n# " << group << " Options\n";
    for (const CLI::Option* opt : app->get_options({})) {
      if (!opt->get_configurable()) continue;
      if (opt->get_group() != group && !(group == "Options" && opt->get_group().empty())) continue;
      std::vector<std::string> values = opt->reduced_results();
      const bool flag = opt->get_expected_min() == 0;
      if (values.empty() && default_also) {
        if (!opt->get_default_str().empty())
          values = {opt->get_default_str()};
        else if (flag)
          values = {"false"};
        else if (opt->get_run_callback_for_default())
          values = {""};
      }
      if (values.empty()) continue;
      std::string value;
      try {
        for (const std::string& v : values) value += (value.empty() ? "" : ", ") + toml_value(v);
      } catch (const CLI::ConfigError& e) {
        throw CLI::ConfigError(opt->get_name() + ": " + e.what());
      }
      if (values.size() > 1) value = "[" + value + "]";
      if (write_description && opt->has_description())
        out << "\n# " << CLI::detail::fix_newlines("# ", opt->get_description()) << '\n';
      out << prefix << opt->get_single_name() << '=' << value << '\n';
    }
  }
  return out.str();
}

std::vector<CLI::ConfigItem> TomlConfig::from_config(std::istream& input) const {
  std::vector<CLI::ConfigItem> items;
  std::set<std::string> seen;
  const CLI::App* app = subcommand_of(root_, chain_);
  std::string text;
  for (int line = 1; std::getline(input, text); ++line) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    LineReader r(text, line);
    r.skip_space();
    if (r.done()) continue;
    if (r.peek() == '[') {
      const std::string section = r.section();
      r.finish();
      if (section != dotted(chain_) && section != (chain_.empty() ? "" : chain_.back()))
        refuse(line, "section [" + section + "]: this file gives the options of `tessera " + dotted(chain_) +
                         "`, whose keys go outside a section or under [" + dotted(chain_) + "]");
      continue;
    }
    const std::string key = r.key();
    r.expect('=', "'=' after the option name");
    const std::vector<std::string> values = r.value();
    r.finish();
    if (app != nullptr) {
      const CLI::Option* option = app->get_option_no_throw("--" + key);
      if (option == nullptr || !option->get_configurable())
        refuse(line, "unknown option '" + key + "' for `tessera " + dotted(chain_) + "`");
    }
    if (!seen.insert(key).second) refuse(line, "'" + key + "' is given twice");
    items.push_back(CLI::ConfigItem{chain_, key, values});
    lines_[key] = line;
  }
  return items;
}

std::string TomlConfig::origin_of(const std::string& message) const {
  for (const auto& [key, line] : lines_) {
    // The program's flag (--lr) or the library's name for the option (`lr`).
    const std::string flag = "--" + key, named = "`" + key + "`";
    const bool as_flag = message.compare(0, flag.size(), flag) == 0 &&
                         !(message.size() > flag.size() && is_bare_key_char(message[flag.size()]));  // --lr-min
    if (!as_flag && message.compare(0, named.size(), named) != 0) continue;
    if (given_.count(flag) > 0) continue;  // the command line's value, not the file's
    return file_ + ": line " + std::to_string(line) + ": ";
  }
  return "";
}

}  // namespace tessera::app
