#pragma once
// One on-disk tier: the user cache (read-write) or the prebuilt tier (read-only), its files where
// its Layout (layout.hpp) puts them.
//
// Trust: an entry is loaded only when the file and the directory holding it are owned by this user
// or root and are not writable by group or others; with the key and target checked against the
// header, another user can neither plant an entry nor swap ours around. Directories kjit creates
// are 0700; an existing root keeps the mode its owner chose (it is not checked: only the entry's
// own directory decides), but write() refuses an entry directory that read() would not trust.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/file_lock.hpp"
#include "kjit/cache/header_manifest.hpp"
#include "kjit/cache/key.hpp"
#include "kjit/cache/layout.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kjit::cache {

enum class Access { read_only, read_write };

struct Lookup {
  enum class Status {
    hit,      // entry is valid, for this key and target
    miss,     // no file
    rejected, // a file is there but is not a valid entry for this key and target (problem says why)
  };
  Status status = Status::miss;
  std::optional<Entry> entry;
  std::string problem;
  std::filesystem::path path;
  std::int64_t last_use_ns = 0; // a hit's mtime: when it was written or last used
};

class DiskStore {
public:
  DiskStore(std::filesystem::path root, Access access);

  const std::filesystem::path &root() const { return layout_.root(); }
  // Where each of this tier's files is.
  const Layout &layout() const { return layout_; }
  Access access() const { return access_; }

  // Reads and verifies the entry: magic, version, checksum, the key and target in its header,
  // and that the file and its directory are trusted (above). No file is a miss; anything else
  // that is not a valid entry (a directory, a symlink, a FIFO, bad bytes) is rejected. Does not
  // log: the caller decides what a rejection means. Never throws.
  Lookup read(const Key &key, std::string_view target) const;

  // Publishes atomically: a unique temp file in the entry's directory, written, closed, then
  // renamed over the entry's name. Not fsynced: the checksum every read verifies turns an entry a
  // power loss cut short into a miss. Directories are created 0700. Throws Error(cache_io) with
  // the path and errno text, leaving no temp file behind; a read_only store throws too, and an
  // invalid target id throws Error(bad_target).
  void write(const Entry &entry) const;

  // Records that `hit` was used now, for least-recently-used pruning: sets its mtime to now unless
  // it was set less than a minute ago (so a burst of processes does not write it each time). A
  // read_only store records nothing. Never throws.
  void record_use(const Lookup &hit) const;

  // Removes what is under the entry's name, if anything: a file, or a directory planted there
  // (see remove_private_path), so that a rejected entry can be rewritten. A directory tree is
  // removed only where remove_private_path trusts its parent. Returns "" or why nothing was
  // removed (a read_only store, an invalid target id, a refused or failed removal); no file is not
  // a failure. Never throws.
  std::string remove(const Key &key, std::string_view target) const;

  // The header manifest of the variant whose base key (its key without headers) is `base`.
  // Trusted as an entry is (above) and decoded as untrusted input: a file that is there but is not
  // a valid manifest for `base` is `problem`. Never throws.
  struct ManifestLookup {
    std::optional<HeaderManifest> manifest; // none: no file, or a problem
    std::string problem;
    std::filesystem::path path;
  };
  ManifestLookup read_manifest(const Key &base, std::string_view target) const;
  // Publishes `manifest` atomically, as write() does an entry; throws as write() does.
  void write_manifest(const HeaderManifest &manifest, std::string_view target) const;

  // The lock that serialises compiling and publishing one key across processes and threads:
  // the layout's lock_path(), its directories created 0700. Throws Error(cache_io) when they cannot
  // be created or the lock taken, and for a read_only store (it publishes nothing).
  FileLock lock(const Key &key) const;
  // The same lock once taken, trying every `poll` for at most `wait`; nullopt when another holder
  // keeps it that long (FileLock::try_for). Throws as lock() does.
  std::optional<FileLock> lock(const Key &key, std::chrono::milliseconds wait,
                               std::chrono::milliseconds poll) const;

private:
  // Throws lock()'s Error(cache_io) unless `key`'s lock file can be opened: a writable store whose
  // directories exist.
  void prepare_lock(const Key &key) const;
  Layout layout_;
  Access access_;
};

} // namespace kjit::cache
