#pragma once
// Header manifests: which files of a template's include directories a compile could read, so that
// the key covers exactly those (docs/ARCHITECTURE.md, "Header libraries"; ccache's direct mode is
// the model). A manifest is stored beside the entries under the variant's base key (everything
// but the headers); each of its results names the headers one compile recorded and the key of the
// entry that compile made. A lookup takes the newest result whose headers all still have their
// digests: a header whose size, mtime, ctime and inode are those recorded is not read again.
//
// Headers are named by the index of their include directory and their path relative to it, never
// by absolute path, so an entry built against one copy of a library is valid wherever a
// byte-identical copy is installed. A manifest read from disk is untrusted input: decode_manifest
// refuses anything malformed, and paths that are absolute or climb out of their directory.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/key.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::cache {

// What a header file looked like when its digest was taken. All zeros: not recorded (a file
// changed too recently for its times to tell a later change apart), so it is always read again.
struct FileStamp {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  std::uint64_t inode = 0;
  bool recorded() const { return *this != FileStamp{}; }
  bool operator==(const FileStamp &) const = default;
};

// One name a compile could read in one include directory: found there with this digest, or looked
// for and absent (a header added there later would shadow what the compile read).
struct RecordedHeader {
  std::uint32_t dir = 0;             // the include directory's index
  std::string path;                  // relative to it: "cub/block/block_scan.cuh"
  std::optional<std::string> digest; // SHA-256 hex of the content; nullopt: absent
  FileStamp stamp;
  bool operator==(const RecordedHeader &) const = default;
};

struct ManifestResult {
  Key key; // of the entry compiled with these headers
  std::vector<RecordedHeader> headers;
};

struct HeaderManifest {
  Key base;                            // the variant's key without its headers
  std::uint32_t dirs = 0;              // how many include directories the indexes refer to
  std::vector<ManifestResult> results; // oldest first
};

// Bounds: a result names at most kMaxRecordedHeaders headers found or absent, whose contents add
// up to at most kMaxRecordedBytes (the scanner refuses more, Error(bad_parameter)); a manifest
// keeps the newest kMaxManifestResults results.
inline constexpr std::size_t kMaxRecordedHeaders = 20000;
inline constexpr std::uint64_t kMaxRecordedBytes = 512ull << 20;
inline constexpr std::size_t kMaxManifestResults = 16;

// Whether `path` may name a header relative to an include directory: not empty, not absolute, no
// "." or ".." component, no empty component, no control character.
bool valid_header_path(std::string_view path);

// `manifest` with `result` added as its newest (one of the same key replaced), the oldest dropped
// beyond kMaxManifestResults.
void add_result(HeaderManifest &manifest, ManifestResult result);

// The key input a recorded header adds to its variant's base key inputs: ("include:<dir>:<path>",
// digest or "absent"). An entry's key inputs are its base key's followed by one per header, in the
// order recorded.
KeyField header_key_input(const RecordedHeader &header);
// Whether `entry` is the compile of the variant whose base key is `base` with exactly `headers`:
// its key inputs are fields whose key is `base`, then header_key_input of each header, and its key
// is theirs. What makes a result of an untrusted manifest (a remote's) safe: whatever key the
// manifest names, only an entry keyed by the headers checked here is taken.
bool keyed_by_headers(const EntryHeader &entry, const Key &base,
                      const std::vector<RecordedHeader> &headers);

std::string encode_manifest(const HeaderManifest &manifest);
struct DecodedManifest {
  std::optional<HeaderManifest> manifest;
  std::string problem; // why not, when there is none
};
// Never throws: a manifest that is not well formed, whose base key is not `base`, or that names a
// path valid_header_path refuses or a directory index beyond its count, is a problem.
DecodedManifest decode_manifest(std::string_view bytes, const Key &base);

// The stamp and digest of a header file now.
struct HeaderState {
  FileStamp stamp;
  std::string digest;
};
// Reads `path` (its bytes into `content` when given): nullopt when there is no such file (or no
// directory on its way). Throws Error(file_io) naming it for a file that is there but cannot be
// read, or is not a regular file. The stamp is left unrecorded (zeros) when the file changed less
// than kStampMinAge before it was read: file times come from a coarse clock, and a later write
// within the same tick could keep them.
std::optional<HeaderState> read_header(const std::string &path, std::string *content = nullptr);
inline constexpr std::int64_t kStampMinAgeNs = 100'000'000;

// Checks a result's headers against `dirs` (absolute, in the order the indexes refer to).
struct HeaderCheck {
  bool valid = false;
  std::string mismatch;     // when not valid: "cub/x.cuh (include directory 0) changed"
  std::size_t rehashed = 0; // headers whose stamps differed, so that were read again
  bool restamp = false;     // a header read again kept its digest: its new stamp is in `headers`
  std::vector<RecordedHeader> headers; // with `restamp`: the result's headers, restamped
};
HeaderCheck check_headers(const std::vector<RecordedHeader> &headers,
                          const std::vector<std::string> &dirs);

} // namespace kjit::cache
