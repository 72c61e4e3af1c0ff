#pragma once
// The entries of the local tiers closest to a key that misses: same template and target, the
// fewest differing key inputs (Runtime::explain, and the debug line each compile logs).
#include "kjit/runtime/explain.hpp"
#include "kjit/runtime/local_tiers.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace kjit {

// At most `limit` entries of `template_name` for `target` in `tiers` whose key inputs differ from
// `wanted`, fewest differences first. Reads the tiers' listings and the headers of that template's
// entries; an entry whose header cannot be read is left out (`kjit cache verify` reports it).
// Throws what cache::list throws for an unreadable directory.
std::vector<NearEntry> nearest_entries(const std::vector<LocalTiers::Named> &tiers,
                                       std::string_view template_name, const std::string &target,
                                       const std::vector<cache::KeyField> &wanted,
                                       std::size_t limit);

} // namespace kjit
