#pragma once
// The Config of a test's Runtime that sees no cache but its own: the user tier in `dir`, and a
// prebuilt tier that does not exist (so an installed kjit's prebuilt entries never answer).
#include "kjit/runtime/config.hpp"
#include "tests/support/temp_dir.hpp"

namespace kjit::testing {

inline Config private_config(const TempDir &dir) {
  Config config;
  config.cache_dir = dir / "cache";
  config.prebuilt_dir = dir / "no-prebuilt";
  return config;
}

} // namespace kjit::testing
