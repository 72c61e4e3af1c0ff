// Moving a warm cache as one archive: a round trip is byte-exact, and any archive that is cut,
// altered, foreign or carries an entry that is not what it claims is refused whole, with the
// destination unchanged.
#include "kjit/cache/archive.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/error.hpp"
#include "tests/support/file_format.hpp"
#include "tests/support/files.hpp"
#include "tests/support/sample_entries.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <map>
#include <span>

namespace kjit::cache {
namespace {

namespace fs = std::filesystem;
using testing::read_file_bytes;
using testing::sample_entry;
using testing::write_file_bytes;

// Every file under `root` with its bytes, relative to it: what "unchanged" means.
std::map<std::string, std::vector<std::byte>> snapshot(const fs::path &root) {
  std::map<std::string, std::vector<std::byte>> files;
  if (fs::exists(root))
    for (const auto &item : fs::recursive_directory_iterator(root))
      files[fs::relative(item.path(), root).string()] =
          item.is_regular_file() ? read_file_bytes(item.path()) : std::vector<std::byte>{};
  return files;
}

// An archive assembled by hand from entry files, with a valid archive checksum: the framing the
// format documents, written independently of export_archive.
std::vector<std::byte> assemble(const std::vector<std::vector<std::byte>> &entries) {
  std::vector<std::byte> out;
  const auto put = [&out](std::uint64_t value, std::size_t bytes) {
    kjit::testing::append_le(out, value, bytes);
  };
  for (char c : std::string("KJITARC", 8))
    out.push_back(static_cast<std::byte>(c));
  put(1, 4);
  put(entries.size(), 4);
  for (const auto &entry : entries) {
    put(entry.size(), 8);
    out.insert(out.end(), entry.begin(), entry.end());
  }
  kjit::testing::append_checksum(out);
  return out;
}

class ArchiveTest : public ::testing::Test {
protected:
  void SetUp() override {
    for (const char *target : {"gfx90a:sramecc+:xnack-", "gfx1030", "sm_90"})
      for (const char *seed : {"one", "two"})
        source.write(sample_entry(seed, target, 3000));
  }
  // Imports `bytes` as an archive into the destination; expects Error(bad_archive) whose message
  // holds `fragment`, and nothing written.
  void expect_refused(const std::vector<std::byte> &bytes, const std::string &fragment) {
    write_file_bytes(archive, bytes);
    const auto before = snapshot(dir.path() / "destination");
    try {
      import_archive(destination, archive);
      ADD_FAILURE() << "imported an archive with: " << fragment;
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_archive) << error.summary();
      EXPECT_NE(error.summary().find(fragment), std::string::npos) << error.summary();
    }
    EXPECT_EQ(snapshot(dir.path() / "destination"), before) << fragment;
  }

