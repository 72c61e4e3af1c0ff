#pragma once
// The record store of code entries (record_store.hpp, entry_kind.hpp) as the Runtime uses it: the
// tiers a Config names, the stand-ins of serving targets, the code object versions a device loads,
// and the header manifests of variants with include directories. The Runtime asks it for keys and
// never names a tier itself.
//
// Every entry it returns is verified for the key and target asked for and holds one kernel; an
// entry that fails that in one tier is a miss there, warned about once, and the next tier is asked.
#include "entry_kind.hpp"
#include "kjit/cache/entry.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/runtime/local_tiers.hpp"
#include "record_store.hpp"
#include "remote_tier.hpp"

#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

namespace kjit {

// A code object version limit that every code object meets: no device to load it asks less.
inline constexpr int any_code_object = std::numeric_limits<int>::max();

using Found = Stored<cache::Entry>;

class TieredStore {
public:
  explicit TieredStore(const Config &config);

  // The prebuilt tiers in lookup order (LocalTiers::prebuilt_tiers).
  std::vector<const cache::DiskStore *> prebuilt() const { return local_.prebuilt_tiers(); }
  // The user tier while it is usable: none without a cache directory or after it failed.
  const cache::DiskStore *user() const;

  // An entry built for another target whose code also runs on the one asked for (a serving
  // target: jit::serving_targets): its key and target.
  using StandIn = EntryKey;
  // Made only when the local tiers miss the key itself, since each stand-in costs a key.
  using MakeStandIns = std::function<std::vector<StandIn>()>;

  // The prebuilt tier then the user tier for the key, then for each stand-in in order; then the
  // remote, whose hit is kept in the user tier. An AMD entry whose code object version is newer
  // than `newest_code_object` (what the device's runtime loads: a gfx11-generic entry is v6, which
  // HIP loads from ROCm 6.4) is a miss, warned about once per process.
  // With `include_dirs`, keys are base keys: each tier's header manifest names the entry
  // (header_manifests.hpp), the remote's too; stand-ins are not asked of the remote.
  std::optional<Found> find(const cache::Key &key, const std::string &target,
                            const MakeStandIns &stand_ins, int newest_code_object = any_code_object,
                            const std::vector<std::string> &include_dirs = {});

  // What each tier holds under `key`, in find()'s order and without counting, logging or touching
  // anything: Runtime::explain. Where no local tier holds the key, the stand-ins a local tier holds
  // are listed too.
  std::vector<TierLookup> lookups(const cache::Key &key, const std::string &target,
                                  const MakeStandIns &stand_ins) const;
  // The local tiers with the names listings give them.
  const LocalTiers &local() const { return local_; }

  // Makes one compile of a key per machine and per fleet (RecordStore::Making).
  using Compiling = RecordStore<EntryKind>::Making;
  // Takes the key's file lock, waiting at most FleetWait::wait; with `reuse` (not KJIT_REBUILD),
  // reads the user tier again under it and takes the remote lease or waits for the node that holds
  // it. A rejected user entry is removed, so that a directory planted under its name does not cost
  // the process its disk tier.
  // With `include_dirs`, `key` is a base key, read through the user tier's manifest, and the
  // remote is not leased (one compile per machine, not per fleet).
  Compiling begin_compile(const cache::Key &key, const std::string &target, bool reuse,
                          const std::vector<std::string> &include_dirs = {});
  // Publishes a compiled entry: to the user tier (when it is usable: `compiling` holds its lock, or
  // the wait for it ran out), and to the remote. Returns where it is on disk, or empty.
  std::filesystem::path publish(const Compiling &compiling, const cache::Entry &entry);
  // Publishes the entry of a variant with include directories (its key the full one) to the user
  // tier when `compiling` holds the lock of `base`, and to the remote, adding `headers` to the
  // manifest of `base` in each. Returns where the entry is on disk, or empty.
  std::filesystem::path publish(const Compiling &compiling, const cache::Entry &entry,
                                const cache::Key &base, std::uint32_t dirs,
                                std::vector<cache::RecordedHeader> headers);

  // The remote_* counters.
  cache::CacheCounters remote_counters() const { return remote_.counters(); }
  // A JIT Runtime's end: adds `counters` to the user tier's statistics (creating them). Does
  // nothing without a usable user tier.
  void add_statistics(const cache::CacheCounters &counters) const;
  // A prebuilt-mode Runtime's end, which creates nothing: adds `counters` to the user tier's
  // statistics where that tier exists and this process may write it, and otherwise says (at info
  // level) they go uncounted.
  void count(const cache::CacheCounters &counters) const;
  // Prunes the user tier to `max_bytes` (KJIT_CACHE_SIZE), least recently used first; a failure is
  // a warning. Does nothing without a usable user tier.
  void prune(std::uint64_t max_bytes) const;

private:
  std::optional<Found> find_remote(const cache::Key &base, const std::string &target,
                                   int newest_code_object,
                                   const std::vector<std::string> &include_dirs);

  LocalTiers local_;
  RemoteTier remote_;
  FleetWait fleet_;
  RecordStore<EntryKind> store_;
};

} // namespace kjit
