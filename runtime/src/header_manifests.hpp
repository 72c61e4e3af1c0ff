#pragma once
// Header manifests in a disk tier and in a remote (docs/ARCHITECTURE.md, "Header libraries"):
// which entry a tier holds for a variant with include directories, given the headers as they are
// now, and recording a compile's headers.
#include "kjit/cache/disk_store.hpp"
#include "remote_tier.hpp"

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

// The remote form: the manifest of base key `base` is the record (kManifestRecord, target, base),
// encoded as on disk but with its stamps cleared (they describe one machine's files, so every
// header is read once on another); each result's entry is the entry record of its full key. The
// manifest is untrusted input: decoded as a disk one is, and a result's entry is taken only when
// its key inputs are the base key's and the headers checked here (cache::keyed_by_headers), so a
// forged manifest can cost a miss, never load a wrong binary.
inline constexpr cache::RecordKind kManifestRecord{"manifest", 1};
cache::RecordKey manifest_record(const cache::Key &base, const std::string &target);

struct RemoteHeaderHit {
  cache::Entry entry;
  std::vector<cache::RecordedHeader> headers; // as checked here: stamped where they could be
};
// The entry the remotes hold for the variant whose base key is `base`, given the headers in `dirs`
// now: through the newest result of the first valid manifest whose headers are unchanged. A
// manifest or entry refused is a remote fault (one warning per process and remote) and a miss; a
// header changed is one info line naming it.
std::optional<RemoteHeaderHit> find_remote_by_headers(RemoteTier &remote, const cache::Key &base,
                                                      const std::string &target,
                                                      const std::vector<std::string> &dirs);

// Publishes `entry` (its key the full one) to every writable remote, then adds its result to the
// manifest of `base` there.
void publish_remote_headers(RemoteTier &remote, const cache::Entry &entry, const cache::Key &base,
                            std::uint32_t dirs, std::vector<cache::RecordedHeader> headers);

} // namespace kjit
