// Every environment variable kjit reads, read here (docs/ARCHITECTURE.md, "Configuration"):
// Config's, KJIT_BACKEND's choice of devices, and the defaults of `kjit prebuild`. The logger's
// KJIT_LOG_LEVEL (base/, below this layer) and the compilers' own variables (jit/: the ones that
// change their code, which the key records) are read where they are used.
#include "kjit/runtime/config.hpp"

#include "kjit/cache/remote_registry.hpp"
#include "kjit/cache/signed_remote.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime/device.hpp"
#include "kjit/runtime/prebuild.hpp"
#include "kjit/runtime/remotes.hpp"
#include "kjit/text.hpp"
#include "kjit/units.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <pwd.h>
#include <string>
#include <unistd.h>

namespace kjit {

namespace {

std::string environment(const char *name) {
  const char *value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::filesystem::path home_directory() {
  std::string home = environment("HOME");
  if (!home.empty())
    return home;
  // A service account without HOME still has a passwd entry.
  if (const passwd *entry = getpwuid(geteuid()); entry != nullptr && entry->pw_dir != nullptr)
    return entry->pw_dir;
  return {};
}

std::filesystem::path default_cache_dir() {
  if (auto xdg = environment("XDG_CACHE_HOME"); !xdg.empty())
    return std::filesystem::path(xdg) / "kjit";
  auto home = home_directory();
  return home.empty() ? std::filesystem::path() : home / ".cache" / "kjit";
}

[[noreturn]] void bad_config(const char *name, const std::string &value, const char *accepts) {
  throw Error(Errc::bad_config,
              std::string(name) + "='" + value + "' is not valid; it accepts " + accepts);
}

// A whole number of milliseconds in [minimum, maximum]; nullopt for anything else.
std::optional<std::chrono::milliseconds>
parse_milliseconds(const std::string &text, std::int64_t minimum, std::int64_t maximum) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < minimum ||
      value > maximum)
    return std::nullopt;
  return std::chrono::milliseconds(value);
}

// The non-empty parts of a ':'-separated list.
std::vector<std::string> colon_separated(const std::string &list) {
  std::vector<std::string> parts;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t colon = std::min(list.find(':', start), list.size());
    if (colon > start)
      parts.push_back(list.substr(start, colon - start));
    start = colon + 1;
  }
  return parts;
}

} // namespace

std::vector<std::filesystem::path> Config::prebuilt_tiers() const {
  std::vector<std::filesystem::path> tiers;
  for (const std::filesystem::path &dir : prebuilt_dirs)
    if (!dir.empty() && std::find(tiers.begin(), tiers.end(), dir) == tiers.end())
      tiers.push_back(dir);
  if (!prebuilt_dir.empty() && std::find(tiers.begin(), tiers.end(), prebuilt_dir) == tiers.end())
    tiers.push_back(prebuilt_dir);
  return tiers;
}

