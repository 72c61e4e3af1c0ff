#pragma once
// Runtime configuration, read from the environment (docs/ARCHITECTURE.md, "Configuration") or set
// in code.
#include <cstdint>
#include <filesystem>

namespace kjit {

enum class Mode {
  jit,      // compile a variant on its first use (default)
  prebuilt, // never compile: a variant missing from every tier is an error
};

struct Config {
  Mode mode = Mode::jit;
  // The user tier (read-write). Default: $XDG_CACHE_HOME/kjit, else ~/.cache/kjit.
  std::filesystem::path cache_dir;
  // The read-only prebuilt tier. Default: <install prefix>/share/kjit/prebuilt; skipped when
  // the directory does not exist.
  std::filesystem::path prebuilt_dir;
  // Ignore every cached entry and recompile (entries are still written).
  bool rebuild = false;
  // The user tier's bound in bytes: a Runtime that wrote entries prunes the least recently used
  // when it ends, down to this. 0: unbounded.
  std::uint64_t cache_size_bytes = 0;

  // KJIT_MODE (jit|prebuilt), KJIT_CACHE_DIR, KJIT_PREBUILT_DIR, KJIT_REBUILD (0|1),
  // KJIT_CACHE_SIZE (megabytes, or with a unit: 500M, 20G).
  // Throws Error(bad_config) naming the variable, its value and what it accepts.
  static Config from_environment();
};

} // namespace kjit
