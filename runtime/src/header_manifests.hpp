#pragma once
// Header manifests in a disk tier (docs/ARCHITECTURE.md, "Header libraries"): which entry a tier
// holds for a variant with include directories, given the headers as they are now, and recording
// a compile's headers.
#include "kjit/cache/disk_store.hpp"

#include <optional>
#include <string>
#include <vector>

namespace kjit {

// The key of the entry `store` holds for the variant whose base key is `base`: that of the newest
// result in its manifest whose headers in `dirs` all still have their recorded digests. A header
// whose stamp changed but not its content gets its new stamp written back (where the tier is
// writable), so it is read once. nullopt: no manifest; a manifest that cannot be used (warned
// about); or no result whose headers are unchanged (one info line naming the header). `quietly`:
// neither line, for a second look under the key's lock after the first one said it.
std::optional<cache::Key> find_by_headers(const cache::DiskStore &store, const cache::Key &base,
                                          const std::string &target,
                                          const std::vector<std::string> &dirs,
                                          bool quietly = false);

// Adds a compile's result (its entry's key and the headers it recorded) to the manifest of `base`
// in `store`, under the key's lock. Throws as DiskStore::write_manifest does.
void record_headers(const cache::DiskStore &store, const cache::Key &base,
                    const std::string &target, std::uint32_t dirs, cache::ManifestResult result);

} // namespace kjit
