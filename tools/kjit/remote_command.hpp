#pragma once
// `kjit cache` on the remote tiers of KJIT_REMOTE_STORAGE (docs/ARCHITECTURE.md, "The tiers"):
// `ls --remote` and `verify --remote [--fix]` walk what a remote holds under kjit's names (SCAN);
// `push` publishes local entries without overwriting; `pull` copies remote entries into the user
// tier after verifying each as a remote hit is verified.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace kjit::cli {

struct RemoteCacheArgs {
  bool remote = false;           // ls, verify: the remotes rather than the local tiers
  std::size_t limit = 1000;      // ls --remote: rows shown at most (all are counted)
  std::string tier = "user";     // push: user or prebuilt
  std::string target;            // pull: the target of the keys given, or only this target's
  std::vector<std::string> keys; // pull: these keys (64 hex digits); none: every record
};

// Adds --remote (and --limit) to `cache ls` and `cache verify`, and the `push` and `pull`
// subcommands, to `cache`.
void add_remote_cache_commands(CLI::App &cache, RemoteCacheArgs &args, bool &as_json);

// Whether the cache subcommand given is one of these (push, pull, or ls/verify with --remote).
bool is_remote_cache_command(const CLI::App &cache, const RemoteCacheArgs &args);

// Runs it. Exit status: 0; 1 when verify found bad values or pull rejected or missed some; throws
// kjit::Error for bad input or an unreachable remote (the caller prints it and exits 2).
int run_remote_cache(const CLI::App &cache, const RemoteCacheArgs &args, bool as_json);

} // namespace kjit::cli
