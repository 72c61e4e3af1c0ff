// Header manifests as files: their text form read back, refused when damaged or when a path leaves
// its include directory, and the stat shortcut of check_headers (a touched header is read once).
#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/header_manifest.hpp"
#include "kjit/error.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <thread>

namespace kjit::cache {
namespace {

using testing::TempDir;

void write_text(const std::filesystem::path &path, const std::string &text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Waits until a header written now is old enough for its stamp to be recorded.
void let_stamps_settle() {
  std::this_thread::sleep_for(std::chrono::nanoseconds(kStampMinAgeNs) +
                              std::chrono::milliseconds(50));
}

RecordedHeader recorded(std::uint32_t dir, const std::string &root, const std::string &path) {
  std::optional<HeaderState> state = read_header(root + "/" + path);
  return {dir, path, state ? std::optional(state->digest) : std::nullopt,
          state ? state->stamp : FileStamp{}};
}

const Key base = KeyBuilder().add("base", "1").finish();
const Key result_key = KeyBuilder().add("result", "1").finish();

HeaderManifest sample() {
  return {base,
          2,
          {{result_key,
            {{0, "lib/a b.h", std::string(64, 'a'), {10, 11, 12, 13}},
             {1, "lib/absent.h", std::nullopt, {}}}}}};
}

TEST(HeaderManifest, RoundTripsThroughItsTextForm) {
  const HeaderManifest manifest = sample();
  DecodedManifest decoded = decode_manifest(encode_manifest(manifest), base);
  ASSERT_TRUE(decoded.manifest) << decoded.problem;
  EXPECT_EQ(decoded.manifest->dirs, 2u);
  ASSERT_EQ(decoded.manifest->results.size(), 1u);
  EXPECT_EQ(decoded.manifest->results[0].key, result_key);
  EXPECT_EQ(decoded.manifest->results[0].headers, manifest.results[0].headers);
}

TEST(HeaderManifest, DamageAndForeignBaseKeysAreProblems) {
  const std::string text = encode_manifest(sample());
  for (std::size_t at : {std::size_t{0}, text.size() / 2, text.size() - 3}) {
    std::string damaged = text;
    damaged[at] ^= 1;
    EXPECT_FALSE(decode_manifest(damaged, base).manifest) << "byte " << at;
  }
  EXPECT_FALSE(decode_manifest(text.substr(0, text.size() / 2), base).manifest);
  EXPECT_FALSE(decode_manifest("", base).manifest);
  const DecodedManifest other = decode_manifest(text, result_key);
  EXPECT_FALSE(other.manifest);
  EXPECT_NE(other.problem.find("another variant"), std::string::npos) << other.problem;
}

TEST(HeaderManifest, PathsLeavingTheirDirectoryAreRefusedEvenWithAValidChecksum) {
  for (const char *path : {"../etc/passwd", "/etc/passwd", "lib/../../x.h", "lib//x.h", "./x.h",
                           "lib/x.h/..", "a\tb.h"}) {
    HeaderManifest forged = sample();
    forged.results[0].headers[0].path = path;
    const DecodedManifest decoded = decode_manifest(encode_manifest(forged), base);
    EXPECT_FALSE(decoded.manifest) << path;
    EXPECT_NE(decoded.problem.find("outside its include directory"), std::string::npos)
        << decoded.problem;
  }
  HeaderManifest beyond = sample();
  beyond.results[0].headers[0].dir = 2; // only 0 and 1 exist
  EXPECT_FALSE(decode_manifest(encode_manifest(beyond), base).manifest);
}

TEST(HeaderManifest, KeepsTheNewestResultsAndReplacesOneOfTheSameKey) {
  HeaderManifest manifest{base, 0, {}};
  for (int i = 0; i < static_cast<int>(kMaxManifestResults) + 3; ++i)
    add_result(manifest, {KeyBuilder().add("n", std::to_string(i)).finish(), {}});
  ASSERT_EQ(manifest.results.size(), kMaxManifestResults);
  EXPECT_EQ(manifest.results.back().key, KeyBuilder().add("n", "18").finish());
  add_result(manifest, {manifest.results.front().key, {}});
  EXPECT_EQ(manifest.results.size(), kMaxManifestResults);
  EXPECT_EQ(manifest.results.back().key, KeyBuilder().add("n", "3").finish());
}

class HeaderCheckTest : public ::testing::Test {
protected:
  void SetUp() override {
    write_text(dir / "inc0/lib/a.h", "#include <lib/b.h>\n");
    write_text(dir / "inc1/lib/b.h", "int b;\n");
    let_stamps_settle();
    headers = {recorded(0, dirs[0], "lib/a.h"), recorded(0, dirs[0], "lib/b.h"),
               recorded(1, dirs[1], "lib/b.h")};
    ASSERT_TRUE(headers[0].stamp.recorded());
    ASSERT_FALSE(headers[1].digest) << "absent in inc0";
  }
  TempDir dir;
  std::vector<std::string> dirs{(dir / "inc0").string(), (dir / "inc1").string()};
  std::vector<RecordedHeader> headers;
};

TEST_F(HeaderCheckTest, UnchangedHeadersAreNotReadAgain) {
  const HeaderCheck check = check_headers(headers, dirs);
  EXPECT_TRUE(check.valid) << check.mismatch;
  EXPECT_EQ(check.rehashed, 0u);
  EXPECT_FALSE(check.restamp);
}

TEST_F(HeaderCheckTest, ATouchedHeaderIsReadOnceThenItsNewStampIsTrusted) {
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir / "inc1/lib/b.h").c_str(), nullptr, 0), 0);
  let_stamps_settle();
  const HeaderCheck first = check_headers(headers, dirs);
  EXPECT_TRUE(first.valid) << first.mismatch;
  EXPECT_EQ(first.rehashed, 1u);
  EXPECT_TRUE(first.restamp);
  const HeaderCheck second = check_headers(first.headers, dirs);
  EXPECT_TRUE(second.valid);
  EXPECT_EQ(second.rehashed, 0u) << "the digest is recomputed once";
}

