#include "kjit/cache/remote_registry.hpp"

#include "kjit/cache/redis_remote.hpp"
#include "kjit/cache/signed_remote.hpp"
#include "kjit/error.hpp"
#include "kjit/text.hpp"

namespace kjit::cache {

namespace {

// One line per scheme: the whole of what adding a store changes here.
constexpr RemoteScheme kSchemes[] = {
    {"redis", open_redis_url},
    {"redis+unix", open_redis_url},
    {"rediss", open_redis_url}, // refused there with its reason (no TLS in Debian's hiredis)
};

const RemoteScheme &scheme_of(std::string_view url) {
  const std::size_t end = url.find("://");
  const std::string_view scheme = url.substr(0, end);
  for (const RemoteScheme &known : kSchemes)
    if (end != std::string_view::npos && known.scheme == scheme)
      return known;
  throw Error(Errc::bad_config, "KJIT_REMOTE_STORAGE: '" + std::string(url) +
                                    "': unknown scheme; accepted: " +
                                    join(kSchemes, ", ", [](const RemoteScheme &known) {
                                      return std::string(known.scheme) + "://";
                                    }));
}

} // namespace

std::span<const RemoteScheme> remote_schemes() { return kSchemes; }

std::vector<RemoteStorage> open_remote_storages(std::string_view urls,
                                                const std::optional<std::string> &secret) {
  std::vector<RemoteStorage> out;
  for (std::string_view url : words(urls)) {
    RemoteStorage storage = scheme_of(url).open(url);
    if (secret)
      storage.backend = signed_backend(storage.backend, *secret);
    out.push_back(std::move(storage));
  }
  return out;
}

} // namespace kjit::cache
