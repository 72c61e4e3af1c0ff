#pragma once
// The on-disk tiers a Config names (docs/ARCHITECTURE.md, "The tiers"): the one place that turns
// KJIT_CACHE_DIR and KJIT_PREBUILT_DIR into stores, for the Runtime's cascade and for
// `kjit cache` alike.
#include "kjit/cache/disk_store.hpp"
#include "kjit/runtime/config.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace kjit {

struct LocalTiers {
  explicit LocalTiers(const Config &config);

  std::optional<cache::DiskStore> user;     // read-write; none without a cache directory
  std::optional<cache::DiskStore> prebuilt; // read-only; none when its directory does not exist

  // The tiers there are, user first, each with the name listings give it ("user", "prebuilt").
  struct Named {
    const cache::DiskStore *store;
    std::string_view name;
  };
  std::vector<Named> present() const;
};

} // namespace kjit
