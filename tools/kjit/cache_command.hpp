#pragma once
// `kjit cache ...`: inspect and manage the user and prebuilt tiers (docs/ARCHITECTURE.md, "The
// command line").
#include "explain_command.hpp"

#include <CLI/CLI.hpp>
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

} // namespace kjit::cli
