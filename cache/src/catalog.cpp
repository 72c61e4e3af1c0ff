#include "kjit/cache/catalog.hpp"

#include "kjit/cache/file_lock.hpp"
#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"
#include "summary_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <memory>
#include <sys/stat.h>
#include <thread>
#include <time.h>
#include <type_traits>
#include <unistd.h>

namespace kjit::cache {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t second_ns = 1000000000;
constexpr std::int64_t stale_temp_ns = 3600 * second_ns; // a writer that long gone crashed
// How long after its last change an entry file's summary may be kept: longer than any file system's
// timestamp granularity (ext4 with small inodes keeps whole seconds), so that a change made in the
// same tick as the read that the summary came from cannot hide behind an unchanged ctime.
constexpr std::int64_t settle_ns = 2 * second_ns;
// Threads that unlink: on a file system mounted with discard an unlink waits for the disk to
// discard the file's blocks, and those waits overlap across threads (BENCHMARKS.md, "Evidence
// behind the code's choices").
constexpr std::size_t unlink_threads = 32;

struct DirCloser {
  void operator()(DIR *dir) const { ::closedir(dir); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

// Calls `each(name, is_directory_or_unknown, directory_fd)` for every name in `path` but "." and
// ".."; `name` views the dirent's d_name, NUL-terminated and valid during the call. A missing
// directory has no names; any other failure to open it throws Error(cache_io).
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

// Runs `work(i)` for every i below `count` on up to `threads` threads, each taking the next i;
// the first exception thrown is rethrown once all have stopped.
template <typename Work> void in_parallel(std::size_t count, std::size_t threads, Work work) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  auto run = [&] {
    try {
      for (std::size_t i; !failed && (i = next.fetch_add(1)) < count;)
        work(i);
    } catch (...) {
      if (!failed.exchange(true))
        failure = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < std::min(threads, count); ++t)
    helpers.emplace_back(run);
  run();
  for (std::thread &helper : helpers)
    helper.join();
  if (failure)
    std::rethrow_exception(failure);
}

std::size_t cores() { return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 16); }

// One shard directory, "<version directory>/<target dir>/<2 hex>" (layout.hpp).
struct EntryDirectory {
  std::string path;
  std::string shard;  // its 2 hex digits
  std::string target; // from the target directory, ':' restored
};

// The entry directories of every target, or of `only_target` when it is not empty.
std::vector<EntryDirectory> entry_directories(const DiskStore &store,
                                              const std::string &only_target) {
  std::vector<EntryDirectory> found;
  const std::string root = store.layout().version_directory().string();
  list_directory(root, [&](std::string_view target_name, bool maybe_directory, int) {
    if (!maybe_directory || target_name.front() == '.')
      return;
    const std::string target = Layout::target_of_directory(target_name);
    if (!only_target.empty() && target != only_target)
      return;
    const std::string target_path = root + '/' + std::string(target_name);
    list_directory(target_path, [&](std::string_view shard, bool shard_maybe_directory, int) {
      if (shard_maybe_directory && Layout::is_shard_name(shard))
        found.push_back({target_path + '/' + std::string(shard), std::string(shard), target});
    });
  });
  return found;
}

// A writer's temp file in an entry directory.
struct TempFile {
  std::string path;
  std::int64_t mtime_ns;
};

// Calls `on_entry(StoredEntry&&, directory_fd)` for every entry in one entry directory and, when
// given, `on_temp(TempFile&&)` for every temp file and `on_manifest(StoredEntry&&)` for every
// header manifest (its key the base key its name holds). Paths are built as strings and each file's
// status is read relative to its directory: at 100,000 entries, std::filesystem::path arithmetic
// and full-path lookups were most of the time.
template <typename OnEntry, typename OnTemp = std::nullptr_t, typename OnManifest = std::nullptr_t>
void walk(const EntryDirectory &directory, OnEntry on_entry, OnTemp on_temp = nullptr,
          OnManifest on_manifest = nullptr) {
  list_directory(directory.path, [&](std::string_view name, bool, int directory_fd) {
    const bool entry_name = Layout::is_entry_name(name, directory.shard);
    constexpr bool wants_temps = !std::is_same_v<OnTemp, std::nullptr_t>;
    const bool temp_name = wants_temps && Layout::is_temp_name(name);
    constexpr bool wants_manifests = !std::is_same_v<OnManifest, std::nullptr_t>;
    const bool manifest_name = wants_manifests && Layout::is_manifest_name(name, directory.shard);
    if (!entry_name && !temp_name && !manifest_name)
      return;
    struct stat status {};
    // name views a dirent's d_name, which ends in NUL.
    if (::fstatat(directory_fd, name.data(), &status, AT_SYMLINK_NOFOLLOW) != 0)
      return; // removed since listed
    std::string path = directory.path + '/' + std::string(name);
    if constexpr (wants_temps)
      if (temp_name) {
        on_temp(TempFile{std::move(path), unix_ns(status.st_mtim)});
        return;
      }
    StoredEntry stored{.path = std::move(path),
                       .target = directory.target,
                       .key = *Key::from_hex(Layout::entry_key_hex(name)),
                       .bytes = static_cast<std::uint64_t>(status.st_size),
                       .last_use_ns = unix_ns(status.st_mtim),
                       .inode = status.st_ino,
                       .change_ns = unix_ns(status.st_ctim)};
    if constexpr (wants_manifests)
      if (manifest_name) {
        on_manifest(std::move(stored));
        return;
      }
    on_entry(std::move(stored), directory_fd);
  });
}

// Every entry of `store` (of `only_target` when not empty), and its temp files and header
// manifests when asked, walking the entry directories on every core.
void walk_all(const DiskStore &store, const std::string &only_target,
              std::vector<StoredEntry> &entries, std::vector<TempFile> *temp_files,
              std::vector<StoredEntry> *manifests = nullptr) {
  const std::vector<EntryDirectory> directories = entry_directories(store, only_target);
  std::vector<std::vector<StoredEntry>> found(directories.size());
  std::vector<std::vector<TempFile>> temps(directories.size());
  std::vector<std::vector<StoredEntry>> found_manifests(directories.size());
  in_parallel(directories.size(), cores(), [&](std::size_t i) {
    auto add_entry = [&found, i](StoredEntry &&entry, int) {
      found[i].push_back(std::move(entry));
    };
    if (temp_files == nullptr && manifests == nullptr)
      walk(directories[i], add_entry);
    else // both are rare files: each collected whether asked for or not
      walk(
          directories[i], add_entry,
          [&temps, i](TempFile &&temp) { temps[i].push_back(std::move(temp)); },
          [&found_manifests, i](StoredEntry &&manifest) {
            found_manifests[i].push_back(std::move(manifest));
          });
  });
  for (std::size_t i = 0; i < directories.size(); ++i) {
    std::move(found[i].begin(), found[i].end(), std::back_inserter(entries));
    if (temp_files != nullptr)
      std::move(temps[i].begin(), temps[i].end(), std::back_inserter(*temp_files));
    if (manifests != nullptr)
      std::move(found_manifests[i].begin(), found_manifests[i].end(),
                std::back_inserter(*manifests));
  }
}

FileVersion version_of(const StoredEntry &entry) {
  return {.inode = entry.inode, .bytes = entry.bytes, .change_ns = entry.change_ns};
}

// The header of the entry open as `fd`, reading the prelude and the header only.
std::optional<EntryHeader> header_of(int fd, std::string &problem) {
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
  return header;
}

int open_entry(int directory_fd, const char *path, std::string &problem) {
  const int fd = ::openat(directory_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    problem = std::string("cannot open: ") + std::strerror(errno);
  return fd;
}

EntrySummary summary_of(EntryHeader &&header) {
  return EntrySummary{.template_name = std::move(header.template_name),
                      .parameters = std::move(header.parameters),
                      .kernels = std::move(header.kernels)};
}

// An entry's summary to keep in its directory's file: listed[item].summary, read from `version`.
struct Kept {
  Key key;
  FileVersion version;
  std::size_t item;
};

bool same_rows(const std::vector<Kept> &kept, const std::vector<SummaryRow> &known) {
  return std::equal(
      kept.begin(), kept.end(), known.begin(), known.end(),
      [](const Kept &x, const SummaryRow &y) { return x.key == y.key && x.version == y.version; });
}

// The entries of one directory with their summaries: from its summaries file where the entry file
// is the version the summary was read from, else from the entry's header. When `rewrite`, the
// summaries file is replaced if it no longer describes the directory; a failure to write it (a
// full disk) leaves the listing as it is.
std::vector<ListedEntry> list_directory_entries(const EntryDirectory &directory, bool rewrite,
                                                std::int64_t settled_before_ns) {
  const std::string summaries_path = directory.path + '/' + kSummaryFileName;
  std::vector<SummaryRow> known;
  if (PrivateFile file = read_private_file(summaries_path); file.problem.empty() && !file.missing)
    known = decode_summaries(file.bytes).value_or(std::vector<SummaryRow>{});
  std::sort(known.begin(), known.end(),
            [](const SummaryRow &a, const SummaryRow &b) { return a.key < b.key; });

  std::vector<ListedEntry> listed;
  std::vector<Kept> kept;
  walk(directory, [&](StoredEntry &&entry, int directory_fd) {
    ListedEntry &item = listed.emplace_back(ListedEntry{std::move(entry), std::nullopt, {}});
    const StoredEntry &stored = item.stored;
    auto row = std::lower_bound(known.begin(), known.end(), stored.key,
                                [](const SummaryRow &r, const Key &key) { return r.key < key; });
    if (row != known.end() && row->key == stored.key && row->version == version_of(stored)) {
      item.summary = std::move(row->summary); // its key and version stay for same_rows()
      kept.push_back({row->key, row->version, listed.size() - 1});
      return;
    }
    const std::string name = stored.path.substr(directory.path.size() + 1);
    const int fd = open_entry(directory_fd, name.c_str(), item.problem);
    if (fd < 0)
      return;
    struct stat status {};
    const bool versioned = ::fstat(fd, &status) == 0;
    std::optional<EntryHeader> header = header_of(fd, item.problem);
    ::close(fd);
    if (!header)
      return;
    item.summary = summary_of(std::move(*header));
    // The version of the file the header was read from, which may be newer than the one walked.
    const FileVersion read_from{.inode = status.st_ino,
                                .bytes = static_cast<std::uint64_t>(status.st_size),
                                .change_ns = unix_ns(status.st_ctim)};
    if (versioned && read_from.change_ns < settled_before_ns)
      kept.push_back({stored.key, read_from, listed.size() - 1});
  });
  std::sort(kept.begin(), kept.end(), [](const Kept &a, const Kept &b) { return a.key < b.key; });
  if (rewrite && !same_rows(kept, known)) {
    if (kept.empty()) { // its entries were removed: no file rather than an empty one
      ::unlink(summaries_path.c_str());
      return listed;
    }
    std::vector<SummaryRow> rows;
    for (const Kept &row : kept)
      rows.push_back({row.key, row.version, *listed[row.item].summary});
    try {
      publish_private_file(summaries_path, encode_summaries(rows), "summaries", "entry summaries");
    } catch (const Error &) {
      // The listing is complete without the file; the next one tries again.
    }
  }
  return listed;
}

// Removes `victim` unless a writer holds its key or it was used or replaced since the walk; true
// when it is gone.
bool remove_unless_busy(const StoredEntry &victim, const LockTrier &locks) {
  if (!locks.try_lock(victim.key))
    return false; // being compiled and written: the writer decides
  struct stat status {};
  bool removed;
  if (::lstat(victim.path.c_str(), &status) != 0)
    removed = errno == ENOENT;
  else if (status.st_ino != victim.inode || unix_ns(status.st_mtim) != victim.last_use_ns)
    removed = false; // used (kjit's recency) or rewritten since the walk
  else
    removed = ::unlink(victim.path.c_str()) == 0 || errno == ENOENT;
  locks.unlock(victim.key);
  return removed;
}

// Which entries each header manifest's results name, by target and key: `live[m]`, how many of
// manifest m's results have their entry in `entries`; `served_by[e]`, the manifests naming entry
// e. A manifest that cannot be read names none.
struct ManifestLinks {
  std::vector<std::size_t> live;
  std::vector<std::vector<std::size_t>> served_by;
};
ManifestLinks link_manifests(const DiskStore &store, const std::vector<StoredEntry> &entries,
                             const std::vector<StoredEntry> &manifests) {
  ManifestLinks links{std::vector<std::size_t>(manifests.size(), 0),
                      std::vector<std::vector<std::size_t>>(entries.size())};
  if (manifests.empty())
    return links;
  std::map<std::pair<std::string_view, Key>, std::size_t> by_name;
  for (std::size_t e = 0; e < entries.size(); ++e)
    by_name.emplace(std::pair<std::string_view, Key>{entries[e].target, entries[e].key}, e);
  for (std::size_t m = 0; m < manifests.size(); ++m) {
    const DiskStore::ManifestLookup found =
        store.read_manifest(manifests[m].key, manifests[m].target);
    if (!found.manifest)
      continue;
    for (const ManifestResult &result : found.manifest->results)
      if (auto at = by_name.find({manifests[m].target, result.key}); at != by_name.end()) {
        links.served_by[at->second].push_back(m);
        ++links.live[m];
      }
  }
  return links;
}

} // namespace

std::vector<StoredEntry> scan(const DiskStore &store) {
  std::vector<StoredEntry> entries;
  walk_all(store, {}, entries, nullptr);
  return entries;
}

std::vector<ListedEntry> list(const DiskStore &store, const std::string &only_target,
                              std::int64_t now_ns) {
  const std::vector<EntryDirectory> directories = entry_directories(store, only_target);
  const bool rewrite = store.access() == Access::read_write;
  const std::int64_t settled_before_ns = now_ns - settle_ns;
  std::vector<std::vector<ListedEntry>> found(directories.size());
  in_parallel(directories.size(), cores(), [&](std::size_t i) {
    found[i] = list_directory_entries(directories[i], rewrite, settled_before_ns);
  });
  std::vector<ListedEntry> all;
  for (std::vector<ListedEntry> &some : found)
    std::move(some.begin(), some.end(), std::back_inserter(all));
  return all;
}

std::optional<EntryHeader> read_header(const fs::path &path, std::string &problem) {
  const int fd = open_entry(AT_FDCWD, path.c_str(), problem);
  if (fd < 0)
    return std::nullopt;
  std::optional<EntryHeader> header = header_of(fd, problem);
  ::close(fd);
  return header;
}

std::vector<StoredEntry> scan_manifests(const DiskStore &store) {
  std::vector<StoredEntry> entries, manifests;
  walk_all(store, {}, entries, nullptr, &manifests);
  return manifests;
}

std::string verify_manifest(const DiskStore &store, const StoredEntry &manifest) {
  const DiskStore::ManifestLookup found = store.read_manifest(manifest.key, manifest.target);
  if (!found.problem.empty())
    return found.problem;
  if (!found.manifest)
    return "removed while verifying";
  if (found.path != manifest.path)
    return "not where its target and base key put it (" + found.path.string() + ")";
  return {};
}

std::string remove_manifest(const DiskStore &store, const StoredEntry &manifest) {
  if (store.access() == Access::read_only)
    return "the tier is read-only";
  return remove_private_path(manifest.path);
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
  std::vector<StoredEntry> entries, manifests;
  std::vector<TempFile> temp_files;
  walk_all(store, {}, entries, &temp_files, &manifests);
  for (const TempFile &temp : temp_files)
    if (temp.mtime_ns < unix_now_ns() - stale_temp_ns) // no now - mtime: a saturated one overflows
      ::unlink(temp.path.c_str());

  std::sort(entries.begin(), entries.end(), [](const StoredEntry &a, const StoredEntry &b) {
    return a.last_use_ns < b.last_use_ns;
  });
  // Header manifests count in the size: each goes with the last entry its results name.
  const ManifestLinks links = link_manifests(store, entries, manifests);
  std::uint64_t total_bytes = 0;
  for (const StoredEntry &file : entries)
    total_bytes += file.bytes;
  std::uint64_t remaining = total_bytes;
  std::vector<std::size_t> live = links.live;
  for (std::size_t m = 0; m < manifests.size(); ++m) {
    total_bytes += manifests[m].bytes;
    if (live[m] > 0) // one serving no entry already is removed in any case
      remaining += manifests[m].bytes;
  }
  std::size_t victims = 0;
  for (; victims < entries.size(); ++victims) {
    const StoredEntry &entry = entries[victims];
    const bool too_old = unused_since_ns && entry.last_use_ns < *unused_since_ns;
    const bool too_big = max_bytes && remaining > *max_bytes;
    if (!too_old && !too_big)
      break; // sorted by recency: every later entry is newer and the size fits
    remaining -= entry.bytes;
    for (std::size_t m : links.served_by[victims])
      if (--live[m] == 0)
        remaining -= manifests[m].bytes;
  }

  PruneResult result{
      .removed = 0, .removed_bytes = 0, .kept = entries.size(), .kept_bytes = total_bytes};
  if (victims == 0 && std::ranges::find(live, std::size_t{0}) == live.end())
    return result;
  // Each victim is removed under its key's lock, so never while a writer compiles and publishes
  // it; a reader that has it open keeps reading what it opened.
  const LockTrier locks(store.layout().lock_path());
  std::vector<char> removed(victims, 0);
  in_parallel(victims, unlink_threads,
              [&](std::size_t i) { removed[i] = remove_unless_busy(entries[i], locks); });
  live = links.live;
  for (std::size_t i = 0; i < victims; ++i)
    if (removed[i]) { // one that could not be removed stays, and counts
      ++result.removed;
      result.removed_bytes += entries[i].bytes;
      --result.kept;
      result.kept_bytes -= entries[i].bytes;
      for (std::size_t m : links.served_by[i])
        --live[m];
    }
  // A manifest goes once no entry it names is left (under its base key's lock, which its writer
  // holds), so that one whose entry was busy stays with it.
  for (std::size_t m = 0; m < manifests.size(); ++m)
    if (live[m] == 0 && remove_unless_busy(manifests[m], locks)) {
      ++result.manifests_removed;
      result.removed_bytes += manifests[m].bytes;
      result.kept_bytes -= manifests[m].bytes;
    }
  return result;
}

} // namespace kjit::cache
