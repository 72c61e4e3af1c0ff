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
    : local_(config), remote_(open_remotes(config), config.fleet) {
  if (!local_.user)
    log().warn("no cache directory (HOME and KJIT_CACHE_DIR unset): variants stay in memory");
}

const cache::DiskStore *TieredStore::user() const {
  return local_.user && !user_disabled_ ? &*local_.user : nullptr;
}

std::optional<Found> TieredStore::read(const cache::DiskStore &store, const cache::Key &key,
                                       const std::string &target, Origin origin,
                                       const std::vector<std::string> &include_dirs) {
  std::optional<cache::Key> by_headers;
  if (!include_dirs.empty() && !(by_headers = find_by_headers(store, key, target, include_dirs)))
    return std::nullopt;
  cache::Lookup found = store.read(by_headers.value_or(key), target);
  if (found.status == cache::Lookup::Status::rejected)
    log().warn("ignoring cache entry {}: {}", found.path.string(), found.problem);
  if (found.status != cache::Lookup::Status::hit)
    return std::nullopt;
  if (found.entry->header.kernels.size() != 1) {
    log().warn("ignoring cache entry {}: it holds {} kernels, expected 1", found.path.string(),
               found.entry->header.kernels.size());
    return std::nullopt;
  }
  store.record_use(found);
  return Found{std::move(*found.entry), origin, std::move(found.path)};
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

std::optional<Found> TieredStore::find_local(const cache::Key &key, const std::string &target,
                                             int newest_code_object,
                                             const std::vector<std::string> &include_dirs) {
  std::vector<std::pair<const cache::DiskStore *, Origin>> order;
  for (const cache::DiskStore *store : local_.prebuilt_tiers())
    order.emplace_back(store, Origin::prebuilt);
  if (local_.user)
    order.emplace_back(&*local_.user, Origin::user_cache);
  for (auto [store, origin] : order)
    if (auto found = read(*store, key, target, origin, include_dirs))
      if (loadable(found->entry, found->path, newest_code_object))
        return found;
  return std::nullopt;
}

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
  if (auto found = find_local(key, target, newest_code_object, include_dirs))
    return found;
  if (!local_.prebuilt_tiers().empty() || local_.user)
    for (const StandIn &stand_in : stand_ins())
      if (auto found = find_local(stand_in.key, stand_in.target, newest_code_object, include_dirs))
        return found;
  if (!include_dirs.empty())
    return std::nullopt;
  if (auto entry = remote_.find(key, target))
    if (loadable(*entry, {}, newest_code_object))
      return promoted(std::move(*entry));
  return std::nullopt;
}

// A remote's entry, kept in the user tier so that the next process finds it on disk.
Found TieredStore::promoted(cache::Entry entry) {
  std::filesystem::path path = keep(entry);
  return Found{std::move(entry), Origin::remote, std::move(path)};
}

std::filesystem::path TieredStore::keep(const cache::Entry &entry) {
  const cache::DiskStore *store = user();
  if (!store)
    return {};
  try {
    store->write(entry);
    return store->layout().entry_path(entry.header.key, entry.header.target);
  } catch (const Error &error) {
    disk_unusable(error);
    return {};
  }
}

TieredStore::Compiling TieredStore::begin_compile(const cache::Key &key, const std::string &target,
                                                  bool reuse,
                                                  const std::vector<std::string> &include_dirs) {
  Compiling compiling;
  if (const cache::DiskStore *store = user()) {
    try {
      compiling.lock_.emplace(store->lock(key));
    } catch (const Error &error) {
      disk_unusable(error);
    }
    if (compiling.lock_ && reuse && !include_dirs.empty()) {
      // Another process may have compiled it while this one waited: its manifest names the entry.
      if (auto by_headers = find_by_headers(*store, key, target, include_dirs, true)) {
        cache::Lookup found = store->read(*by_headers, target);
        if (found.status == cache::Lookup::Status::hit && found.entry->header.kernels.size() == 1)
          compiling.published = Found{std::move(*found.entry), Origin::user_cache, found.path};
      }
      return compiling;
    }
    if (compiling.lock_ && reuse) {
      // Another process may have published it while this one waited for the lock.
      cache::Lookup found = store->read(key, target);
      if (found.status == cache::Lookup::Status::hit && found.entry->header.kernels.size() == 1) {
        compiling.published = Found{std::move(*found.entry), Origin::user_cache, found.path};
        return compiling;
      }
      // Reported by find() already.
      if (found.status == cache::Lookup::Status::rejected)
        store->remove(key, target);
    }
  }
  // One compile per fleet: the lease holder compiles, the others take what it publishes.
  if (reuse && include_dirs.empty())
    if (auto entry = remote_.claim_or_wait(key, target, compiling.claim_))
      compiling.published = promoted(std::move(*entry));
  return compiling;
}

std::filesystem::path TieredStore::publish(const Compiling &compiling, const cache::Entry &entry) {
  std::filesystem::path path = compiling.lock_ ? keep(entry) : std::filesystem::path();
  remote_.publish(entry);
  return path;
}

std::filesystem::path TieredStore::publish(const Compiling &compiling, const cache::Entry &entry,
                                           const cache::Key &base, std::uint32_t dirs,
                                           std::vector<cache::RecordedHeader> headers) {
  std::filesystem::path path = compiling.lock_ ? keep(entry) : std::filesystem::path();
  if (const cache::DiskStore *store = user(); store && !path.empty()) {
    try {
      record_headers(*store, base, entry.header.target, dirs,
                     {entry.header.key, std::move(headers)});
    } catch (const Error &error) {
      disk_unusable(error);
    }
  }
  return path;
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

void TieredStore::close(const cache::CacheCounters &counters, std::uint64_t max_bytes) {
  const cache::DiskStore *store = user();
  if (!store)
    return;
  cache::StatsFiles(store->layout().stats_directory()).add(counters);
  if (max_bytes == 0)
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

// Warns once per store, then keeps variants in memory only.
void TieredStore::disk_unusable(const Error &error) {
  if (!user_disabled_.exchange(true))
    log().warn("{}; variants compiled by this process are kept in memory only", error.summary());
}

} // namespace kjit
