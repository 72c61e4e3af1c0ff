#include "tiered_store.hpp"

#include "header_manifests.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/elf.hpp"
#include "kjit/log.hpp"
#include "kjit/runtime/remotes.hpp"

#include <unistd.h>

#include <algorithm>

namespace kjit {

TieredStore::TieredStore(const Config &config)
    : local_(config), remote_(open_remotes(config), config.fleet), fleet_(config.fleet),
      store_({}, local_.prebuilt_tiers(), local_.user ? std::optional(&*local_.user) : std::nullopt,
             remote_, config.fleet) {
  if (!local_.user)
    log().warn("no cache directory (HOME and KJIT_CACHE_DIR unset): variants stay in memory");
}

const cache::DiskStore *TieredStore::user() const {
  const EntryKind::Tier *user = store_.user();
  return user ? *user : nullptr;
}

namespace {

// Whether the device's runtime loads `entry`'s code object. One warning per process and target:
// a tier built for a generic target misses on every variant under an old runtime, and one line
// says why.
bool loadable(const cache::Entry &entry, const std::filesystem::path &path,
              int newest_code_object) {
  if (newest_code_object == any_code_object)
    return true;
  const std::optional<jit::ElfSummary> elf = jit::read_elf(entry.code);
  const std::optional<int> version = elf ? jit::amdgpu_code_object_version(*elf) : std::nullopt;
  if (!version || *version <= newest_code_object)
    return true;
  if (first_warning_about("code object version of " + entry.header.target))
    log().warn("ignoring cache entry {} for {}: its code object is version {}, and the device's "
               "runtime loads up to version {} (generic targets need version 6: ROCm 6.4 or "
               "later); the other {} entries are ignored without a warning",
               path.empty() ? std::string("from the remote") : path.string(), entry.header.target,
               *version, newest_code_object, entry.header.target);
  return false;
}

} // namespace

std::vector<TierLookup> TieredStore::lookups(const cache::Key &key, const std::string &target,
                                             const MakeStandIns &stand_ins) const {
  std::vector<TierLookup> lookups;
  auto lookup = [](const LocalTiers::Named &tier, const cache::Key &key,
                   const std::string &target) {
    cache::Lookup found = tier.store->read(key, target);
    TierLookup out;
    out.tier = tier.name;
    out.target = target;
    out.path = found.path.string();
    if (found.status == cache::Lookup::Status::hit && found.entry->header.kernels.size() != 1) {
      found.status = cache::Lookup::Status::rejected;
      found.problem =
          "it holds " + std::to_string(found.entry->header.kernels.size()) + " kernels, expected 1";
    }
    out.state = found.status == cache::Lookup::Status::hit    ? TierLookup::State::holds
                : found.status == cache::Lookup::Status::miss ? TierLookup::State::missing
                                                              : TierLookup::State::rejected;
    out.detail = std::move(found.problem);
    return out;
  };
  const std::vector<LocalTiers::Named> order = local_.lookup_order();
  for (const LocalTiers::Named &tier : order)
    lookups.push_back(lookup(tier, key, target));
  const bool held = std::ranges::any_of(
      lookups, [](const TierLookup &tier) { return tier.state == TierLookup::State::holds; });
  if (!held && !order.empty())
    for (const StandIn &stand_in : stand_ins())
      for (const LocalTiers::Named &tier : order)
        if (TierLookup found = lookup(tier, stand_in.key, stand_in.target);
            found.state == TierLookup::State::holds)
          lookups.push_back(std::move(found));
  std::vector<TierLookup> remote = remote_.probe(key, target);
  lookups.insert(lookups.end(), remote.begin(), remote.end());
  return lookups;
}

std::optional<Found> TieredStore::find(const cache::Key &key, const std::string &target,
                                       const MakeStandIns &stand_ins, int newest_code_object,
                                       const std::vector<std::string> &include_dirs) {
  std::optional<Found> found = store_.find(
      {key, target, include_dirs},
      [&] {
        std::vector<StandIn> keys = stand_ins();
        for (StandIn &stand_in : keys)
          stand_in.include_dirs = include_dirs;
        return keys;
      },
      [newest_code_object](const cache::Entry &entry, const std::filesystem::path &path) {
        return loadable(entry, path, newest_code_object);
      });
  if (found || include_dirs.empty())
    return found;
  return find_remote(key, target, newest_code_object, include_dirs);
}

// Through the remotes' header manifests (the record store does not share variants with include
// directories by key alone); a hit is kept in the user tier with its manifest result, so that the
// next process finds it on disk.
std::optional<Found> TieredStore::find_remote(const cache::Key &base, const std::string &target,
                                              int newest_code_object,
                                              const std::vector<std::string> &include_dirs) {
  auto hit = find_remote_by_headers(remote_, base, target, include_dirs);
  if (!hit || !loadable(hit->entry, {}, newest_code_object))
    return std::nullopt;
  std::filesystem::path path = store_.keep(hit->entry);
  Found found{std::move(hit->entry), Origin::remote, std::move(path)};
  if (const cache::DiskStore *store = user(); store && !found.path.empty()) {
    try {
      // The manifest is read, changed and written: only under the base key's lock, waited on
      // at most FleetWait::wait (without it, the next process scans the headers again).
      if (const auto lock = store->lock(base, fleet_.wait, fleet_.poll))
        record_headers(*store, base, target, static_cast<std::uint32_t>(include_dirs.size()),
                       {found.record.header.key, std::move(hit->headers)});
    } catch (const Error &error) {
      store_.unusable(error);
    }
  }
  return found;
}

TieredStore::Compiling TieredStore::begin_compile(const cache::Key &key, const std::string &target,
                                                  bool reuse,
                                                  const std::vector<std::string> &include_dirs) {
  return store_.begin({key, target, include_dirs}, reuse);
}

std::filesystem::path TieredStore::publish(const Compiling &compiling, const cache::Entry &entry) {
  return store_.publish(compiling, entry);
}

std::filesystem::path TieredStore::publish(const Compiling &compiling, const cache::Entry &entry,
                                           const cache::Key &base, std::uint32_t dirs,
                                           std::vector<cache::RecordedHeader> headers) {
  std::filesystem::path path = store_.publish(compiling, entry);
  publish_remote_headers(remote_, entry, base, dirs, headers);
  if (const cache::DiskStore *store = user(); store && !path.empty() && compiling.locked()) {
    try {
      record_headers(*store, base, entry.header.target, dirs,
                     {entry.header.key, std::move(headers)});
    } catch (const Error &error) {
      store_.unusable(error);
    }
  }
  return path;
}

void TieredStore::add_statistics(const cache::CacheCounters &counters) const {
  if (const cache::DiskStore *store = user())
    cache::StatsFiles(store->layout().stats_directory()).add(counters);
}

void TieredStore::count(const cache::CacheCounters &counters) const {
  const cache::DiskStore *store = user();
  if (store && ::access(store->layout().version_directory().c_str(), W_OK | X_OK) == 0) {
    cache::StatsFiles(store->layout().stats_directory()).add(counters);
    return;
  }
  log().info("KJIT_MODE=prebuilt: this process's {} hits are not counted in kjit cache stats: no "
             "writable user tier at {}",
             counters.prebuilt_hits + counters.user_hits + counters.remote_hits,
             store ? store->layout().version_directory().string() : std::string("(none)"));
}

void TieredStore::prune(std::uint64_t max_bytes) const {
  const cache::DiskStore *store = user();
  if (!store)
    return;
  try {
    const cache::PruneResult pruned = cache::prune(*store, max_bytes, std::nullopt);
    if (pruned.removed > 0)
      log().info("removed {} least recently used entries ({} bytes) to keep {} within "
                 "KJIT_CACHE_SIZE",
                 pruned.removed, pruned.removed_bytes, store->root().string());
  } catch (const std::exception &error) {
    log().warn("cannot keep {} within KJIT_CACHE_SIZE: {}", store->root().string(), error.what());
  }
}

} // namespace kjit
