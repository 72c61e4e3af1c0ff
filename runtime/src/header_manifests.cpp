#include "header_manifests.hpp"

#include "kjit/error.hpp"
#include "kjit/log.hpp"

namespace kjit {

std::optional<cache::Key> find_by_headers(const cache::DiskStore &store, const cache::Key &base,
                                          const std::string &target,
                                          const std::vector<std::string> &dirs, bool quietly) {
  cache::DiskStore::ManifestLookup found = store.read_manifest(base, target);
  if (!found.problem.empty()) {
    if (!quietly)
      log().warn("ignoring header manifest {}: {}", found.path.string(), found.problem);
    return std::nullopt;
  }
  if (!found.manifest)
    return std::nullopt;
  cache::HeaderManifest &manifest = *found.manifest;
  if (manifest.dirs != dirs.size()) { // the base key counts them: only a forged file differs
    if (!quietly)
      log().warn("ignoring header manifest {}: it is for {} include directories, not {}",
                 found.path.string(), manifest.dirs, dirs.size());
    return std::nullopt;
  }
  std::string newest_mismatch;
  for (auto result = manifest.results.rbegin(); result != manifest.results.rend(); ++result) {
    cache::HeaderCheck check = cache::check_headers(result->headers, dirs);
    if (!check.valid) {
      if (newest_mismatch.empty())
        newest_mismatch = std::move(check.mismatch);
      continue;
    }
    if (check.restamp && store.access() == cache::Access::read_write) {
      result->headers = std::move(check.headers);
      try {
        store.write_manifest(manifest, target);
      } catch (const Error &) { // the stamps are only a shortcut: the digests were checked
      }
    }
    return result->key;
  }
  if (!newest_mismatch.empty() && !quietly)
    log().info("header library changed for {} in {}: {}", base.hex().substr(0, 16),
               store.root().string(), newest_mismatch);
  return std::nullopt;
}

void record_headers(const cache::DiskStore &store, const cache::Key &base,
                    const std::string &target, std::uint32_t dirs, cache::ManifestResult result) {
  cache::DiskStore::ManifestLookup found = store.read_manifest(base, target);
  cache::HeaderManifest manifest = found.manifest && found.manifest->dirs == dirs
                                       ? std::move(*found.manifest)
                                       : cache::HeaderManifest{base, dirs, {}};
  cache::add_result(manifest, std::move(result));
  store.write_manifest(manifest, target);
}

} // namespace kjit