  testing::TempDir dir;
  DiskStore source{dir.path() / "source", Access::read_write};
  DiskStore destination{dir.path() / "destination", Access::read_write};
  fs::path archive = dir.path() / "warm.kjitar";
};

TEST_F(ArchiveTest, ARoundTripGivesTheSameEntriesByteForByte) {
  const ArchiveSummary exported = export_archive(source, archive);
  EXPECT_EQ(exported.entries, 6u);
  EXPECT_EQ(exported.skipped, 0u);
  const ArchiveSummary imported = import_archive(destination, archive);
  EXPECT_EQ(imported.entries, 6u);
  EXPECT_EQ(imported.bytes, exported.bytes);
  EXPECT_EQ(snapshot(destination.layout().version_directory()),
            snapshot(source.layout().version_directory()));
  for (const StoredEntry &entry : scan(destination))
    EXPECT_EQ(destination.read(entry.key, entry.target).status, Lookup::Status::hit);

  const auto before = snapshot(dir.path() / "destination");
  const ArchiveSummary again = import_archive(destination, archive);
  EXPECT_EQ(again.entries, 0u);
  EXPECT_EQ(again.skipped, 6u);
  EXPECT_EQ(snapshot(dir.path() / "destination"), before);
}

// Entries go in path order (target directory, then key), whatever order the directories list
// them in, so that one cache always gives the same archive.
TEST_F(ArchiveTest, EntriesAreWrittenInPathOrder) {
  for (int seed = 0; seed < 40; ++seed)
    source.write(sample_entry("many " + std::to_string(seed), "gfx1030", 100));
  export_archive(source, archive);
  const std::vector<std::byte> bytes = read_file_bytes(archive);
  auto load = [&bytes](std::size_t at, int size) {
    std::uint64_t value = 0;
    for (int i = 0; i < size; ++i)
      value |= std::uint64_t{std::to_integer<unsigned>(bytes[at + i])} << (8 * i);
    return value;
  };
  ASSERT_EQ(load(8, 4), 2u); // the format version
  std::vector<std::string> paths;
  std::size_t at = 16;
  for (std::uint64_t entry = 0; entry < load(12, 4); ++entry) {
    const std::uint64_t length = load(at, 8);
    const Decoded decoded = decode_entry(std::span(bytes).subspan(at + 8, length));
    ASSERT_TRUE(decoded.entry.has_value()) << decoded.problem;
    paths.push_back(
        source.layout().entry_path(decoded.entry->header.key, decoded.entry->header.target));
    at += 8 + length;
  }
  ASSERT_EQ(paths.size(), 46u);
  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end()));
  EXPECT_EQ(load(at, 4), 0u); // no records were given
  EXPECT_EQ(at + 4 + 16, bytes.size());
}

TEST_F(ArchiveTest, ExportLeavesOutAnEntryThatFailsVerification) {
  const Entry entry = sample_entry("one", "gfx1030", 3000);
  const fs::path path = source.layout().entry_path(entry.header.key, entry.header.target);
  std::vector<std::byte> bytes = read_file_bytes(path);
  bytes[bytes.size() / 2] ^= std::byte{1};
  write_file_bytes(path, bytes);
  const ArchiveSummary exported = export_archive(source, archive);
  EXPECT_EQ(exported.entries, 5u);
  EXPECT_EQ(exported.skipped, 1u);
  import_archive(destination, archive);
  EXPECT_EQ(destination.read(entry.header.key, entry.header.target).status, Lookup::Status::miss);
}

TEST_F(ArchiveTest, CarriesRecordsOpaquelyAndRefusesACutRecordSection) {
  const std::vector<std::string> records = {"{\"first\": 1}\n", std::string("second\0", 7)};
  EXPECT_EQ(export_archive(source, archive, records).records, 2u);
  const ArchiveContent content = read_archive(destination, archive);
  EXPECT_EQ(content.records, records);
  EXPECT_EQ(content.entries, 6u);
  // import_archive leaves records to their owner: it writes the entries only.
  EXPECT_EQ(import_archive(destination, archive).entries, 6u);

  const std::vector<std::byte> good = read_file_bytes(archive);
  // Three bytes fewer: the last 16 are taken as the checksum, and the second record loses three.
  expect_refused(std::vector<std::byte>(good.begin(), good.end() - 3),
                 "truncated: record 2 of 2 is cut short");
}

TEST_F(ArchiveTest, CutAlteredAndForeignArchivesAreRefusedWhole) {
  export_archive(source, archive);
  const std::vector<std::byte> good = read_file_bytes(archive);
  for (std::size_t cut = 0; cut < good.size(); cut += std::max<std::size_t>(1, good.size() / 97))
    expect_refused(std::vector<std::byte>(good.begin(), good.begin() + cut),
                   cut < 8 ? "bad magic" : "truncated");
  for (std::size_t at : {std::size_t{9}, std::size_t{20}, good.size() / 2, good.size() - 1}) {
    std::vector<std::byte> altered = good;
    altered[at] ^= std::byte{0x10};
    // Byte 9 is in the version; byte 20 in the first entry's length, which then overruns.
    expect_refused(altered, at == 9    ? "archive format"
                            : at == 20 ? "truncated: entry 1 of 6 is cut short"
                                       : "checksum mismatch");
  }
  std::vector<std::byte> longer = good;
  longer.insert(longer.end() - 16, std::byte{0});
  expect_refused(longer, "trailing bytes");

  const std::string text = "not an archive at all, but long enough to have a header";
  expect_refused({reinterpret_cast<const std::byte *>(text.data()),
                  reinterpret_cast<const std::byte *>(text.data()) + text.size()},
                 "bad magic");
  expect_refused(encode_entry(sample_entry("one")), "bad magic");
}

