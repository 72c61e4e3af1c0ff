#pragma once
// One on-disk tier: the user cache (read-write) or the prebuilt tier (read-only).
//
//   <root>/v<N>/<target dir>/<first 2 hex of key>/<key hex>.kjit
//   <root>/v<N>/<target dir>/<first 2 hex of key>/<base key hex>.manifest
//                               (a variant with include directories: header_manifest.hpp)
//   <root>/v<N>/lock            (the per-key OFD lock file, see file_lock.hpp)
//   <root>/v<N>/stats/          (the user tier's statistics files, see stats.hpp)
//   <root>/v<N>/compilers/      (the compiler identities keys were made with)
//   <root>/v<N>/tuning/         (the tuning table's records and its own lock file, see
//                                kjit/runtime/tuning_table.hpp)
//
// Only this class names these paths; everything else asks it.
//
// <target dir> is the canonical target id with ':' replaced by '_' ("gfx90a_sramecc+_xnack-").
// Key text never becomes a path: only the validated target id and key hex do. A target id that is
// not canonical in jit::Target's grammar ("sm_90a", "gfx90a:sramecc+:xnack-", features in name
// order) is refused: entries come from archives and remotes, and a target such as "tuning",
// "lock" or ".." would name kjit's own folders or leave the tier.
//
// Trust: an entry is loaded only when the file and the directory holding it are owned by this user
// or root and are not writable by group or others; with the key and target checked against the
// header, another user can neither plant an entry nor swap ours around. Directories kjit creates
// are 0700; an existing root keeps the mode its owner chose (it is not checked: only the entry's
// own directory decides), but write() refuses an entry directory that read() would not trust.
// Temp files are named ".<key hex>.tmp.<pid>.<random>.<n>" in the entry's directory.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/file_lock.hpp"
#include "kjit/cache/header_manifest.hpp"
#include "kjit/cache/key.hpp"

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

// The target id a target directory name stands for: the inverse of the ':' -> '_' mapping, where
// a '_' was a ':' exactly when it introduces a feature (a part ending in '+' or '-'):
// "gfx90a_sramecc+_xnack-" -> "gfx90a:sramecc+:xnack-", while "sm_90a" stays "sm_90a".
std::string target_of_directory(std::string_view directory);

class DiskStore {
public:
  DiskStore(std::filesystem::path root, Access access);

  const std::filesystem::path &root() const { return root_; }
  // <root>/v<N>: where this entry format's files live.
  const std::filesystem::path &versioned_root() const { return versioned_root_; }
  Access access() const { return access_; }
  // The layout's other files (above).
  std::filesystem::path lock_path() const { return versioned_root_ / kLockFileName; }
  std::filesystem::path stats_directory() const { return versioned_root_ / "stats"; }
  std::filesystem::path compilers_directory() const { return versioned_root_ / "compilers"; }
  std::filesystem::path tuning_directory() const { return versioned_root_ / "tuning"; }
  static constexpr std::string_view kLockFileName = "lock";
  // Throws Error(bad_target) for a target id that cannot name a directory (above).
  std::filesystem::path entry_path(const Key &key, std::string_view target) const;

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
  // <root>/v<N>/lock, its directories created 0700. Throws Error(cache_io) when they cannot be
  // created or the lock taken, and for a read_only store (it publishes nothing).
  FileLock lock(const Key &key) const;
  // The same lock once taken, trying every `poll` for at most `wait`; nullopt when another holder
  // keeps it that long (FileLock::try_for). Throws as lock() does.
  std::optional<FileLock> lock(const Key &key, std::chrono::milliseconds wait,
                               std::chrono::milliseconds poll) const;

private:
  // Throws lock()'s Error(cache_io) unless `key`'s lock file can be opened: a writable store whose
  // directories exist.
  void prepare_lock(const Key &key) const;
  std::filesystem::path root_;
  std::filesystem::path versioned_root_;
  Access access_;
};

} // namespace kjit::cache