TEST_F(HeaderCheckTest, AnEditOfTheSameSizeIsAMismatchNamingTheHeader) {
  write_text(dir / "inc1/lib/b.h", "int c;\n");
  const HeaderCheck check = check_headers(headers, dirs);
  EXPECT_FALSE(check.valid);
  EXPECT_EQ(check.mismatch, "lib/b.h (include directory 1) changed");
}

TEST_F(HeaderCheckTest, AShadowingHeaderAddedEarlierOnThePathIsAMismatch) {
  write_text(dir / "inc0/lib/b.h", "int b;\n"); // the same bytes: still another file read first
  const HeaderCheck check = check_headers(headers, dirs);
  EXPECT_FALSE(check.valid);
  EXPECT_EQ(check.mismatch, "lib/b.h (include directory 0) was added");
}

TEST_F(HeaderCheckTest, AVanishedHeaderIsAMismatch) {
  std::filesystem::remove(dir / "inc1/lib/b.h");
  const HeaderCheck check = check_headers(headers, dirs);
  EXPECT_FALSE(check.valid);
  EXPECT_EQ(check.mismatch, "lib/b.h (include directory 1) vanished");
}

TEST_F(HeaderCheckTest, AHeaderChangedTooRecentlyHasNoStampAndIsAlwaysRead) {
  write_text(dir / "inc1/lib/b.h", "int d;\n");
  const RecordedHeader fresh = recorded(1, dirs[1], "lib/b.h");
  EXPECT_FALSE(fresh.stamp.recorded());
  const HeaderCheck check = check_headers({fresh}, dirs);
  EXPECT_TRUE(check.valid);
  EXPECT_EQ(check.rehashed, 1u);
}

TEST(DiskStoreManifest, IsWrittenBesideTheEntriesAndReadBackOrRefused) {
  TempDir dir;
  const DiskStore store(dir / "cache", Access::read_write);
  HeaderManifest manifest = sample();
  store.write_manifest(manifest, "gfx90a");
  DiskStore::ManifestLookup found = store.read_manifest(base, "gfx90a");
  ASSERT_TRUE(found.manifest) << found.problem;
  EXPECT_EQ(found.path.parent_path(), store.layout().entry_path(base, "gfx90a").parent_path());
  EXPECT_FALSE(store.read_manifest(base, "gfx1030").manifest);
  EXPECT_TRUE(store.read_manifest(base, "gfx1030").problem.empty()) << "no file: no problem";

  write_text(found.path, "kjit-header-manifest 1\nnonsense\n");
  found = store.read_manifest(base, "gfx90a");
  EXPECT_FALSE(found.manifest);
  EXPECT_FALSE(found.problem.empty());

  const DiskStore prebuilt(dir / "cache", Access::read_only);
  EXPECT_THROW(prebuilt.write_manifest(manifest, "gfx90a"), Error);
}

} // namespace
} // namespace kjit::cache
