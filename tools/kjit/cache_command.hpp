#pragma once
// `kjit cache ...`: inspect and manage the user and prebuilt tiers, and the remote tiers of
// KJIT_REMOTE_STORAGE (docs/ARCHITECTURE.md, "The command line"). `ls --remote` and
// `verify --remote [--fix]` walk what a remote holds under kjit's names (SCAN); `push` publishes
// entries of a local tier (user or prebuilt) without overwriting; `pull` copies remote entries
// into a local tier after verifying each as a remote hit is verified. Both take a subset:
// KEY... --target T, or every entry of --target T.
#include "explain_command.hpp"

#include <CLI/CLI.hpp>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace kjit::cli {

struct CacheArgs {
  std::string target;        // ls: only this target; push, pull: the keys' target
  std::string template_name; // ls: only this template
  std::string sort = "recent";
  bool remote = false;      // ls, verify: the remotes rather than the local tiers
  std::size_t limit = 1000; // ls --remote: rows shown at most (all are counted)
  std::string key_prefix;   // show
  bool disassemble = false;
  bool fix = false;              // verify
  std::string max_size;          // prune
  std::string older_than;        // prune
  std::string archive;           // export, import
  std::string tier = "user";     // push, pull: the local tier, user or prebuilt
  std::vector<std::string> keys; // push, pull: these keys (64 hex digits); none: every entry
  ExplainArgs explain;
};

// Adds `cache` and its subcommands to `app`, storing their options in `args`; returns it.
CLI::App *add_cache_command(CLI::App &app, CacheArgs &args, bool &as_json);

// Runs the subcommand of `cache` that was given. Exit status: 0; 1 when show or verify found bad
// entries or values, pull rejected or missed some, or push missed some of the keys named; throws
// kjit::Error for bad input or an unreachable remote (the caller prints it and exits 2).
int run_cache(const CLI::App &cache, const CacheArgs &args, bool as_json);

// The same for the subcommand named `command` ("ls", "stats", "verify"...), writing what it prints
// (with `as_json`, the one JSON document) to `out`: for callers without a command line, kjit/c.h's
// kjit_cache_*. Throws kjit::Error(bad_usage) for a name that is no subcommand.
int run_cache_command(const std::string &command, const CacheArgs &args, bool as_json,
                      std::ostream &out);

} // namespace kjit::cli
