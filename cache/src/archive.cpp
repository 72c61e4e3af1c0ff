#include "kjit/cache/archive.hpp"

#include "file_format.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <functional>

namespace kjit::cache {

namespace {

namespace fs = std::filesystem;

constexpr std::array<char, 8> magic = {'K', 'J', 'I', 'T', 'A', 'R', 'C', '\0'};
constexpr std::uint32_t archive_version = 2;
constexpr std::size_t prelude_size = 16; // magic, version, count
constexpr std::size_t count_offset = 12;
using format::checksum_size;

constexpr std::uint32_t first_archive_version = 1; // no record section

// Error(bad_archive) naming `path`, the problem and what it left behind.
Error bad_archive(const fs::path &path, const std::string &problem, std::string_view aftermath) {
  return Error(Errc::bad_archive, path.string() + ": " + problem + "; " + std::string(aftermath));
}

// An archive read front to back, every byte before the checksum hashed as it is read, so that a
// reader holds one frame at a time. Its problems are Error(bad_archive).
class ArchiveStream {
public:
  ArchiveStream(const fs::path &path, std::string_view aftermath)
      : path_(path), aftermath_(aftermath) {
    std::error_code error;
    if (!fs::is_regular_file(path, error))
      throw bad("not a file");
    in_.open(path, std::ios::binary);
    const std::uintmax_t size = fs::file_size(path, error);
    if (!in_ || error)
      throw bad("cannot read it");
    left_ = size;
    std::array<std::byte, magic.size()> start{};
    if (size < magic.size() || !read_raw(start) ||
        std::memcmp(start.data(), magic.data(), magic.size()) != 0)
      throw bad("not a kjit cache archive (bad magic)");
    if (size < prelude_size + checksum_size)
      throw bad("truncated: " + std::to_string(size) + " bytes");
    left_ = size - magic.size() - checksum_size;
    checksum_.update(start);
  }

  Error bad(const std::string &problem) const { return bad_archive(path_, problem, aftermath_); }
  // Bytes left before the checksum.
  std::uint64_t left() const { return left_; }

  template <class Unsigned> Unsigned read_le(const std::string &what) {
    std::array<std::byte, sizeof(Unsigned)> bytes{};
    read(bytes, what);
    return format::load_le<Unsigned>(bytes.data());
  }
  // The next frame (u64 length, then the bytes); `what` names it when it does not fit.
  std::vector<std::byte> read_frame(const std::string &what) {
    if (left_ < 8)
      throw bad("truncated: " + what + " is missing");
    const std::uint64_t length = read_le<std::uint64_t>(what);
    if (length > left_) // before any allocation: a crafted length costs nothing
      throw bad("truncated: " + what + " is cut short");
    std::vector<std::byte> bytes(static_cast<std::size_t>(length));
    read(bytes, what);
    return bytes;
  }
  // Once every frame is read: nothing left over, and the checksum is that of what was read.
  void finish(std::uint64_t entries) {
    if (left_ != 0)
      throw bad("trailing bytes after its " + std::to_string(entries) + " entries");
    format::Checksum found{};
    if (!read_raw(found) || checksum_.digest() != found)
      throw bad("checksum mismatch: the archive was altered or damaged");
  }

private:
  void read(std::span<std::byte> out, const std::string &what) {
    if (out.size() > left_ || !read_raw(out))
      throw bad("truncated: " + what + " is cut short");
    left_ -= out.size();
    checksum_.update(out);
  }
  bool read_raw(std::span<std::byte> out) {
    in_.read(reinterpret_cast<char *>(out.data()), static_cast<std::streamsize>(out.size()));
    return static_cast<std::size_t>(in_.gcount()) == out.size();
  }

  fs::path path_;
  std::string_view aftermath_;
  std::ifstream in_;
  std::uint64_t left_ = 0;
  format::ChecksumStream checksum_;
};

// Walks `path` front to back with one frame in memory: checks the framing, each entry (decoded,
// its key the key of its key inputs, a target that can name a directory) and at the end the
// checksum, handing each entry to `on_entry` (with its file size) once it is checked and each
// record to `on_record`. Throws Error(bad_archive) with `aftermath`: at once for a framing
// problem, at the end for a bad entry (the entries after it are no longer handed on), unless the
// checksum says the archive was damaged, which is reported instead.
void walk_archive(const DiskStore &store, const fs::path &path, std::string_view aftermath,
                  const std::function<void(Entry &&, std::uint64_t)> &on_entry,
                  const std::function<void(std::string &&)> &on_record) {
  ArchiveStream in(path, aftermath);
  const std::uint32_t version = in.read_le<std::uint32_t>("the format version");
  if (version != archive_version && version != first_archive_version)
    throw in.bad("archive format " + std::to_string(version) + ", this kjit reads " +
                 std::to_string(first_archive_version) + " and " + std::to_string(archive_version));
  const std::uint32_t count = in.read_le<std::uint32_t>("the entry count");
  std::string bad_entry; // the first entry's problem
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::string which = "entry " + std::to_string(i + 1);
    const std::vector<std::byte> file = in.read_frame(which + " of " + std::to_string(count));
    if (!bad_entry.empty())
      continue;
    Decoded decoded = decode_entry(file);
    if (!decoded.entry) {
      bad_entry = which + " is not a valid entry: " + decoded.problem;
      continue;
    }
    const EntryHeader &header = decoded.entry->header;
    if (key_of(header.key_inputs) != header.key) {
      bad_entry = which + " (" + header.key.hex() +
                  ") does not match its content: its key inputs hash to another key";
      continue;
    }
    try {
      store.layout().entry_path(header.key,
                                header.target); // refuses a target that cannot name a directory
    } catch (const Error &refused) {
      bad_entry = which + ": " + refused.summary();
      continue;
    }
    on_entry(std::move(*decoded.entry), file.size());
  }
  if (version == archive_version) {
    if (in.left() < 4)
      throw in.bad("truncated: the record count is missing");
    const std::uint32_t records = in.read_le<std::uint32_t>("the record count");
    for (std::uint32_t i = 0; i < records; ++i) {
      const std::vector<std::byte> record =
          in.read_frame("record " + std::to_string(i + 1) + " of " + std::to_string(records));
      on_record(std::string(reinterpret_cast<const char *>(record.data()), record.size()));
    }
  }
  in.finish(count);
  if (!bad_entry.empty())
    throw in.bad(bad_entry);
}

void append_frame(PrivateFileWriter &out, std::span<const std::byte> file) {
  std::vector<std::byte> length;
  format::append_le<std::uint64_t>(length, file.size());
  out.append(length);
  out.append(file);
}

} // namespace

