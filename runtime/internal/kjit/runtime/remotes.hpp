#pragma once
// The remote tiers a Config names, opened: what the record stores and `kjit cache
// push|pull|ls --remote` talk to. Config holds URLs, so that the public API names no backend.
#include "kjit/cache/remote.hpp"
#include "kjit/runtime/config.hpp"

#include <vector>

namespace kjit {

// config.remote_urls in order, each opened by the backend of its scheme
// (kjit/cache/remote_registry.hpp) and signed with config.remote_secret when it is set. Connects
// to nothing yet. Throws Error(bad_config) naming KJIT_REMOTE_STORAGE for a URL of no known
// scheme or one its backend cannot take.
std::vector<cache::RemoteStorage> open_remotes(const Config &config);

} // namespace kjit
