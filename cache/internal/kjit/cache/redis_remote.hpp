#pragma once
// The Redis remote tier over hiredis: the three remote interfaces on one connection per remote.
//
// Every call is bounded: connecting by the connect timeout, each command's round trip by the
// operation timeout (a stalled server is a timeout, never a hang). A failure to reach it drops the
// connection; the next call reconnects. After kBreakerFailures failures to reach it in a row
// (refused, dropped or timed out connections; a denied command does not count) the remote is
// skipped, every call failing at once, for kBreakerCooldown, then one call tries again: a dead
// server costs a lookup no connection attempt. Faults are returned, not warned about (debug level
// only): their messages leave out the remote's description, which every caller adds.
#include "kjit/cache/remote.hpp"
#include "kjit/cache/remote_url.hpp"

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace kjit::cache {

inline constexpr int kBreakerFailures = 3;
inline constexpr std::chrono::milliseconds kBreakerCooldown{10'000};

// The remote named by `url`. Connects on first use, so a server down now is a fault later, not an
// error here. A read-only remote has no leases, and its put and remove fail.
RemoteStorage open_redis_remote(const RemoteUrl &url);
// The same from one URL of KJIT_REMOTE_STORAGE (remote_url.hpp's forms): what the registry of
// schemes opens (remote_registry.hpp). Error(bad_config) for a URL that does not parse.
RemoteStorage open_redis_url(std::string_view url);

} // namespace kjit::cache