ArchiveContent read_archive(const DiskStore &store, const fs::path &path) {
  ArchiveContent content;
  content.archive = path;
  walk_archive(
      store, path, "nothing was imported",
      [&content](Entry &&, std::uint64_t bytes) {
        ++content.entries;
        content.entry_bytes += bytes;
      },
      [&content](std::string &&record) { content.records.push_back(std::move(record)); });
  return content;
}

ArchiveSummary export_archive(const DiskStore &store, const fs::path &archive,
                              const std::vector<std::string> &records) {
  PrivateFileWriter out(archive, archive.filename().string(), "cache archive",
                        Placement::existing_directory);
  std::vector<std::byte> prelude(magic.size());
  std::memcpy(prelude.data(), magic.data(), magic.size());
  format::append_le<std::uint32_t>(prelude, archive_version);
  format::append_le<std::uint32_t>(prelude, 0); // the count, once it is known
  out.append(prelude);
  ArchiveSummary summary;
  // In path order (target, then key), so that one cache always gives the same archive.
  std::vector<StoredEntry> entries = scan(store);
  std::sort(entries.begin(), entries.end(),
            [](const StoredEntry &a, const StoredEntry &b) { return a.path < b.path; });
  for (const StoredEntry &entry : entries) {
    if (!verify(store, entry).empty()) {
      ++summary.skipped;
      continue;
    }
    const PrivateFile file = read_private_file(entry.path);
    if (file.missing || !file.problem.empty()) { // removed or replaced since verified
      ++summary.skipped;
      continue;
    }
    append_frame(out, file.bytes);
    ++summary.entries;
    summary.bytes += file.bytes.size();
  }
  std::vector<std::byte> count;
  format::append_le<std::uint32_t>(count, static_cast<std::uint32_t>(summary.entries));
  out.overwrite(count_offset, count);
  count.clear();
  format::append_le<std::uint32_t>(count, static_cast<std::uint32_t>(records.size()));
  out.append(count);
  for (const std::string &record : records)
    append_frame(out, std::as_bytes(std::span(record)));
  summary.records = records.size();
  // The checksum covers the count written last, so it is taken from the file as written: one
  // more read of it, through a fixed buffer.
  format::ChecksumStream checksum;
  out.read_back([&checksum](std::span<const std::byte> piece) { checksum.update(piece); });
  out.append(checksum.digest());
  out.publish();
  return summary;
}

ArchiveSummary import_entries(const DiskStore &store, const ArchiveContent &content) {
  if (store.access() == Access::read_only)
    throw Error(Errc::cache_io,
                "cannot import into " + store.root().string() + ": it is read-only");
  ArchiveSummary summary;
  // Read again, one entry at a time, with every check read_archive made: an archive replaced
  // since then still writes only entries that pass them.
  walk_archive(
      store, content.archive,
      "it changed after it was checked; the entries before it were imported",
      [&](Entry &&entry, std::uint64_t bytes) {
        if (store.read(entry.header.key, entry.header.target).status == Lookup::Status::hit) {
          ++summary.skipped;
          return;
        }
        store.write(entry);
        ++summary.entries;
        summary.bytes += bytes;
      },
      [](std::string &&) {});
  return summary;
}

std::vector<bool> entries_present(const DiskStore &store, const ArchiveContent &content) {
  std::vector<bool> present;
  walk_archive(
      store, content.archive, "it changed after it was checked",
      [&](Entry &&entry, std::uint64_t) {
        present.push_back(store.read(entry.header.key, entry.header.target).status ==
                          Lookup::Status::hit);
      },
      [](std::string &&) {});
  return present;
}

ArchiveSummary import_archive(const DiskStore &store, const fs::path &archive) {
  return import_entries(store, read_archive(store, archive));
}

} // namespace kjit::cache
