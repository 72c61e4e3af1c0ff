#pragma once
// The on-disk entry: one self-describing, verified file.
//
//   offset 0   8 bytes   magic "KJITENT\0"
//          8   u32 LE    format version (kEntryFormatVersion)
//         12   u32 LE    header length H
//         16   u64 LE    code length C
//         24   H bytes   header, JSON (EntryHeader)
//     24 + H   C bytes   code object
//  24 + H + C  16 bytes  XXH3-128 of every byte before it (high 64 bits, then low, LE)
#include "kjit/cache/key.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kjit::cache {

// 2: the header's `parameters` field. The version names the tier's directory (v2/) and is a key
// input, so an entry of another version is never found, let alone read: a clean miss.
inline constexpr std::uint32_t kEntryFormatVersion = 2;

// One template parameter of the variant an entry holds, as it was bound: a type or an integer.
struct EntryParameter {
  std::string name;
  std::variant<std::string, std::int64_t> value; // a type name ("half") or an integer (4096)
  std::string value_text() const;                // "half", "4096"
  bool operator==(const EntryParameter &) const = default;
};

struct EntryHeader {
  Key key;
  std::string target;                     // canonical target id; checked against the one asked for
  std::string template_name;              // for listings
  std::vector<EntryParameter> parameters; // the template's parameters, in the template's order
  std::vector<KeyField> key_inputs;       // everything the key was computed from, in order
  // Kernel name expression -> lowered (mangled) name, in the order compiled.
  std::vector<std::pair<std::string, std::string>> kernels;
  std::string compiler;          // compiler identity
  std::int64_t created_unix = 0; // seconds since the epoch
  double compile_ms = 0;         // how long the compiler took (what a hit saves)
  bool operator==(const EntryHeader &) const = default;
};

struct Entry {
  EntryHeader header;
  std::vector<std::byte> code;
  bool operator==(const Entry &) const = default;
};

// The header is JSON: key (hex), target, template, parameters (an array of [name, value] pairs, the
// value a string for a type and an integer for an integer), key_inputs and kernels (arrays of
// [string, string] pairs), compiler, created_unix, compile_ms. Throws Error(cache_io) when a header
// string is not valid UTF-8 (JSON cannot hold it, and replacing bytes would misreport the key
// inputs).
std::vector<std::byte> encode_entry(const Entry &entry);

// Either an entry or the reason the bytes are not one ("bad magic", "format version 7, this
// kjit reads 1", "truncated: 100 bytes, header says 5000", "trailing bytes: ...", "checksum
// mismatch", "header: <what is wrong with the JSON>"). Checks the lengths before the checksum, so
// a cut-off file says "truncated". Never throws on any input and never reads out of bounds.
struct Decoded {
  std::optional<Entry> entry;
  std::string problem;
};
Decoded decode_entry(std::span<const std::byte> bytes);
// decode_entry, and the header's key and target equal to the ones asked for: how every tier
// verifies what it read (a disk file, a remote's untrusted value) before it is used.
Decoded decode_entry_for(std::span<const std::byte> bytes, const Key &key, std::string_view target);

// The size of the fixed prelude before the header (magic, version, lengths).
inline constexpr std::size_t kEntryPreludeSize = 24;

// The header alone, from the first bytes of an entry: `prefix` holds at least the prelude, and
// `header_bytes` (when not nullopt) says how many bytes the whole prefix must hold to include the
// header, for a caller that reads in two steps. Checks magic, version and the header only; the
// code and the checksum are not read. nullopt with `problem` set otherwise.
std::optional<EntryHeader> decode_header(std::span<const std::byte> prefix, std::string &problem,
                                         std::size_t *needed_bytes = nullptr);

} // namespace kjit::cache
