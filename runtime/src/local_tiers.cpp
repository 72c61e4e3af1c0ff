#include "kjit/runtime/local_tiers.hpp"

namespace kjit {

LocalTiers::LocalTiers(const Config &config) {
  if (!config.cache_dir.empty())
    user.emplace(config.cache_dir, cache::Access::read_write);
  if (!config.prebuilt_dir.empty() && std::filesystem::is_directory(config.prebuilt_dir))
    prebuilt.emplace(config.prebuilt_dir, cache::Access::read_only);
  for (const std::filesystem::path &dir : config.prebuilt_tiers())
    if (dir != config.prebuilt_dir && std::filesystem::is_directory(dir))
      prebuilt_path.emplace_back(dir, cache::Access::read_only);
}

std::vector<const cache::DiskStore *> LocalTiers::prebuilt_tiers() const {
  std::vector<const cache::DiskStore *> tiers;
  for (const cache::DiskStore &store : prebuilt_path)
    tiers.push_back(&store);
  if (prebuilt)
    tiers.push_back(&*prebuilt);
  return tiers;
}

namespace {

// A tier of Config::prebuilt_dirs, named by its directory.
LocalTiers::Named on_path(const cache::DiskStore &store) {
  return {&store, "prebuilt:" + store.root().string()};
}

} // namespace

std::vector<LocalTiers::Named> LocalTiers::present() const {
  std::vector<Named> tiers;
  if (user)
    tiers.push_back({&*user, "user"});
  if (prebuilt)
    tiers.push_back({&*prebuilt, "prebuilt"});
  for (const cache::DiskStore &store : prebuilt_path)
    tiers.push_back(on_path(store));
  return tiers;
}

std::vector<LocalTiers::Named> LocalTiers::lookup_order() const {
  std::vector<Named> tiers;
  for (const cache::DiskStore &store : prebuilt_path)
    tiers.push_back(on_path(store));
  if (prebuilt)
    tiers.push_back({&*prebuilt, "prebuilt"});
  if (user)
    tiers.push_back({&*user, "user"});
  return tiers;
}

} // namespace kjit
