#pragma once
// Trust for a shared store. Any node can write the store, so a value read from it may come from
// anyone who can reach the server. With a fleet secret, values are published as
//   "kjit-hmac-sha256:" + HMAC-SHA256(secret, storage name + '\0' + bytes) + bytes
// and a value whose tag is missing or does not match (unsigned, signed with another secret,
// copied from another record, altered, cut short) is refused: a fault whose message says so, which
// the caller reports (the Runtime's remote tier warns once per process). Binding the storage name
// stops a signed value being replayed under another key. Without a secret, a writer of the store
// can make readers load its code objects (the README says so); the tiered store's checks (checksum,
// key, target) catch accidents only.
#include "kjit/cache/remote.hpp"

#include <filesystem>
#include <memory>
#include <string>

namespace kjit::cache {

// `inner` with every value signed on put and checked on get.
std::shared_ptr<RemoteBackend> signed_backend(std::shared_ptr<RemoteBackend> inner,
                                              std::string secret);

// The secret in `file` (its bytes, a trailing newline dropped). Error(bad_config) when the file
// cannot be read, is empty, or is readable or writable by group or others.
std::string read_remote_secret(const std::filesystem::path &file);

} // namespace kjit::cache
