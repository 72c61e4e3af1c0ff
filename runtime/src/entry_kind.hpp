#pragma once
// Code entries as a kind of record of the record store (record_store.hpp): keyed by the variant's
// key and target, kept in a disk tier's entry files (kjit/cache/disk_store.hpp), shared with a
// fleet as "kjit/entry/v<format>/<target>/<key hex>" (kjit/cache/remote.hpp).
//
// An entry is used only when it is verified for the key and target asked for and holds one kernel;
// one that fails that in a tier is a miss there, warned about once. A variant with include
// directories is looked up by its base key through each tier's header manifest
// (header_manifests.hpp); the record store does not share it with the remotes by key (TieredStore
// asks their manifest records after the local tiers miss).
#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/entry.hpp"
#include "record_store.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace kjit {

// What an entry is looked up by.
struct EntryKey {
  cache::Key key;     // with include_dirs, the base key
  std::string target; // a canonical target id
  std::vector<std::string> include_dirs = {};
};

struct EntryKind {
  using Record = cache::Entry;
  using Key = EntryKey;
  using Tier = const cache::DiskStore *;
  static constexpr std::string_view made = "variants compiled";
  static constexpr std::string_view work = "compiling";

  std::optional<Stored<cache::Entry>> read(Tier tier, const EntryKey &key, Origin origin,
                                           Reading reading) const;
  std::filesystem::path write(Tier tier, const cache::Entry &entry) const;
  std::optional<cache::FileLock> lock(Tier tier, const EntryKey &key, FleetWait wait) const;
  bool shared(const EntryKey &key) const { return key.include_dirs.empty(); }
  cache::RecordKey remote_key(const EntryKey &key) const;
  cache::RecordKey remote_key_of(const cache::Entry &entry) const;
  std::string decode(const EntryKey &key, std::span<const std::byte> value,
                     std::optional<cache::Entry> &out) const;
  std::vector<std::byte> encode(const cache::Entry &entry) const;
};

} // namespace kjit
