#pragma once
// The cascade of tiers below the Runtime's memory (docs/ARCHITECTURE.md, "The tiers"): prebuilt,
// user, remote; which is asked first, what a hit in one is copied to, and where a compile is
// published. The Runtime asks it for keys and never names a tier itself.
//
// Every entry it returns is verified for the key and target asked for and holds one kernel; an
// entry that fails that in one tier is a miss there, warned about once, and the next tier is asked.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/file_lock.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime/local_tiers.hpp"
#include "kjit/runtime/runtime.hpp"
#include "remote_tier.hpp"

#include <atomic>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

namespace kjit {

// A code object version limit that every code object meets: no device to load it asks less.
inline constexpr int any_code_object = std::numeric_limits<int>::max();

struct Found {
  cache::Entry entry;
  Origin origin;
  std::filesystem::path path; // where it is on disk; empty when it lives in memory only
};

class TieredStore {
public:
  explicit TieredStore(const Config &config);

  // The prebuilt tiers in lookup order (LocalTiers::prebuilt_tiers).
  std::vector<const cache::DiskStore *> prebuilt() const { return local_.prebuilt_tiers(); }
  // The user tier while it is usable: none without a cache directory or after it failed.
  const cache::DiskStore *user() const;

  // An entry built for another target whose code also runs on the one asked for (a serving
  // target: jit::serving_targets): its key and target.
  struct StandIn {
    cache::Key key;
    std::string target;
  };
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

  // Makes one compile of `key` per machine and per fleet. While held, the key's file lock in the
  // user tier and the remote lease (when this process took it) are this process's.
  class Compiling {
  public:
    // What another process or node published while this one waited: then nothing to compile.
    std::optional<Found> published;

  private:
    friend class TieredStore;
    std::optional<cache::FileLock> lock_;
    std::unique_ptr<RemoteTier::Claim> claim_;
  };
  // Takes the key's file lock; with `reuse` (not KJIT_REBUILD), reads the user tier again under it
  // and takes the remote lease or waits for the node that holds it. A rejected user entry is
  // removed, so that a directory planted under its name does not cost the process its disk tier.
  // With `include_dirs`, `key` is a base key, read through the user tier's manifest, and the
  // remote is not leased (one compile per machine, not per fleet).
  Compiling begin_compile(const cache::Key &key, const std::string &target, bool reuse,
                          const std::vector<std::string> &include_dirs = {});
  // Publishes a compiled entry: to the user tier when `compiling` holds its lock, and to the
  // remote. Returns where it is on disk, or empty.
  std::filesystem::path publish(const Compiling &compiling, const cache::Entry &entry);
  // Publishes the entry of a variant with include directories (its key the full one) to the user
  // tier when `compiling` holds the lock of `base`, and to the remote, adding `headers` to the
  // manifest of `base` in each. Returns where the entry is on disk, or empty.
  std::filesystem::path publish(const Compiling &compiling, const cache::Entry &entry,
                                const cache::Key &base, std::uint32_t dirs,
                                std::vector<cache::RecordedHeader> headers);

  // The remote_* counters.
  cache::CacheCounters remote_counters() const { return remote_.counters(); }
  // A prebuilt-mode Runtime's end: adds `counters` to the user tier's statistics where that tier
  // exists and this process may write it, and otherwise says (at info level) they go uncounted.
  void count(const cache::CacheCounters &counters) const;
  // Adds `counters` to the user tier's statistics and, when `max_bytes` is not 0, prunes it to
  // that size. Does nothing without a usable user tier.
  void close(const cache::CacheCounters &counters, std::uint64_t max_bytes);

private:
  std::optional<Found> find_local(const cache::Key &key, const std::string &target,
                                  int newest_code_object,
                                  const std::vector<std::string> &include_dirs);
  std::optional<Found> find_remote(const cache::Key &base, const std::string &target,
                                   int newest_code_object,
                                   const std::vector<std::string> &include_dirs);
  std::optional<Found> read(const cache::DiskStore &store, const cache::Key &key,
                            const std::string &target, Origin origin,
                            const std::vector<std::string> &include_dirs);
  std::filesystem::path keep(const cache::Entry &entry);
  Found promoted(cache::Entry entry);
  void disk_unusable(const Error &error);

  LocalTiers local_;
  RemoteTier remote_;
  std::atomic<bool> user_disabled_ = false;
};

} // namespace kjit
