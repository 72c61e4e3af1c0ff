#include "header_manifests.hpp"

#include "kjit/error.hpp"
#include "kjit/log.hpp"

namespace kjit {

namespace {

std::string_view as_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char *>(bytes.data()), bytes.size()};
}

void log_changed(const cache::Key &base, const std::string &where, const std::string &mismatch) {
  log().info("header library changed for {} in {}: {}", base.hex().substr(0, 16), where, mismatch);
}

} // namespace

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
    log_changed(base, store.root().string(), newest_mismatch);
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

cache::RecordKey manifest_record(const cache::Key &base, const std::string &target) {
  return {kManifestRecord, target, base};
}

std::optional<RemoteHeaderHit> find_remote_by_headers(RemoteTier &remote, const cache::Key &base,
                                                      const std::string &target,
                                                      const std::vector<std::string> &dirs) {
  std::optional<cache::HeaderManifest> manifest;
  remote.find(manifest_record(base, target),
              [&](const cache::RecordKey &, std::span<const std::byte> value) -> std::string {
                cache::DecodedManifest decoded = cache::decode_manifest(as_text(value), base);
                if (!decoded.manifest)
                  return "header manifest: " + decoded.problem;
                if (decoded.manifest->dirs != dirs.size())
                  return "header manifest for " + std::to_string(decoded.manifest->dirs) +
                         " include directories, not " + std::to_string(dirs.size());
                manifest = std::move(decoded.manifest);
                return {};
              });
  if (!manifest)
    return std::nullopt;
  std::string newest_mismatch;
  for (auto result = manifest->results.rbegin(); result != manifest->results.rend(); ++result) {
    cache::HeaderCheck check = cache::check_headers(result->headers, dirs);
    if (!check.valid) {
      if (newest_mismatch.empty())
        newest_mismatch = std::move(check.mismatch);
      continue;
    }
    std::optional<cache::Entry> entry;
    remote.find({cache::kEntryRecord, target, result->key},
                [&](const cache::RecordKey &record, std::span<const std::byte> value) {
                  cache::Decoded decoded = cache::decode_record_entry(value, record);
                  if (!decoded.entry)
                    return decoded.problem;
                  if (!cache::keyed_by_headers(decoded.entry->header, base, result->headers))
                    return std::string("its key inputs are not the headers its manifest names");
                  entry = std::move(decoded.entry);
                  return std::string();
                });
    if (entry)
      return RemoteHeaderHit{std::move(*entry),
                             check.restamp ? std::move(check.headers) : result->headers};
  }
  if (!newest_mismatch.empty())
    log_changed(base, "the remote", newest_mismatch);
  return std::nullopt;
}

void publish_remote_headers(RemoteTier &remote, const cache::Entry &entry, const cache::Key &base,
                            std::uint32_t dirs, std::vector<cache::RecordedHeader> headers) {
  if (remote.empty())
    return;
  remote.publish(entry); // first: a reader that finds the result finds its entry
  for (cache::RecordedHeader &header : headers)
    header.stamp = {};
  cache::ManifestResult result{entry.header.key, std::move(headers)};
  remote.merge(manifest_record(base, entry.header.target),
               [&](std::optional<std::span<const std::byte>> current) {
                 cache::HeaderManifest manifest{base, dirs, {}};
                 if (current) { // one that cannot be read, or of other directories, is replaced
                   cache::DecodedManifest decoded = cache::decode_manifest(as_text(*current), base);
                   if (decoded.manifest && decoded.manifest->dirs == dirs)
                     manifest = std::move(*decoded.manifest);
                 }
                 cache::add_result(manifest, result);
                 const std::string text = cache::encode_manifest(manifest);
                 const auto *bytes = reinterpret_cast<const std::byte *>(text.data());
                 return std::vector<std::byte>(bytes, bytes + text.size());
               });
}

} // namespace kjit
