#pragma once
// Sample cache data: fixed key inputs (pinned in tests/cache/key_test.cpp, printed by its key
// printer) and valid entries, for the tests of the cache and of what stores entries.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/key.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace kjit::testing {

inline constexpr const char *kTarget = "gfx90a:sramecc+:xnack-";

// A realistic field list whose key is pinned in key_test.cpp and printed by key_printer.cpp.
inline std::vector<cache::KeyField> golden_key_fields() {
  return {{"format", "1"},
          {"template", "scale"},
          {"source", "sha256:0123"},
          {"param:T", "float"},
          {"options", "-O3 -ffast-math"},
          {"target", kTarget},
          {"compiler", "hiprtc 5.2.21153"}};
}

// Code bytes that depend on their length only, so a reader can check any entry it sees.
inline std::vector<std::byte> sample_code(std::size_t size) {
  std::vector<std::byte> code(size);
  for (std::size_t i = 0; i < size; ++i)
    code[i] = static_cast<std::byte>((i * 31 + size) & 0xFF);
  return code;
}

// A valid entry whose key is computed from its key inputs, as the runtime would write it.
inline cache::Entry sample_entry(const std::string &seed, const std::string &target = kTarget,
                                 std::size_t code_size = 64) {
  cache::KeyBuilder builder;
  builder.add("template", "scale").add("seed", seed).add("target", target);
  cache::Entry entry;
  entry.header.key = builder.finish();
  entry.header.target = target;
  entry.header.template_name = "scale";
  entry.header.parameters = {{"T", "float"}, {"N", 256}};
  entry.header.key_inputs = builder.fields();
  entry.header.kernels = {{"scale<float, 256>", "_Z5scaleIfLi256EEvPT_S1_i"}};
  entry.header.compiler = "hiprtc 5.2.21153";
  entry.header.created_unix = 1700000000;
  entry.header.compile_ms = 373.25;
  entry.code = sample_code(code_size);
  return entry;
}

} // namespace kjit::testing
