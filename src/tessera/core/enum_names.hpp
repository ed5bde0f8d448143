// SPDX-License-Identifier: BSD-3-Clause
// One name table per enum, declared beside the enum: its values and the names they go by, which the command
// line, the Python bindings, configuration files and messages all read, so a value is named once.
//   inline constexpr EnumName<NormKind> kNormKindNames[] = {{NormKind::None, "none"}, {NormKind::Batch, "batch"}};
// An alias (`alias = true`) is accepted as input and never printed ("fp32" for "f32").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// One value of an enum and a name it goes by.
template <class E>
struct EnumName {
  E value;             ///< the value
  const char* name;    ///< its name
  bool alias = false;  ///< accepted as input, never printed
};

/// The name of `value` in `table` ("?" for a value the table lacks).
template <class E, size_t N>
constexpr const char* name_of(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& entry : table)
    if (entry.value == value && !entry.alias) return entry.name;
  return "?";
}

/// The value `text` names in `table`, or nothing.
template <class E, size_t N>
std::optional<E> value_named(const EnumName<E> (&table)[N], const std::string& text) {
  for (const EnumName<E>& entry : table)
    if (text == entry.name) return entry.value;
  return std::nullopt;
}

/// The names of `table`, aliases left out.
template <class E, size_t N>
std::vector<std::string> names_of(const EnumName<E> (&table)[N]) {
  std::vector<std::string> names;
  for (const EnumName<E>& entry : table)
    if (!entry.alias) names.push_back(entry.name);
  return names;
}

/// The names of `table` as a message lists them: "none, batch or rms".
template <class E, size_t N>
std::string choices_of(const EnumName<E> (&table)[N]) {
  std::string list, last;
  for (const EnumName<E>& entry : table) {
    if (entry.alias) continue;
    if (!last.empty()) list += (list.empty() ? "" : ", ") + last;
    last = entry.name;
  }
  return list.empty() ? last : list + " or " + last;
}

}  // namespace tessera
