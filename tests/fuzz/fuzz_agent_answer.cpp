// SPDX-License-Identifier: BSD-3-Clause
// A prefetch agent's answer line, as the external controller parses it: any bytes give an answer or
// "malformed", never a crash or an exception.
#include <cstdint>
#include <string_view>

#include "tessera/prefetch/agent_answer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tessera::parse_agent_answer(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
