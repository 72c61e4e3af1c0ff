#include "kjit/cache/remote_registry.hpp"

#include "kjit/cache/redis_remote.hpp"
#include "kjit/cache/signed_remote.hpp"
#include "kjit/error.hpp"
#include "kjit/text.hpp"

#include <mutex>

namespace kjit::cache {

namespace {

// One line per scheme: the whole of what adding a store changes here.
constexpr RemoteScheme kSchemes[] = {
    {"redis", open_redis_url},
    {"redis+unix", open_redis_url},
    {"rediss", open_redis_url}, // refused there with its reason (no TLS in Debian's hiredis)
};

// The schemes add_remote_scheme added, behind their lock.
struct AddedSchemes {
  std::mutex mutex;
  std::vector<RemoteScheme> schemes;
};
AddedSchemes &added_schemes() {
  static AddedSchemes added;
  return added;
}

// kjit's schemes, then the added ones; the caller holds `added.mutex`.
std::vector<RemoteScheme> served_schemes(const AddedSchemes &added) {
  std::vector<RemoteScheme> served(std::begin(kSchemes), std::end(kSchemes));
  served.insert(served.end(), added.schemes.begin(), added.schemes.end());
  return served;
}

OpenRemote opener_of(std::string_view url) {
  const std::size_t end = url.find("://");
  const std::string_view scheme = url.substr(0, end);
  AddedSchemes &added = added_schemes();
  const std::lock_guard lock(added.mutex);
  const std::vector<RemoteScheme> known = served_schemes(added);
  for (const RemoteScheme &candidate : known)
    if (end != std::string_view::npos && candidate.scheme == scheme)
      return candidate.open;
  throw Error(Errc::bad_config, "KJIT_REMOTE_STORAGE: '" + std::string(url) +
                                    "': unknown scheme; accepted: " +
                                    join(known, ", ", [](const RemoteScheme &candidate) {
                                      return std::string(candidate.scheme) + "://";
                                    }));
}

} // namespace

std::span<const RemoteScheme> remote_schemes() { return kSchemes; }

void add_remote_scheme(RemoteScheme scheme) {
  AddedSchemes &added = added_schemes();
  const std::lock_guard lock(added.mutex);
  const std::vector<RemoteScheme> known = served_schemes(added);
  for (const RemoteScheme &candidate : known)
    if (candidate.scheme == scheme.scheme) {
      if (candidate.open == scheme.open)
        return;
      throw Error(Errc::bad_config,
                  "remote scheme " + std::string(scheme.scheme) + ":// is served already");
    }
  added.schemes.push_back(scheme);
}

std::vector<RemoteStorage> open_remote_storages(std::string_view urls,
                                                const std::optional<std::string> &secret) {
  std::vector<RemoteStorage> out;
  for (std::string_view url : words(urls)) {
    RemoteStorage storage = opener_of(url)(url);
    if (secret)
      storage.backend = signed_backend(storage.backend, *secret);
    out.push_back(std::move(storage));
  }
  return out;
}

} // namespace kjit::cache
