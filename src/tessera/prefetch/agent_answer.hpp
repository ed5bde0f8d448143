// SPDX-License-Identifier: BSD-3-Clause
// The one line a prefetch agent answers per window: {"evict": true|false} (extra keys are ignored).
// Kept apart from the controller so the fuzzing harness can reach it without a process. Not installed.
#pragma once

#include <optional>
#include <string_view>

namespace tessera {

/// The answer's "evict" value, or nothing when the line is not such an object.
std::optional<bool> parse_agent_answer(std::string_view line);

}  // namespace tessera