Config Config::from_environment() {
  Config config;
  if (auto mode = environment("KJIT_MODE"); !mode.empty()) {
    if (mode == "jit")
      config.mode = Mode::jit;
    else if (mode == "prebuilt")
      config.mode = Mode::prebuilt;
    else
      bad_config("KJIT_MODE", mode, "jit or prebuilt");
  }
  if (auto rebuild = environment("KJIT_REBUILD"); !rebuild.empty()) {
    if (rebuild != "0" && rebuild != "1")
      bad_config("KJIT_REBUILD", rebuild, "0 or 1");
    config.rebuild = rebuild == "1";
  }
  if (auto size = environment("KJIT_CACHE_SIZE"); !size.empty()) {
    const std::optional<std::uint64_t> bytes = parse_size(size, 1024 * 1024);
    if (!bytes)
      bad_config("KJIT_CACHE_SIZE", size, "a size in megabytes, or with a unit: 500M, 20G");
    config.cache_size_bytes = *bytes;
  }
  auto cache_dir = environment("KJIT_CACHE_DIR");
  config.cache_dir = cache_dir.empty() ? default_cache_dir() : std::filesystem::path(cache_dir);
  auto prebuilt_dir = environment("KJIT_PREBUILT_DIR");
  config.prebuilt_dir = prebuilt_dir.empty()
                            ? std::filesystem::path(KJIT_INSTALL_PREFIX) / "share/kjit/prebuilt"
                            : std::filesystem::path(prebuilt_dir);
  for (std::string &dir : colon_separated(environment("KJIT_PREBUILT_PATH")))
    config.prebuilt_dirs.emplace_back(std::move(dir));
  config.include_dirs = colon_separated(environment("KJIT_INCLUDE_PATH"));
  const std::string remote_urls = environment("KJIT_REMOTE_STORAGE");
  for (std::string_view url : words(remote_urls))
    config.remote_urls.emplace_back(url);
  if (auto file = environment("KJIT_REMOTE_SECRET_FILE");
      !file.empty() && !config.remote_urls.empty())
    config.remote_secret = cache::read_remote_secret(file);
  open_remotes(config); // a bad URL is named where the variable is read; nothing connects yet
  if (auto ttl = environment("KJIT_REMOTE_LEASE_MS"); !ttl.empty()) {
    const auto parsed = parse_milliseconds(ttl, 10, 3'600'000);
    if (!parsed)
      bad_config("KJIT_REMOTE_LEASE_MS", ttl, "milliseconds from 10 to 3600000");
    config.fleet.lease_ttl = *parsed;
  }
  if (auto wait = environment("KJIT_REMOTE_WAIT_MS"); !wait.empty()) {
    const auto parsed = parse_milliseconds(wait, 0, 86'400'000);
    if (!parsed)
      bad_config("KJIT_REMOTE_WAIT_MS", wait, "milliseconds from 0 to 86400000");
    config.fleet.wait = *parsed;
  }
  return config;
}

std::vector<cache::RemoteStorage> open_remotes(const Config &config) {
  // One backend per remote and secret in a process, whichever Config names it: a connection
  // reused by every Runtime and tuning table. Never destroyed: a backend outlives every thread
  // that may still use it at exit, and the system closes its connection.
  static std::mutex mutex;
  static auto &opened = *new std::map<std::string, cache::RemoteStorage, std::less<>>;
  std::vector<cache::RemoteStorage> remotes;
  const std::lock_guard lock(mutex);
  for (const std::string &url : config.remote_urls) {
    std::string name = url + '\n' + config.remote_secret.value_or("");
    auto found = opened.find(name);
    if (found == opened.end()) {
      std::vector<cache::RemoteStorage> one =
          cache::open_remote_storages(url, config.remote_secret);
      if (one.size() != 1)
        throw Error(Errc::bad_config, "KJIT_REMOTE_STORAGE: '" + url + "' is not one URL");
      found = opened.emplace(std::move(name), std::move(one.front())).first;
    }
    remotes.push_back(found->second);
  }
  return remotes;
}

BackendChoice parse_backend_choice(std::string_view text) {
  if (text == "auto")
    return BackendChoice::automatic;
  if (text == "hip")
    return BackendChoice::hip;
  if (text == "cuda")
    return BackendChoice::cuda;
  throw Error(Errc::bad_config, "KJIT_BACKEND='" + std::string(text) +
                                    "' is not a backend; expected auto, hip or cuda");
}

BackendChoice backend_choice_from_environment() {
  const std::string text = environment("KJIT_BACKEND");
  return text.empty() ? BackendChoice::automatic : parse_backend_choice(text);
}

prebuild::Environment prebuild::environment_defaults() {
  return {.level = environment("PREBUILD_KERNELS"),
          .targets = environment("GPU_ARCHS"),
          .max_jobs = environment("MAX_JOBS")};
}

} // namespace kjit
