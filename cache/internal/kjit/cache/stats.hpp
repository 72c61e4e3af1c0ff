#pragma once
// What the cache did, kept across processes as ccache keeps its statistics: small JSON files
// in the user tier's stats directory (layout.hpp), one per shard so that concurrent processes
// rarely wait for each other, each rewritten in place under an fcntl OFD lock. A process adds what
// it did when its Runtime ends; memory hits are not counted (that path makes no shared writes).
#include <cstdint>
#include <filesystem>
#include <string>

namespace kjit::cache {

struct CacheCounters {
  std::uint64_t user_hits = 0;       // served from the user tier
  std::uint64_t prebuilt_hits = 0;   // served from the prebuilt tier
  std::uint64_t remote_hits = 0;     // served from a remote (and then written to the user tier)
  std::uint64_t remote_misses = 0;   // asked of a remote that had no (valid) value
  std::uint64_t remote_errors = 0;   // remote operations that failed other than by a timeout
  std::uint64_t remote_timeouts = 0; // remote operations that passed their timeout
  std::uint64_t misses = 0;          // in no tier (each then compiled, or failed to)
  std::uint64_t compiles = 0;        // compiles that succeeded
  double compile_ms = 0;             // spent in the compiler
  double saved_ms = 0;               // the compile time recorded in the entries that hits served

  CacheCounters &operator+=(const CacheCounters &other);
  bool empty() const;
  bool operator==(const CacheCounters &) const = default;
};

// The counters as one JSON object, as a shard holds them and `kjit cache stats --json` prints them:
// {"user_hits": N, ..., "compile_ms": X, "saved_ms": X}.
std::string to_json_text(const CacheCounters &counters);

class StatsFiles {
public:
  explicit StatsFiles(std::filesystem::path directory); // Layout::stats_directory()

  // Adds `counters` to this process's shard. A failure (unwritable directory) is logged at debug
  // level: statistics never fail a compile. Never throws.
  void add(const CacheCounters &counters) const noexcept;
  // The sum over all shards; a missing or unreadable shard counts as zero.
  CacheCounters total() const;
  // Zeroes every shard. Throws Error(cache_io) when one cannot be removed.
  void clear() const;

private:
  std::filesystem::path directory_;
};

} // namespace kjit::cache
