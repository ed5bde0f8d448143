// SPDX-License-Identifier: BSD-3-Clause
#include "agent_answer.hpp"

#include <nlohmann/json.hpp>

namespace tessera {

std::optional<bool> parse_agent_answer(std::string_view line) {
  const nlohmann::json answer = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) return std::nullopt;
  const auto evict = answer.find("evict");
  if (evict == answer.end() || !evict->is_boolean()) return std::nullopt;
  return evict->get<bool>();
}

}  // namespace tessera
