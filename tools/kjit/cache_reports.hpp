#pragma once
// What each `kjit cache` command computes (cache_command.cpp gathers it), and its two renderings
// (cache_render.cpp): the --json document, which kjit/c.h's kjit_cache_* return too, and the
// table a person reads. A command never prints while it gathers.
#include "json_output.hpp"

#include "kjit/cache/archive.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/cache/remote.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/jit/kernel_resources.hpp"

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace kjit::cli {

// ---- ls ---------------------------------------------------------------------------------------

struct TierEntry {
  cache::ListedEntry listed;
  std::string tier; // "user", "prebuilt"
};

// `ls`: the local tiers' entries, shown in `order` (indices into `entries`, sorted as asked).
struct LocalListing {
  std::vector<TierEntry> entries;
  std::vector<std::size_t> order;
};

// `ls --remote`: each remote's count of entries and the first `limit` of them.
struct RemoteListing {
  struct Remote {
    std::string description;
    std::size_t entries = 0;
    std::vector<cache::RecordKey> shown;
  };
  std::vector<Remote> remotes;
  std::size_t limit = 0;
};

// ---- stats ------------------------------------------------------------------------------------

struct TierTotals {
  std::string tier;
  std::string target;
  std::size_t entries = 0;
  std::uint64_t bytes = 0;
};

struct CacheStats {
  std::string cache_dir;
  std::string prebuilt_dir;
  bool prebuilt_present = false;
  std::vector<std::string> prebuilt_path; // the tiers searched before kjit's own
  std::vector<TierTotals> tiers;          // by tier, then target
  cache::CacheCounters counters;
};

// ---- show -------------------------------------------------------------------------------------

struct ShownEntry {
  cache::StoredEntry stored;
  std::string tier;
  std::string problem;                      // "" when the entry is valid
  std::optional<cache::Entry> entry;        // when it is
  std::optional<cache::EntryHeader> header; // its header, also from an invalid entry
  std::string header_problem;               // why there is no header
  std::optional<std::vector<jit::KernelResources>> resources; // what its code object records
};

// ---- verify -----------------------------------------------------------------------------------

struct BadValue {
  std::string key; // 64 hex digits
  std::string target;
  std::string holder;   // the tier ("user") or the remote's description
  std::string location; // the entry's path, or the remote record's name
  std::string problem;
  std::string action; // what --fix did: "none", "removed", "kept (read-only tier)"...
};

// `verify`, or `verify --remote` (`remote`): the entries or remote values checked, the bad ones.
struct VerifyReport {
  bool remote = false;
  std::size_t checked = 0;
  std::vector<BadValue> bad;
};

// ---- export, import ---------------------------------------------------------------------------

struct ArchiveReport {
  bool exported = false; // else imported
  std::string archive;
  cache::ArchiveSummary summary;
};

// ---- push, pull -------------------------------------------------------------------------------

struct PushReport {
  struct Remote {
    std::string description;
    std::size_t stored = 0;
    std::size_t already_present = 0;
  };
  std::string tier;
  std::size_t entries = 0; // valid entries published
  std::size_t invalid = 0; // left out
  std::vector<cache::RecordKey> missing;
  std::vector<Remote> remotes; // the writable ones
};

struct PullReport {
  struct Rejected {
    cache::RecordKey record;
    std::string problem;
  };
  std::string tier;
  std::string destination; // the tier's directory
  std::size_t pulled = 0;
  std::size_t already_present = 0;
  std::vector<Rejected> rejected;
  std::vector<cache::RecordKey> missing;
};

// ---- the renderings -----------------------------------------------------------------------------

nlohmann::json to_json(const LocalListing &listing);
void print_table(const LocalListing &listing, std::ostream &out);
nlohmann::json to_json(const RemoteListing &listing);
void print_table(const RemoteListing &listing, std::ostream &out);
nlohmann::json to_json(const CacheStats &stats);
void print_table(const CacheStats &stats, std::ostream &out);
nlohmann::json to_json(const ShownEntry &shown);
void print_table(const ShownEntry &shown, std::ostream &out);
nlohmann::json to_json(const VerifyReport &report);
void print_table(const VerifyReport &report, std::ostream &out);
nlohmann::json to_json(const cache::PruneResult &pruned);
void print_table(const cache::PruneResult &pruned, std::ostream &out);
nlohmann::json to_json(const ArchiveReport &report);
void print_table(const ArchiveReport &report, std::ostream &out);
nlohmann::json to_json(const PushReport &report);
void print_table(const PushReport &report, std::ostream &out);
nlohmann::json to_json(const PullReport &report);
void print_table(const PullReport &report, std::ostream &out);

// Writes `result` to `out` as its JSON document (`as_json`) or its table.
template <typename Result> void render(const Result &result, bool as_json, std::ostream &out) {
  if (as_json)
    print_json(out, to_json(result));
  else
    print_table(result, out);
}

} // namespace kjit::cli
