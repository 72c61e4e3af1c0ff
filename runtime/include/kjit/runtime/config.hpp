#pragma once
// Runtime configuration, read from the environment (docs/ARCHITECTURE.md, "Configuration") or set
// in code.
#include "kjit/vendor.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kjit {

enum class Mode {
  jit,      // compile a variant on its first use (default)
  prebuilt, // never compile: a variant missing from every tier is an error
};

// How the fleet single-flight waits: a lease lives `lease_ttl` unless renewed (a holder renews it
// every third of that while it compiles), and a process that finds the lease held polls for the
// entry every `poll` for at most `wait`, then compiles itself.
struct FleetWait {
  std::chrono::milliseconds lease_ttl{10'000};
  std::chrono::milliseconds wait{60'000};
  std::chrono::milliseconds poll{50};
};

namespace jit {
class Compiler;
}

struct Config {
  Mode mode = Mode::jit;
  // The user tier (read-write). Default: $XDG_CACHE_HOME/kjit, else ~/.cache/kjit.
  std::filesystem::path cache_dir;
  // The read-only prebuilt tier. Default: <install prefix>/share/kjit/prebuilt; skipped when
  // the directory does not exist.
  std::filesystem::path prebuilt_dir;
  // More read-only prebuilt tiers, searched in this order before prebuilt_dir (kjit's own tier,
  // always last): KJIT_PREBUILT_PATH's, then those a library adds (its installed tier, found
  // relative to its own location). Each is skipped when its directory does not exist.
  std::vector<std::filesystem::path> prebuilt_dirs;
  // Every prebuilt tier in lookup order: prebuilt_dirs, then prebuilt_dir (each once, none empty).
  std::vector<std::filesystem::path> prebuilt_tiers() const;
  // Header library directories every template of this Runtime may include from, searched after
  // each template's own (TemplateOptions::include_dirs): a library's own include tree.
  // KJIT_INCLUDE_PATH (':'-separated). A Runtime checks each when it is made (Error(bad_config)
  // for one that is not a readable directory) and keeps it as an absolute path.
  std::vector<std::string> include_dirs;
  // Ignore every cached entry and recompile (entries are still written).
  bool rebuild = false;
  // The user tier's bound in bytes: a Runtime that wrote entries prunes the least recently used
  // when it ends, down to this. 0: unbounded.
  std::uint64_t cache_size_bytes = 0;

  // The remote tiers, asked in order after the local ones; a compile publishes to each writable
  // one. Each is a URL as KJIT_REMOTE_STORAGE takes them ("redis://host:6379|read-only"), opened
  // by the backend of its scheme when a Runtime is made: Error(bad_config) then for a URL of no
  // known scheme or one its backend cannot take. Empty: none.
  std::vector<std::string> remote_urls;
  // The fleet secret every remote value is signed with and checked against
  // (KJIT_REMOTE_SECRET_FILE's content). None: values are neither signed nor checked.
  std::optional<std::string> remote_secret;
  FleetWait fleet;
  // Where compilers come from. Empty: the vendor libraries (hiprtc, NVRTC), loaded once per
  // process. Tests give their own; the compilers must outlive the Runtime.
  std::function<const jit::Compiler &(Vendor)> compilers;
  // The newest AMDGPU code object version a cached entry may have to be used: newer entries are
  // misses. Empty: no limit of the Runtime's own; a kernel for a device also takes the device's
  // (Device::newest_code_object_version). Set by tests, which have no AMD device.
  std::optional<int> newest_code_object_version;

  // KJIT_MODE (jit|prebuilt), KJIT_CACHE_DIR, KJIT_PREBUILT_DIR, KJIT_PREBUILT_PATH
  // (':'-separated prebuilt_dirs), KJIT_INCLUDE_PATH (':'-separated include_dirs), KJIT_REBUILD
  // (0|1),
  // KJIT_CACHE_SIZE (megabytes, or with a unit: 500M, 20G), KJIT_REMOTE_STORAGE (remote_urls,
  // separated by spaces or tabs, each checked now) and KJIT_REMOTE_SECRET_FILE (remote_secret),
  // KJIT_REMOTE_LEASE_MS and KJIT_REMOTE_WAIT_MS (FleetWait's lease_ttl and wait).
  // Throws Error(bad_config) naming the variable, its value and what it accepts.
  static Config from_environment();
};

} // namespace kjit
