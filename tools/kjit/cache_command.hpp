#pragma once
// `kjit cache ...`: inspect and manage the user and prebuilt tiers (docs/ARCHITECTURE.md, "The
// command line").
#include "explain_command.hpp"

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

namespace kjit::cli {

struct CacheArgs {
  std::string target;        // ls: only this target
  std::string template_name; // ls: only this template
  std::string sort = "recent";
  std::string key_prefix; // show
  bool disassemble = false;
  bool fix = false;       // verify
  std::string max_size;   // prune
  std::string older_than; // prune
  std::string archive;    // export, import
  ExplainArgs explain;
};

// Adds `cache` and its subcommands to `app`, storing their options in `args`; returns it.
CLI::App *add_cache_command(CLI::App &app, CacheArgs &args, bool &as_json);

// Runs the subcommand of `cache` that was given. Exit status: 0, 1 when verify found bad
// entries, or throws kjit::Error for bad input (the caller prints it and exits 2).
int run_cache(const CLI::App &cache, const CacheArgs &args, bool as_json);

// The same for the subcommand named `command` ("ls", "stats", "verify"...), writing what it prints
// (with `as_json`, the one JSON document) to `out`: for callers without a command line, kjit/c.h's
// kjit_cache_*. Throws kjit::Error(bad_usage) for a name that is no subcommand.
int run_cache_command(const std::string &command, const CacheArgs &args, bool as_json,
                      std::ostream &out);

} // namespace kjit::cli
