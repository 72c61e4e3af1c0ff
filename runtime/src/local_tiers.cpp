#include "kjit/runtime/local_tiers.hpp"

namespace kjit {

LocalTiers::LocalTiers(const Config &config) {
  if (!config.cache_dir.empty())
    user.emplace(config.cache_dir, cache::Access::read_write);
  if (!config.prebuilt_dir.empty() && std::filesystem::is_directory(config.prebuilt_dir))
    prebuilt.emplace(config.prebuilt_dir, cache::Access::read_only);
}

std::vector<LocalTiers::Named> LocalTiers::present() const {
  std::vector<Named> tiers;
  if (user)
    tiers.push_back({&*user, "user"});
  if (prebuilt)
    tiers.push_back({&*prebuilt, "prebuilt"});
  return tiers;
}

} // namespace kjit
