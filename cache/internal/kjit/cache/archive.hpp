#pragma once
// A warm cache as one file, to move between machines: `kjit cache export` / `import`.
//
//   offset 0   8 bytes   magic "KJITARC\0"
//          8   u32 LE    format version (1)
//         12   u32 LE    entry count N
//         16   N times:  u64 LE length L, then L bytes: an entry file exactly as on disk
//        end   16 bytes  XXH3-128 of every byte before it (high 64 bits, then low, LE)
//
// Each entry carries its own checksum; the archive's covers the framing, so a cut-off or altered
// archive is refused whole before anything is written. Both ways are streamed: export and import
// hold one entry (and a fixed buffer) in memory, whatever the archive's size; import reads the
// archive twice, once to check it whole, then to write its entries.
#include "kjit/cache/disk_store.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kjit::cache {

struct ArchiveSummary {
  std::size_t entries = 0; // exported, or imported (written)
  std::uint64_t bytes = 0;
  std::size_t skipped = 0; // export: invalid entries left out; import: entries already present
  std::size_t records = 0; // exported, or imported
};

// An archive whose framing, checksum and entries were checked; its records are not yet. The
// entries stay in the file, which import_entries reads again.
struct ArchiveContent {
  std::filesystem::path archive;
  std::size_t entries = 0;
  std::uint64_t entry_bytes = 0; // their file sizes, summed
  std::vector<std::string> records;
};

// Writes every entry of `store` that verify() finds valid into `archive`, then `records`, published
// atomically, in path order: the same cache gives the same archive byte for byte. Recency is not
// carried. Throws Error(cache_io) when the file cannot be written.
ArchiveSummary export_archive(const DiskStore &store, const std::filesystem::path &archive,
                              const std::vector<std::string> &records = {});

// Checks the whole archive, writing nothing: framing, lengths, checksum, and for each entry that
// it decodes, that its key is the key of its key inputs and that its target can name a directory.
// Throws Error(bad_archive) naming the archive and the problem.
ArchiveContent read_archive(const DiskStore &store, const std::filesystem::path &archive);

// Writes the entries of `content`'s archive not already present in `store`, checking each again
// as it is read. Throws Error(cache_io) for a read-only store or a failed write, and
// Error(bad_archive) when the archive no longer passes the checks read_archive made.
ArchiveSummary import_entries(const DiskStore &store, const ArchiveContent &content);

// For each entry of `content`'s archive, in archive order, whether `store` holds it now: what an
// import that stopped left out. Reads the archive once more, one entry at a time. Throws
// Error(bad_archive) when the archive no longer passes the checks read_archive made.
std::vector<bool> entries_present(const DiskStore &store, const ArchiveContent &content);

// read_archive, then import_entries: the records are left to their owner.
ArchiveSummary import_archive(const DiskStore &store, const std::filesystem::path &archive);

} // namespace kjit::cache
