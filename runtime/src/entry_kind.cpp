#include "entry_kind.hpp"

#include "header_manifests.hpp"
#include "kjit/log.hpp"

namespace kjit {

std::optional<Stored<cache::Entry>> EntryKind::read(Tier tier, const EntryKey &key, Origin origin,
                                                    Reading reading) const {
  const bool lookup = reading == Reading::lookup;
  std::optional<cache::Key> by_headers;
  if (!key.include_dirs.empty() &&
      !(by_headers = find_by_headers(*tier, key.key, key.target, key.include_dirs, !lookup)))
    return std::nullopt;
  cache::Lookup found = tier->read(by_headers.value_or(key.key), key.target);
  if (found.status == cache::Lookup::Status::rejected) {
    if (lookup)
      log().warn("ignoring cache entry {}: {}", found.path.string(), found.problem);
    else if (!by_headers) // so that a directory planted under its name costs no disk tier
      tier->remove(key.key, key.target);
  }
  if (found.status != cache::Lookup::Status::hit)
    return std::nullopt;
  if (found.entry->header.kernels.size() != 1) {
    if (lookup)
      log().warn("ignoring cache entry {}: it holds {} kernels, expected 1", found.path.string(),
                 found.entry->header.kernels.size());
    return std::nullopt;
  }
  if (lookup)
    tier->record_use(found);
  return Stored<cache::Entry>{std::move(*found.entry), origin, std::move(found.path)};
}

std::filesystem::path EntryKind::write(Tier tier, const cache::Entry &entry) const {
  tier->write(entry);
  return tier->layout().entry_path(entry.header.key, entry.header.target);
}

std::optional<cache::FileLock> EntryKind::lock(Tier tier, const EntryKey &key,
                                               FleetWait wait) const {
  return tier->lock(key.key, wait.wait, wait.poll);
}

cache::RecordKey EntryKind::remote_key(const EntryKey &key) const {
  return {cache::kEntryRecord, key.target, key.key};
}

cache::RecordKey EntryKind::remote_key_of(const cache::Entry &entry) const {
  return {cache::kEntryRecord, entry.header.target, entry.header.key};
}

std::string EntryKind::decode(const EntryKey &key, std::span<const std::byte> value,
                              std::optional<cache::Entry> &out) const {
  cache::Decoded decoded = cache::decode_record_entry(value, remote_key(key));
  out = std::move(decoded.entry);
  return out ? std::string() : decoded.problem;
}

std::vector<std::byte> EntryKind::encode(const cache::Entry &entry) const {
  return cache::encode_entry(entry);
}

} // namespace kjit
