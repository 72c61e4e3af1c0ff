#include "kjit/cache/stats.hpp"

#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"
#include "kjit/log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

namespace kjit::cache {

namespace {

using nlohmann::json;

constexpr int shard_count = 16;

json counters_json(const CacheCounters &c) {
  return {{"user_hits", c.user_hits},
          {"prebuilt_hits", c.prebuilt_hits},
          {"remote_hits", c.remote_hits},
          {"remote_misses", c.remote_misses},
          {"remote_errors", c.remote_errors},
          {"remote_timeouts", c.remote_timeouts},
          {"misses", c.misses},
          {"compiles", c.compiles},
          {"compile_ms", c.compile_ms},
          {"saved_ms", c.saved_ms}};
}

// Lenient: a field that is missing or of the wrong type counts as zero, so that a damaged shard
// loses its own counts but never the command that reads it.
CacheCounters from_json(std::string_view text) {
  const json value = json::parse(text.begin(), text.end(), nullptr, false);
  CacheCounters c;
  if (!value.is_object())
    return c;
  auto count = [&value](const char *name) {
    auto found = value.find(name);
    return found != value.end() && found->is_number_unsigned() ? found->get<std::uint64_t>() : 0;
  };
  auto milliseconds = [&value](const char *name) {
    auto found = value.find(name);
    return found != value.end() && found->is_number() ? found->get<double>() : 0.0;
  };
  c.user_hits = count("user_hits");
  c.prebuilt_hits = count("prebuilt_hits");
  c.remote_hits = count("remote_hits");
  c.remote_misses = count("remote_misses");
  c.remote_errors = count("remote_errors");
  c.remote_timeouts = count("remote_timeouts");
  c.misses = count("misses");
  c.compiles = count("compiles");
  c.compile_ms = milliseconds("compile_ms");
  c.saved_ms = milliseconds("saved_ms");
  return c;
}

std::filesystem::path shard_path(const std::filesystem::path &directory, int shard) {
  return directory / (std::to_string(shard) + ".json");
}

} // namespace

CacheCounters &CacheCounters::operator+=(const CacheCounters &other) {
  user_hits += other.user_hits;
  prebuilt_hits += other.prebuilt_hits;
  remote_hits += other.remote_hits;
  remote_misses += other.remote_misses;
  remote_errors += other.remote_errors;
  remote_timeouts += other.remote_timeouts;
  misses += other.misses;
  compiles += other.compiles;
  compile_ms += other.compile_ms;
  saved_ms += other.saved_ms;
  return *this;
}

std::string to_json_text(const CacheCounters &counters) { return counters_json(counters).dump(); }

bool CacheCounters::empty() const { return *this == CacheCounters{}; }

StatsFiles::StatsFiles(std::filesystem::path directory) : directory_(std::move(directory)) {}

void StatsFiles::add(const CacheCounters &counters) const noexcept {
  if (counters.empty())
    return;
  const std::filesystem::path path =
      shard_path(directory_, static_cast<int>(::getpid() % shard_count));
  try {
    if (std::string problem = make_private_directories(directory_); !problem.empty())
      throw Error(Errc::cache_io, problem);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      throw Error(Errc::cache_io, "open " + path.string() + ": " + std::strerror(errno));
    // The lock belongs to this open file description and is released by close, or by the kernel
    // if the process dies while holding it.
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;
    int locked;
    do {
      locked = ::fcntl(fd, F_OFD_SETLKW, &whole);
    } while (locked < 0 && errno == EINTR);
    std::string text;
    char buffer[1024];
    for (ssize_t got; locked == 0 && (got = ::pread(fd, buffer, sizeof buffer, text.size())) > 0;)
      text.append(buffer, static_cast<std::size_t>(got));
    CacheCounters sum = from_json(text);
    sum += counters;
    // Rewritten in place, padded with spaces (which JSON allows) to at least its old length:
    // truncating and regrowing makes the file system free and allocate the block on every update,
    // which slows the disk hits around it (BENCHMARKS.md, "Evidence behind the code's choices").
    std::string updated = to_json_text(sum);
    updated.resize(std::max(updated.size(), text.size()), ' ');
    const bool written = locked == 0 && ::pwrite(fd, updated.data(), updated.size(), 0) ==
                                            static_cast<ssize_t>(updated.size());
    ::close(fd);
    if (!written)
      throw Error(Errc::cache_io, "update " + path.string() + ": " + std::strerror(errno));
  } catch (const std::exception &error) {
    log().debug("cache statistics not recorded: {}", error.what());
  }
}

CacheCounters StatsFiles::total() const {
  CacheCounters sum;
  for (int shard = 0; shard < shard_count; ++shard) {
    PrivateFile file = read_private_file(shard_path(directory_, shard));
    if (file.problem.empty() && !file.missing)
      sum += from_json({reinterpret_cast<const char *>(file.bytes.data()), file.bytes.size()});
  }
  return sum;
}

void StatsFiles::clear() const {
  for (int shard = 0; shard < shard_count; ++shard) {
    const std::filesystem::path path = shard_path(directory_, shard);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw Error(Errc::cache_io, "cannot remove " + path.string() + ": " + std::strerror(errno));
  }
}

} // namespace kjit::cache
