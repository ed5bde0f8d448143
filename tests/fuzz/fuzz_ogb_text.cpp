// SPDX-License-Identifier: BSD-3-Clause
// The OGB text reader: gzip or plain CSV through GzipLineReader, split into fields, every field parsed as
// an integer and as a finite float, as the OGB converter does. tessera::Error is the expected answer to
// bad input; anything else (a crash, a sanitizer report, another exception) is a finding.
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_input_file.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/text_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tessera_fuzz::write_input(data, size, ".csv.gz");
  try {
    tessera::GzipLineReader reader(path);
    std::string_view line;
    std::vector<std::string_view> fields;
    while (reader.next(line)) {
      tessera::split_csv(line, fields);
      for (size_t c = 0; c < fields.size(); ++c) {
        try {
          (void)tessera::parse_int(fields[c], reader, c);
        } catch (const tessera::Error&) {
        }
        try {
          (void)tessera::parse_finite_float(fields[c], reader, c);
        } catch (const tessera::Error&) {
        }
      }
    }
    (void)reader.fraction_read();
  } catch (const tessera::Error&) {
  }
  try {
    (void)tessera::read_int_column(path);
  } catch (const tessera::Error&) {
  }
  return 0;
}
