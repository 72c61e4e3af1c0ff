#include "kjit/cache/remote.hpp"

namespace kjit::cache {

namespace {

std::string kind_prefix(std::string_view root, RecordKind kind) {
  std::string prefix(root);
  prefix += kind.name;
  prefix += "/v";
  prefix += std::to_string(kind.format_version);
  prefix += '/';
  return prefix;
}

std::string record_name(std::string_view root, const RecordKey &record) {
  return kind_prefix(root, record.kind) + record.target + '/' + record.key.hex();
}

} // namespace

std::string_view to_string(RemoteFailure failure) {
  switch (failure) {
  case RemoteFailure::error:
    return "error";
  case RemoteFailure::timeout:
    return "timeout";
  case RemoteFailure::refused:
    return "refused";
  }
  return "?";
}

std::string storage_prefix(RecordKind kind) { return kind_prefix("kjit/", kind); }

std::string storage_name(const RecordKey &record) { return record_name("kjit/", record); }

std::string lease_name(const RecordKey &record) { return record_name("kjit/lease/", record); }

Decoded decode_record_entry(std::span<const std::byte> value, const RecordKey &record) {
  Decoded decoded = decode_entry_for(value, record.key, record.target);
  if (decoded.entry && decoded.entry->header.kernels.size() != 1) {
    decoded.problem =
        "it holds " + std::to_string(decoded.entry->header.kernels.size()) + " kernels, expected 1";
    decoded.entry.reset();
  }
  return decoded;
}

std::optional<RecordKey> parse_storage_name(std::string_view name, RecordKind kind) {
  const std::string prefix = storage_prefix(kind);
  if (!name.starts_with(prefix))
    return std::nullopt;
  name.remove_prefix(prefix.size());
  const std::size_t slash = name.rfind('/');
  if (slash == std::string_view::npos || slash == 0 ||
      name.substr(0, slash).find('/') != std::string_view::npos)
    return std::nullopt;
  std::optional<Key> key = Key::from_hex(name.substr(slash + 1));
  if (!key)
    return std::nullopt;
  return RecordKey{kind, std::string(name.substr(0, slash)), *key};
}

} // namespace kjit::cache
