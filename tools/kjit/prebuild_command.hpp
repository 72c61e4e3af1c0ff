#pragma once
// `kjit prebuild`: compile sets of variants ahead of time into a prebuilt tier
// (docs/ARCHITECTURE.md, "Prebuilding").
#include <CLI/CLI.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace kjit::cli {

struct PrebuildArgs {
  std::string targets;           // "gfx90a;sm_90"; default GPU_ARCHS
  std::string level;             // 1|2|3; default PREBUILD_KERNELS, else 1 (built-in sets)
  std::optional<int> jobs;       // default MAX_JOBS, else cores and free memory
  std::string out;               // default the configured prebuilt tier
  std::vector<std::string> sets; // set files instead of the built-in sets
  std::size_t max_batch = 16;    // variants per program at most (1: no batching)
  std::string shard;             // "K/N": this machine's share of the variants; empty: all
  std::string tuned;             // a tuning table export: exactly its winners, and its records
  bool skip_unsupported = false; // drop (and warn about) targets no installed compiler builds
  bool verbose = false;          // every failure's compiler log, not only each template's first
  std::string worker;            // the `kjit` command the workers run; empty: this program
};

// Adds `prebuild` and the hidden worker command it starts to `app`; returns {prebuild, worker}.
std::pair<CLI::App *, CLI::App *> add_prebuild_command(CLI::App &app, PrebuildArgs &args,
                                                       bool &as_json);

// Exit status: 0 built or up to date, 1 some variants failed to compile (listed on stderr; with
// `as_json` in the document too). What it prints goes to `out` (std::cout for the command; a
// string for kjit/c.h's kjit_prebuild). Throws kjit::Error for bad input (the caller prints it
// and exits 2).
int run_prebuild(const PrebuildArgs &args, bool as_json, std::ostream &out);

// The worker: plans as run_prebuild does, then builds the batches whose numbers arrive on stdin,
// one JSON line per batch on stdout.
int run_prebuild_worker(const PrebuildArgs &args);

} // namespace kjit::cli
