#pragma once
// The on-disk tiers a Config names (docs/ARCHITECTURE.md, "The tiers"): the one place that turns
// KJIT_CACHE_DIR, KJIT_PREBUILT_PATH and KJIT_PREBUILT_DIR into stores, for the Runtime's cascade
// and for `kjit cache` alike.
#include "kjit/cache/disk_store.hpp"
#include "kjit/runtime/config.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace kjit {

struct LocalTiers {
  explicit LocalTiers(const Config &config);

  std::optional<cache::DiskStore> user;     // read-write; none without a cache directory
  std::optional<cache::DiskStore> prebuilt; // kjit's own; none when its directory does not exist
  // Config::prebuilt_dirs' tiers whose directories exist, in order (read-only).
  std::vector<cache::DiskStore> prebuilt_path;

  // Every prebuilt tier in lookup order: prebuilt_path, then kjit's own.
  std::vector<const cache::DiskStore *> prebuilt_tiers() const;

  // The tiers there are, user first, each with the name listings give it ("user", "prebuilt";
  // "prebuilt:DIR" for each of prebuilt_path).
  struct Named {
    const cache::DiskStore *store;
    std::string name;
  };
  std::vector<Named> present() const;
  // The same in the order a lookup asks them: prebuilt_tiers(), then the user tier.
  std::vector<Named> lookup_order() const;
};

} // namespace kjit
