#include "kjit/cache/catalog.hpp"

#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <thread>
#include <time.h>
#include <unistd.h>

namespace kjit::cache {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t stale_temp_ns = 3600LL * 1000000000; // a writer that long gone crashed

bool is_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

struct DirCloser {
  void operator()(DIR *dir) const { ::closedir(dir); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

// Calls `each(name, is_directory_or_unknown, directory_fd)` for every name in `path` but "." and
// "..". A missing directory has no names; any other failure to open it throws Error(cache_io).
template <typename Each> void list_directory(const std::string &path, Each each) {
  Dir dir(::opendir(path.c_str()));
  if (!dir) {
    if (errno == ENOENT || errno == ENOTDIR)
      return;
    throw Error(Errc::cache_io, "cannot list " + path + ": " + std::strerror(errno));
  }
  const int fd = ::dirfd(dir.get());
  while (const struct dirent *item = ::readdir(dir.get())) {
    const std::string_view name = item->d_name;
    if (name == "." || name == "..")
      continue;
    each(name, item->d_type == DT_DIR || item->d_type == DT_UNKNOWN, fd);
  }
}

// A file in an entry directory: an entry, or a writer's temp file.
struct TempFile {
  std::string path;
  std::int64_t mtime_ns;
};

// Walks <versioned root>/<target>/<2 hex>/ and sorts what it finds into entries and temp files.
// Paths are built as strings and each entry's status is read relative to its directory: at
// 100,000 entries, std::filesystem::path arithmetic and full-path lookups were most of the time.
void walk(const DiskStore &store, std::vector<StoredEntry> &entries,
          std::vector<TempFile> *temp_files) {
  const std::string root = store.versioned_root().string();
  list_directory(root, [&](std::string_view target_name, bool maybe_directory, int) {
    if (!maybe_directory || target_name.front() == '.')
      return;
    const std::string target = target_of_directory(target_name);
    const std::string target_path = root + '/' + std::string(target_name);
    list_directory(target_path, [&](std::string_view shard, bool shard_maybe_directory, int) {
      if (!shard_maybe_directory || shard.size() != 2 || !is_hex(shard))
        return;
      const std::string shard_path = target_path + '/' + std::string(shard);
      list_directory(shard_path, [&](std::string_view name, bool, int shard_fd) {
        const bool entry_name = name.size() == 64 + 5 && name.substr(0, 2) == shard &&
                                name.ends_with(".kjit") && is_hex(name.substr(0, 64));
        const bool temp_name = name.front() == '.' && name.find(".tmp.") != name.npos;
        if (!entry_name && !(temp_name && temp_files != nullptr))
          return;
        struct stat status {};
        if (::fstatat(shard_fd, std::string(name).c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0)
          return; // removed since listed
        std::string path = shard_path + '/' + std::string(name);
        if (temp_name) {
          temp_files->push_back({std::move(path), unix_ns(status.st_mtim)});
          return;
        }
        entries.push_back({std::move(path), target, *Key::from_hex(name.substr(0, 64)),
                           static_cast<std::uint64_t>(status.st_size), unix_ns(status.st_mtim)});
      });
    });
  });
}

} // namespace

std::vector<StoredEntry> scan(const DiskStore &store) {
  std::vector<StoredEntry> entries;
  walk(store, entries, nullptr);
  return entries;
}

std::optional<EntryHeader> read_header(const fs::path &path, std::string &problem) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    problem = std::string("cannot open: ") + std::strerror(errno);
    return std::nullopt;
  }
  // Most headers fit in the first read (uninitialised: it is overwritten); a longer one is read
  // whole in a second.
  std::byte first[4096];
  ssize_t got = ::pread(fd, first, sizeof first, 0);
  std::size_t needed = 0;
  std::optional<EntryHeader> header;
  if (got >= 0) {
    header = decode_header({first, static_cast<std::size_t>(got)}, problem, &needed);
    if (!header && needed > static_cast<std::size_t>(got) && needed <= (std::size_t{64} << 20)) {
      std::vector<std::byte> whole(needed);
      got = ::pread(fd, whole.data(), needed, 0);
      if (got >= 0)
        header = decode_header({whole.data(), static_cast<std::size_t>(got)}, problem);
    }
  }
  if (got < 0)
    problem = std::string("cannot read: ") + std::strerror(errno);
  ::close(fd);
  return header;
}

std::string verify(const DiskStore &store, const StoredEntry &entry) {
  Lookup lookup = store.read(entry.key, entry.target);
  if (lookup.status == Lookup::Status::miss)
    return "removed while verifying";
  if (lookup.status == Lookup::Status::rejected)
    return lookup.problem;
  if (lookup.path != entry.path)
    return "not where its target and key put it (" + lookup.path.string() + ")";
  const Key computed = key_of(lookup.entry->header.key_inputs);
  if (computed != entry.key)
    return "its key inputs hash to " + computed.hex() + ", not to its key";
  return {};
}

PruneResult prune(const DiskStore &store, std::optional<std::uint64_t> max_bytes,
                  std::optional<std::int64_t> unused_since_ns) {
  if (store.access() == Access::read_only)
    throw Error(Errc::cache_io, "cannot prune " + store.root().string() + ": it is read-only");
  std::vector<StoredEntry> entries;
  std::vector<TempFile> temp_files;
  walk(store, entries, &temp_files);
  for (const TempFile &temp : temp_files)
    if (unix_now_ns() - temp.mtime_ns > stale_temp_ns)
      ::unlink(temp.path.c_str());

  std::sort(entries.begin(), entries.end(), [](const StoredEntry &a, const StoredEntry &b) {
    return a.last_use_ns < b.last_use_ns;
  });
  // The victims first, least recently used first; then they are removed on several threads,
  // since an unlink is a journal write that costs about 0.2 ms on this VM's ext4 and they overlap.
  std::uint64_t total_bytes = 0;
  for (const StoredEntry &entry : entries)
    total_bytes += entry.bytes;
  std::size_t victims = 0;
  for (std::uint64_t remaining = total_bytes; victims < entries.size(); ++victims) {
    const StoredEntry &entry = entries[victims];
    const bool too_old = unused_since_ns && entry.last_use_ns < *unused_since_ns;
    const bool too_big = max_bytes && remaining > *max_bytes;
    if (!too_old && !too_big)
      break; // sorted by recency: every later entry is newer and the size fits
    remaining -= entry.bytes;
  }
  std::vector<char> removed(victims, 0);
  std::atomic<std::size_t> next{0};
  auto remove_some = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < victims;)
      removed[i] = ::unlink(entries[i].path.c_str()) == 0 || errno == ENOENT;
  };
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t < std::min<std::size_t>(8, victims); ++t)
    threads.emplace_back(remove_some);
  remove_some();
  for (std::thread &thread : threads)
    thread.join();

  PruneResult result{
      .removed = 0, .removed_bytes = 0, .kept = entries.size(), .kept_bytes = total_bytes};
  for (std::size_t i = 0; i < victims; ++i)
    if (removed[i]) { // one that could not be removed stays, and counts
      ++result.removed;
      result.removed_bytes += entries[i].bytes;
      --result.kept;
      result.kept_bytes -= entries[i].bytes;
    }
  return result;
}

} // namespace kjit::cache
