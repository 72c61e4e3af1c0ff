#include "kjit/cache/archive.hpp"

#include "file_format.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

namespace kjit::cache {

namespace {

constexpr std::array<char, 8> magic = {'K', 'J', 'I', 'T', 'A', 'R', 'C', '\0'};
constexpr std::uint32_t archive_version = 2;
constexpr std::size_t prelude_size = 16; // magic, version, count
using format::checksum_size;

constexpr std::uint32_t first_archive_version = 1; // no record section

// Error(bad_archive) naming `path` and the problem.
Error bad_archive(const std::filesystem::path &path, const std::string &problem) {
  return Error(Errc::bad_archive, path.string() + ": " + problem + "; nothing was imported");
}

// Frames of `count` files (u64 length, then the bytes) from `at`, which is advanced; throws
// Error(bad_archive) for one that does not fit before `end`.
std::vector<std::span<const std::byte>> read_frames(const std::filesystem::path &path,
                                                    std::span<const std::byte> bytes,
                                                    std::size_t &at, std::size_t end,
                                                    std::uint64_t count, const char *what) {
  std::vector<std::span<const std::byte>> files;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::string which =
        std::string(what) + " " + std::to_string(i + 1) + " of " + std::to_string(count);
    if (end - at < 8)
      throw bad_archive(path, "truncated: " + which + " is missing");
    const std::uint64_t length = format::load_le<std::uint64_t>(bytes.data() + at);
    at += 8;
    if (length > end - at)
      throw bad_archive(path, "truncated: " + which + " is cut short");
    files.push_back(bytes.subspan(at, length));
    at += length;
  }
  return files;
}

void append_frame(std::vector<std::byte> &out, std::span<const std::byte> file) {
  format::append_le<std::uint64_t>(out, file.size());
  out.insert(out.end(), file.begin(), file.end());
}

} // namespace

ArchiveContent read_archive(const DiskStore &store, const std::filesystem::path &path) {
  auto bad = [&path](const std::string &problem) { return bad_archive(path, problem); };
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw bad("not a file");
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw bad("cannot read it");
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte *>(chars.data()),
                                         chars.size());
  if (bytes.size() < magic.size() || std::memcmp(bytes.data(), magic.data(), magic.size()) != 0)
    throw bad("not a kjit cache archive (bad magic)");
  if (bytes.size() < prelude_size + checksum_size)
    throw bad("truncated: " + std::to_string(bytes.size()) + " bytes");
  const std::uint64_t version = format::load_le<std::uint32_t>(bytes.data() + 8);
  if (version != archive_version && version != first_archive_version)
    throw bad("archive format " + std::to_string(version) + ", this kjit reads " +
              std::to_string(first_archive_version) + " and " + std::to_string(archive_version));
  const std::uint64_t count = format::load_le<std::uint32_t>(bytes.data() + 12);

  // The lengths first, against the room there is, so that a cut-off archive says so.
  std::size_t at = prelude_size;
  const std::size_t end = bytes.size() - checksum_size;
  const std::vector<std::span<const std::byte>> files =
      read_frames(path, bytes, at, end, count, "entry");
  std::vector<std::span<const std::byte>> records;
  if (version == archive_version) {
    if (end - at < 4)
      throw bad("truncated: the record count is missing");
    const std::uint64_t record_count = format::load_le<std::uint32_t>(bytes.data() + at);
    at += 4;
    records = read_frames(path, bytes, at, end, record_count, "record");
  }
  if (at != end)
    throw bad("trailing bytes after its " + std::to_string(count) + " entries");
  if (std::memcmp(format::checksum_of(bytes.first(end)).data(), bytes.data() + end,
                  checksum_size) != 0)
    throw bad("checksum mismatch: the archive was altered or damaged");

  ArchiveContent content;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string which = "entry " + std::to_string(i + 1);
    Decoded decoded = decode_entry(files[i]);
    if (!decoded.entry)
      throw bad(which + " is not a valid entry: " + decoded.problem);
    const EntryHeader &header = decoded.entry->header;
    if (key_of(header.key_inputs) != header.key)
      throw bad(which + " (" + header.key.hex() +
                ") does not match its content: its key inputs "
                "hash to another key");
    try {
      store.entry_path(header.key, header.target); // refuses a target that cannot name a directory
    } catch (const Error &refused) {
      throw bad(which + ": " + refused.summary());
    }
    content.entries.push_back(std::move(*decoded.entry));
    content.entry_bytes.push_back(files[i].size());
  }
  for (std::span<const std::byte> record : records)
    content.records.emplace_back(reinterpret_cast<const char *>(record.data()), record.size());
  return content;
}

ArchiveSummary export_archive(const DiskStore &store, const std::filesystem::path &archive,
                              const std::vector<std::string> &records) {
  std::vector<std::byte> out(magic.size());
  std::memcpy(out.data(), magic.data(), magic.size());
  format::append_le<std::uint32_t>(out, archive_version);
  const std::size_t count_at = out.size();
  format::append_le<std::uint32_t>(out, 0);
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
  format::store_le(out.data() + count_at, static_cast<std::uint32_t>(summary.entries));
  format::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(records.size()));
  for (const std::string &record : records)
    append_frame(out, std::as_bytes(std::span(record)));
  summary.records = records.size();
  const format::Checksum checksum = format::checksum_of(out);
  out.insert(out.end(), checksum.begin(), checksum.end());
  publish_private_file(archive, out, archive.filename().string(), "cache archive",
                       Placement::existing_directory);
  return summary;
}

ArchiveSummary import_entries(const DiskStore &store, const ArchiveContent &content) {
  if (store.access() == Access::read_only)
    throw Error(Errc::cache_io,
                "cannot import into " + store.root().string() + ": it is read-only");
  ArchiveSummary summary;
  for (std::size_t i = 0; i < content.entries.size(); ++i) {
    const EntryHeader &header = content.entries[i].header;
    if (store.read(header.key, header.target).status == Lookup::Status::hit) {
      ++summary.skipped;
      continue;
    }
    store.write(content.entries[i]);
    ++summary.entries;
    summary.bytes += content.entry_bytes[i];
  }
  return summary;
}

ArchiveSummary import_archive(const DiskStore &store, const std::filesystem::path &archive) {
  return import_entries(store, read_archive(store, archive));
}

} // namespace kjit::cache
