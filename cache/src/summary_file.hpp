#pragma once
// The summaries file of one entry directory, "<target>/<2 hex>/.summaries": for each entry, what a
// listing shows of its header, and the version of the file it was read from. A listing of 100,000
// entries then reads one file per directory instead of opening every entry.
//
//   offset 0   8 bytes   magic "KJITSUM\0"
//          8   u32 LE    format version
//         12   u32 LE    row count
//         16   rows      key (32 bytes), inode, size, change time (u64 LE each), template,
//                        parameters, kernels (a string is a u32 LE length and its bytes; a list
//                        of pairs is a u32 LE count and its strings; parameters are a u32 LE
//                        count of: name, then u8 0 and a type's string or u8 1 and an integer,
//                        u64 LE)
//        end   16 bytes  XXH3-128 of every byte before it
#include "kjit/cache/catalog.hpp"

#include <optional>
#include <span>
#include <vector>

namespace kjit::cache {

inline constexpr const char *kSummaryFileName = ".summaries";

// Which file a summary was read from: any change to it (replaced, rewritten, touched, chmod) gives
// it another inode or change time.
struct FileVersion {
  std::uint64_t inode = 0;
  std::uint64_t bytes = 0;
  std::int64_t change_ns = 0; // ctime
  bool operator==(const FileVersion &) const = default;
};

struct SummaryRow {
  Key key;
  FileVersion version; // of the entry file the summary was read from
  EntrySummary summary;
};

std::vector<std::byte> encode_summaries(std::span<const SummaryRow> rows);

// The rows, or nullopt for anything that is not a whole summaries file of this format (a reader
// then reads the headers again). Never throws on any input and never reads out of bounds.
std::optional<std::vector<SummaryRow>> decode_summaries(std::span<const std::byte> bytes);

} // namespace kjit::cache
