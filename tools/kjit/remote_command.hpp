#pragma once
// `kjit cache` on the remote tiers of KJIT_REMOTE_STORAGE (docs/ARCHITECTURE.md, "The tiers"):
// `ls --remote` and `verify --remote [--fix]` walk what a remote holds under kjit's names (SCAN);
// `push` publishes entries of a local tier (user or prebuilt) without overwriting; `pull` copies
// remote entries into a local tier after verifying each as a remote hit is verified. Both take a
// subset: KEY... --target T, or every entry of --target T.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace kjit::cli {

struct RemoteCacheArgs {
  bool remote = false;           // ls, verify: the remotes rather than the local tiers
  std::size_t limit = 1000;      // ls --remote: rows shown at most (all are counted)
  std::string tier = "user";     // push, pull: the local tier, user or prebuilt
  std::string target;            // push, pull: the target of the keys given, or only its entries
  std::vector<std::string> keys; // push, pull: these keys (64 hex digits); none: every entry
};

// Adds --remote (and --limit) to `cache ls` and `cache verify`, and the `push` and `pull`
// subcommands, to `cache`.
void add_remote_cache_commands(CLI::App &cache, RemoteCacheArgs &args, bool &as_json);

// Whether the cache subcommand given is one of these (push, pull, or ls/verify with --remote).
bool is_remote_cache_command(const CLI::App &cache, const RemoteCacheArgs &args);

// Runs it. Exit status: 0; 1 when verify found bad values, pull rejected or missed some, or push
// missed some of the keys named; throws
// kjit::Error for bad input or an unreachable remote (the caller prints it and exits 2).
int run_remote_cache(const CLI::App &cache, const RemoteCacheArgs &args, bool as_json);

} // namespace kjit::cli
