#pragma once
// Which backend serves a remote, by the scheme of its URL (docs/ARCHITECTURE.md, "The tiers"). As
// in ccache's storage/, a new kind of store is one file (its backend, implementing remote.hpp's
// interfaces) and one line (its schemes in remote_registry.cpp's table).
#include "kjit/cache/remote.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::cache {

// Opens the remote one URL of KJIT_REMOTE_STORAGE names, attributes included
// ("redis://host|read-only"). Connects on first use, so a server down now is a fault later. Throws
// Error(bad_config) naming KJIT_REMOTE_STORAGE for a URL the backend cannot take.
using OpenRemote = RemoteStorage (*)(std::string_view url);

struct RemoteScheme {
  std::string_view scheme; // before "://": "redis", "redis+unix"
  OpenRemote open;
};

// Every scheme kjit knows, in the order messages list them.
std::span<const RemoteScheme> remote_schemes();

// Serves `scheme` in this process too, after the schemes above: a store a program brings itself
// (the tests' in-process one, tests/support/fake_remote.hpp), configured by URL as any remote is.
// Adding a scheme already served by the same `open` does nothing; by another, Error(bad_config).
void add_remote_scheme(RemoteScheme scheme);

// The remotes `urls` (KJIT_REMOTE_STORAGE's value: URLs separated by spaces or tabs) names, in
// order, each opened by the backend of its scheme and, with a fleet `secret`, signed
// (signed_remote.hpp). Error(bad_config) for a URL of no known scheme, naming the known ones.
std::vector<RemoteStorage> open_remote_storages(std::string_view urls,
                                                const std::optional<std::string> &secret);

} // namespace kjit::cache
