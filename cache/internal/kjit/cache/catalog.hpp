#pragma once
// What a disk tier holds, for the `kjit cache` commands: the entries found by walking its tree,
// their headers, their verification, and pruning by recency.
//
// Recency is kept by kjit, not by atime (which noatime and relatime mounts freeze): a read-write
// DiskStore sets an entry's mtime to now when it serves a hit (at most once a minute per entry),
// so an entry's mtime is the last time it was written or used.
#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/entry.hpp"
#include "kjit/cache/private_file.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kjit::cache {

// One entry file as the tree shows it, before its content is read.
struct StoredEntry {
  std::string path;   // not a std::filesystem::path, whose parsing showed in 100,000-entry scans
  std::string target; // from its directory, ':' restored ("gfx90a:sramecc+:xnack-")
  Key key;            // from its file name
  std::uint64_t bytes = 0;
  std::int64_t last_use_ns = 0; // mtime: written or last served as a hit
  std::uint64_t inode = 0;
  std::int64_t change_ns = 0; // ctime: any change to the file, a use included
};

// Every entry file (layout.hpp) under the store's version directory, in no set order. Files
// whose names are not entry names (temp files, the lock, stats) are left out. Reads directories
// and file status only. A missing root is an empty list; an unreadable directory throws
// Error(cache_io) naming it.
std::vector<StoredEntry> scan(const DiskStore &store);

// What a listing shows of an entry beyond its file, from its header.
struct EntrySummary {
  std::string template_name;
  std::vector<EntryParameter> parameters; // the header's, in the template's order
  std::vector<std::pair<std::string, std::string>> kernels;
  bool operator==(const EntrySummary &) const = default;
};

struct ListedEntry {
  StoredEntry stored;
  std::optional<EntrySummary> summary; // nullopt when the header cannot be read
  std::string problem;                 // why not
};

// scan(), only the entries of `only_target` when it is not empty, with the summary of each entry's
// header. Each entry directory keeps the summaries of its entries in a file (".summaries") that
// names the version of the entry file each was read from (inode, size, change time). A summary is
// used only while its entry file is that same version, untouched since; any other entry's header is
// read, so the file saves work but never changes the answer. A read-write store rewrites a
// directory's file when it no longer matches; a summary read less than two seconds after its file
// last changed is not kept, since a change within the file system's clock tick would not show
// (`now_ns` is when the listing starts; tests move it).
std::vector<ListedEntry> list(const DiskStore &store, const std::string &only_target = {},
                              std::int64_t now_ns = unix_now_ns());

// The header of the entry at `path`, reading the prelude and the header but not the code or the
// checksum (listings stay fast; verify() checks everything). nullopt with `problem` set when the
// file is not an entry kjit can read.
std::optional<EntryHeader> read_header(const std::filesystem::path &path, std::string &problem);

// Everything that makes the file a valid entry where it lies in `store`: the store's trust rules,
// magic, version, lengths and checksum, the key in the header equal to the key of its key inputs
// and to its file name, and the target equal to its directory's. "" when valid, else the problem.
// Does not count as a use.
std::string verify(const DiskStore &store, const StoredEntry &entry);

// The header manifests of the store (<base key>.manifest beside the entries: header_manifest.hpp),
// as StoredEntry rows whose key is the base key, in no set order.
std::vector<StoredEntry> scan_manifests(const DiskStore &store);
// "" when the manifest file is one kjit reads for its base key and target where it lies (trusted,
// well formed, no path outside its include directories), else the problem.
std::string verify_manifest(const DiskStore &store, const StoredEntry &manifest);
// Removes a manifest file (verify --fix): "" or why not.
std::string remove_manifest(const DiskStore &store, const StoredEntry &manifest);

struct PruneResult {
  std::size_t removed = 0;         // entries
  std::uint64_t removed_bytes = 0; // entries' and header manifests'
  std::size_t kept = 0;            // entries
  std::uint64_t kept_bytes = 0;    // entries' and header manifests'
  std::size_t manifests_removed = 0;
};

// Removes entries, least recently used first, until the store holds at most `max_bytes` (when
// set), and every entry not used since `unused_since_ns` (when set); also temp files that a
// crashed writer left more than an hour ago. Header manifests count in the size and go with the
// last entry their results name (a manifest that names no entry left, or cannot be read, goes):
// they are the entries' index, worth nothing without them, and one of a large header library
// can outweigh its entry. Safe while other processes read or write: a reader
// keeps the file it opened, a miss is recompiled, and a write in progress is a temp file.
// Throws Error(cache_io) for a read-only store.
PruneResult prune(const DiskStore &store, std::optional<std::uint64_t> max_bytes,
                  std::optional<std::int64_t> unused_since_ns);

} // namespace kjit::cache