TEST_F(ArchiveTest, AnEntryThatIsNotWhatItClaimsIsRefusedWhole) {
  const std::vector<std::byte> good_entry = encode_entry(sample_entry("good"));
  Entry forged = sample_entry("forged");
  forged.header.key_inputs.back().second = "gfx908"; // the key no longer follows from its inputs
  expect_refused(assemble({good_entry, encode_entry(forged)}), "does not match its content");

  std::vector<std::byte> damaged = encode_entry(sample_entry("damaged"));
  damaged[damaged.size() / 2] ^= std::byte{1};
  expect_refused(assemble({good_entry, damaged}), "entry 2 is not a valid entry");

  expect_refused(assemble({good_entry, encode_entry(sample_entry("evil", "../evil"))}),
                 "cannot name a cache directory");
  // A target naming one of kjit's own folders would land the entry among the tuning records.
  for (const char *own : {"tuning", "stats", "compilers", "lock"})
    expect_refused(assemble({good_entry, encode_entry(sample_entry("own", own))}),
                   "cannot name a cache directory");
}

// Import reads the archive twice (checked whole, then written one entry at a time): one replaced
// in between still has every entry checked again, and writes none that fails.
TEST_F(ArchiveTest, AnArchiveReplacedAfterItWasCheckedWritesOnlyEntriesThatPassTheChecks) {
  const std::vector<std::byte> good_entry = encode_entry(sample_entry("good"));
  write_file_bytes(archive, assemble({good_entry, encode_entry(sample_entry("second"))}));
  const ArchiveContent content = read_archive(destination, archive);
  EXPECT_EQ(content.entries, 2u);
  std::vector<std::byte> damaged = encode_entry(sample_entry("damaged"));
  damaged[damaged.size() / 2] ^= std::byte{1};
  write_file_bytes(archive, assemble({good_entry, damaged}));
  try {
    import_entries(destination, content);
    ADD_FAILURE() << "imported a damaged entry";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_archive);
    EXPECT_NE(error.summary().find("entry 2 is not a valid entry"), std::string::npos)
        << error.summary();
    EXPECT_NE(error.summary().find("changed after it was checked"), std::string::npos)
        << error.summary();
  }
  const std::vector<StoredEntry> written = scan(destination);
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].key, sample_entry("good").header.key);
}

// Export streams into a temp file beside the archive: one that fails, even after the whole
// archive is written (its name taken by a directory), throws and leaves no file behind.
TEST_F(ArchiveTest, AnExportThatFailsLeavesNoTempFileBehind) {
  fs::create_directories(archive / "taken");
  try {
    export_archive(source, archive);
    ADD_FAILURE() << "exported over a directory";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::cache_io);
    EXPECT_NE(error.summary().find("rename"), std::string::npos) << error.summary();
  }
  EXPECT_THROW(export_archive(source, dir.path() / "absent" / "warm.kjitar"), Error);
  for (const auto &item : fs::directory_iterator(dir.path()))
    EXPECT_EQ(item.path().filename().string().find(".tmp."), std::string::npos) << item.path();
}

TEST_F(ArchiveTest, WhatIsNotAnArchiveFileIsRefused) {
  try {
    import_archive(destination, dir.path() / "absent.kjitar");
    ADD_FAILURE() << "a missing file was imported";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_archive);
  }
  EXPECT_THROW(import_archive(destination, dir.path()), Error);
  export_archive(source, archive);
  EXPECT_THROW(import_archive(DiskStore(dir.path() / "destination", Access::read_only), archive),
               Error);
  EXPECT_FALSE(fs::exists(dir.path() / "destination"));
}

} // namespace
} // namespace kjit::cache
