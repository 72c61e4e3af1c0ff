#include "tests/support/files.hpp"
#include "tests/support/sample_entries.hpp"
#include "tests/support/temp_dir.hpp"

#include "kjit/cache/disk_store.hpp"
#include "kjit/error.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace kjit::cache {
namespace {

namespace fs = std::filesystem;
using testing::kTarget;
using testing::sample_code;
using testing::sample_entry;
using testing::TempDir;
using Status = Lookup::Status;
using kjit::testing::mode_of;
using kjit::testing::tree;

// Runs `write` and returns the Error it throws; fails the test if it throws none.
template <class Write> Error error_from(Write &&write) {
  try {
    write();
  } catch (const Error &error) {
    return error;
  }
  ADD_FAILURE() << "no kjit::Error thrown";
  return Error(Errc::cache_io, "(none)");
}

class DiskStoreTest : public ::testing::Test {
protected:
  TempDir scratch;
  fs::path root = scratch.path() / "cache";
  DiskStore store{root, Access::read_write};
  Entry entry = sample_entry("disk");
  Key key = entry.header.key;

  // Writes `entry` and returns where it went.
  fs::path write_entry() {
    store.write(entry);
    return store.layout().entry_path(key, kTarget);
  }

  // Creates the directories of the entry for (key, target) as the store would (0700, whatever
  // the umask) and returns the entry's path.
  fs::path make_entry_directory(const Key &entry_key, std::string_view target) {
    fs::path path = store.layout().entry_path(entry_key, target);
    fs::create_directories(path.parent_path());
    for (fs::path dir = path.parent_path(); dir != scratch.path(); dir = dir.parent_path())
      fs::permissions(dir, fs::perms::owner_all);
    return path;
  }

  // Puts a copy of the file at `from` where the entry for (key, target) belongs.
  void copy_to_entry_path(const fs::path &from, const Key &to_key, std::string_view target) {
    fs::copy_file(from, make_entry_directory(to_key, target));
  }

  // Only directories and published entries: no temp file was left behind.
  void expect_only_entries() {
    for (const std::string &path : tree(root))
      EXPECT_TRUE(fs::is_directory(root / path) || path.ends_with(".kjit")) << path;
  }

  void expect_rejected(std::string_view target, const std::string &problem_part) {
    Lookup lookup = store.read(key, target);
    EXPECT_EQ(lookup.status, Status::rejected);
    EXPECT_FALSE(lookup.entry);
    EXPECT_NE(lookup.problem.find(problem_part), std::string::npos) << lookup.problem;
  }
  void expect_rejected(const std::string &problem_part) { expect_rejected(kTarget, problem_part); }
};

TEST_F(DiskStoreTest, EntryPathIsTheDocumentedLayout) {
  std::string hex = key.hex();
  EXPECT_EQ(store.layout().entry_path(key, kTarget),
            root / "v2" / "gfx90a_sramecc+_xnack-" / hex.substr(0, 2) / (hex + ".kjit"));
}

TEST_F(DiskStoreTest, WriteThenReadHits) {
  fs::path path = write_entry();
  Lookup lookup = store.read(key, kTarget);
  EXPECT_EQ(lookup.status, Status::hit);
  ASSERT_TRUE(lookup.entry);
  EXPECT_EQ(*lookup.entry, entry);
  EXPECT_EQ(lookup.path, path);
  EXPECT_TRUE(lookup.problem.empty());
}

TEST_F(DiskStoreTest, RewritingReplacesTheEntry) {
  write_entry();
  entry.code = sample_code(1000);
  write_entry();
  Lookup lookup = store.read(key, kTarget);
  ASSERT_TRUE(lookup.entry);
  EXPECT_EQ(lookup.entry->code, entry.code);
}

TEST_F(DiskStoreTest, MissingEntryIsAMiss) {
  Lookup lookup = store.read(key, kTarget); // not even the root exists
  EXPECT_EQ(lookup.status, Status::miss);
  write_entry();
  lookup = store.read(sample_entry("other").header.key, kTarget);
  EXPECT_EQ(lookup.status, Status::miss);
  EXPECT_FALSE(lookup.entry);
  EXPECT_TRUE(lookup.problem.empty());
  EXPECT_EQ(store.read(key, "gfx908").status, Status::miss);
}

TEST_F(DiskStoreTest, CreatesPrivateDirectoriesAndFiles) {
  fs::path path = write_entry();
  for (fs::path dir = path.parent_path(); dir != scratch.path(); dir = dir.parent_path())
    EXPECT_EQ(mode_of(dir), 0700u) << dir;
  EXPECT_EQ(mode_of(path), 0600u);
}

TEST_F(DiskStoreTest, AnExistingRootKeepsItsMode) {
  fs::create_directory(root);
  fs::permissions(root, fs::perms(0755));
  write_entry();
  EXPECT_EQ(mode_of(root), 0755u);
  EXPECT_EQ(store.read(key, kTarget).status, Status::hit);
}

TEST_F(DiskStoreTest, FlippedByteIsRejected) {
  fs::path path = write_entry();
  std::vector<std::byte> bytes = testing::read_file_bytes(path);
  bytes[bytes.size() / 2] ^= std::byte{0x20};
  testing::write_file_bytes(path, bytes);
  expect_rejected("checksum mismatch");
}

TEST_F(DiskStoreTest, EntryFileOfAnotherKeyIsRejected) {
  Entry other = sample_entry("other");
  store.write(other);
  copy_to_entry_path(store.layout().entry_path(other.header.key, kTarget), key, kTarget);
  expect_rejected("entry holds key " + other.header.key.hex() + ", expected " + key.hex());
}

TEST_F(DiskStoreTest, EntryForAnotherTargetIsRejected) {
  copy_to_entry_path(write_entry(), key, "gfx908");
  expect_rejected("gfx908", std::string("entry is for ") + kTarget + ", expected gfx908");
}

TEST_F(DiskStoreTest, DirectoryWhereTheFileShouldBeIsRejected) {
  fs::create_directory(make_entry_directory(key, kTarget));
  expect_rejected("not a regular file");
}

TEST_F(DiskStoreTest, SymlinkIsRejected) {
  fs::path path = write_entry();
  fs::path elsewhere = scratch.path() / "elsewhere.kjit";
  fs::rename(path, elsewhere);
  fs::create_symlink(elsewhere, path);
  expect_rejected("symbolic link");
}

TEST_F(DiskStoreTest, FifoIsRejectedWithoutBlocking) {
  fs::path path = make_entry_directory(key, kTarget);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_rejected("not a regular file");
}

TEST_F(DiskStoreTest, FileWritableByOthersIsRejected) {
  fs::permissions(write_entry(), fs::perms(0666));
  expect_rejected("file is writable by group or others (mode 666)");
}

TEST_F(DiskStoreTest, DirectoryWritableByOthersIsRejectedAndNotWrittenInto) {
  fs::path directory = write_entry().parent_path();
  fs::permissions(directory, fs::perms(0777));
  expect_rejected("its directory is writable by group or others (mode 777)");
  Error error = error_from([&] { store.write(entry); });
  EXPECT_EQ(error.code(), Errc::cache_io);
  EXPECT_NE(error.summary().find("entries in it are not loaded"), std::string::npos);
}

TEST_F(DiskStoreTest, FileOwnedByAnotherUserIsRejected) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "only root can give a file away";
  fs::path path = write_entry();
  ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);
  expect_rejected("file is owned by uid 12345");
}

TEST_F(DiskStoreTest, WriteUnderAFileThrowsAndLeavesNothing) {
  // ENOTDIR holds for root too, unlike a directory without write permission.
  testing::write_file_bytes(scratch.path() / "afile", {});
  DiskStore blocked(scratch.path() / "afile" / "sub", Access::read_write);
  Error error = error_from([&] { blocked.write(entry); });
  EXPECT_EQ(error.code(), Errc::cache_io);
  EXPECT_NE(error.summary().find("cannot write cache entry"), std::string::npos);
  EXPECT_NE(error.summary().find("Not a directory"), std::string::npos) << error.summary();
  EXPECT_EQ(tree(scratch.path()), std::set<std::string>{"afile"});
  // Nothing can be stored there, so there is nothing to reject: reading is a plain miss (the
  // failed write is what reports the path).
  EXPECT_EQ(blocked.read(key, kTarget).status, Status::miss);
}

TEST_F(DiskStoreTest, WriteIntoAnUnwritableDirectoryThrowsAndLeavesNothing) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root writes regardless of permissions (WriteUnderAFile covers this path)";
  fs::create_directory(root);
  fs::permissions(root, fs::perms(0500));
  EXPECT_EQ(error_from([&] { store.write(entry); }).code(), Errc::cache_io);
  EXPECT_EQ(tree(scratch.path()), std::set<std::string>{"cache"});
}

TEST_F(DiskStoreTest, FailedPublicationRemovesTheTempFile) {
  // rename() cannot replace a non-empty directory: the temp file is written, then must go.
  fs::path path = make_entry_directory(key, kTarget);
  fs::create_directories(path / "occupied");
  Error error = error_from([&] { store.write(entry); });
  EXPECT_EQ(error.code(), Errc::cache_io);
  EXPECT_NE(error.summary().find("rename"), std::string::npos) << error.summary();
  std::set<std::string> left;
  for (const auto &item : fs::directory_iterator(path.parent_path()))
    left.insert(item.path().filename().string());
  EXPECT_EQ(left, std::set<std::string>{path.filename().string()});
}

TEST_F(DiskStoreTest, ReadOnlyStoreReadsButNeverWrites) {
  DiskStore prebuilt(root, Access::read_only);
  Error error = error_from([&] { prebuilt.write(entry); });
  EXPECT_EQ(error.code(), Errc::cache_io);
  EXPECT_NE(error.summary().find("is read-only (prebuilt tier)"), std::string::npos);
  EXPECT_EQ(error_from([&] { prebuilt.lock(key); }).code(), Errc::cache_io);
  EXPECT_FALSE(fs::exists(root));

  write_entry();
  EXPECT_EQ(prebuilt.read(key, kTarget).status, Status::hit);
  prebuilt.remove(key, kTarget);
  EXPECT_EQ(prebuilt.read(key, kTarget).status, Status::hit);
}

TEST_F(DiskStoreTest, RemoveDeletesTheEntry) {
  write_entry();
  store.remove(key, kTarget);
  EXPECT_EQ(store.read(key, kTarget).status, Status::miss);
  store.remove(key, kTarget); // already gone: no throw
}

TEST_F(DiskStoreTest, RemoveTakesAwayADirectoryPlantedUnderTheEntryName) {
  const fs::path path = make_entry_directory(key, kTarget);
  fs::create_directories(path / "inside");
  testing::write_file_bytes(path / "inside" / "file", sample_code(10));
  fs::create_symlink(scratch.path(), path / "link"); // removed itself, not what it points to
  store.remove(key, kTarget);
  EXPECT_FALSE(fs::exists(fs::symlink_status(path)));
  EXPECT_TRUE(fs::exists(scratch.path())) << "the link was not followed";
  store.write(entry);
  EXPECT_EQ(store.read(key, kTarget).status, Status::hit);
}

TEST_F(DiskStoreTest, RemoveLeavesADirectoryTreeInADirectoryOthersCanWrite) {
  const fs::path path = make_entry_directory(key, kTarget);
  fs::create_directory(path);
  fs::permissions(path.parent_path(), fs::perms(0777));
  store.remove(key, kTarget); // others could swap the tree's contents for links while it goes
  EXPECT_TRUE(fs::is_directory(path));
}

TEST_F(DiskStoreTest, UnsafeTargetIdsAreRefused) {
  for (const std::string &target : std::vector<std::string>{
           "", ".", "..", ".hidden", "gfx90a/..", "a/b", "gfx..90a", std::string("gfx90a\0x", 8)}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(store.read(key, target).status, Status::rejected);
    EXPECT_EQ(error_from([&] { store.layout().entry_path(key, target); }).code(), Errc::bad_target);
    entry.header.target = target;
    EXPECT_EQ(error_from([&] { store.write(entry); }).code(), Errc::bad_target);
    store.remove(key, target);
  }
  EXPECT_FALSE(fs::exists(root));
}

TEST_F(DiskStoreTest, OnlyCanonicalTargetIdsNameADirectory) {
  // kjit's own folders beside the target directories, then ids jit::Target would not write.
  for (const std::string &target : std::vector<std::string>{
           "lock", "stats", "compilers", "tuning", "GFX90A", "gfx090a", "gfx90g", "gfx",
           "gfx90a:xnack-:sramecc+", "gfx90a:xnack+:xnack-", "gfx90a:xnack", "gfx90a:", "sm_090",
           "sm_", "sm_90b", "sm_90:xnack+", "gfx-generic", "gfx9-x-generic", "tuning_xnack+"}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(store.read(key, target).status, Status::rejected);
    EXPECT_EQ(error_from([&] { store.layout().entry_path(key, target); }).code(), Errc::bad_target);
  }
  EXPECT_FALSE(fs::exists(root));
  for (const char *target : {"gfx90a", "gfx90a:sramecc+:xnack-", "gfx1030", "gfx9-4-generic",
                             "gfx10-3-generic:cumode+", "sm_90", "sm_90a", "sm_100f"})
    EXPECT_NO_THROW(store.layout().entry_path(key, target)) << target;
}

TEST_F(DiskStoreTest, WritesLeaveNoTempFiles) {
  for (int round = 0; round < 3; ++round)
    for (const char *seed : {"a", "b", "c"})
      store.write(sample_entry(seed, kTarget, 100 * round));
  expect_only_entries();
  EXPECT_TRUE(fs::exists(store.layout().entry_path(sample_entry("c").header.key, kTarget)));
}

TEST_F(DiskStoreTest, ConcurrentWritersNeverExposeAPartialEntry) {
  // Each writer writes at least kWritesEach times, and goes on (up to kMostWritesEach) until the
  // reader has seen a complete entry, so that reads overlap writes however the threads are
  // scheduled.
  constexpr int kWriters = 4, kWritesEach = 50, kMostWritesEach = 20000;
  std::atomic<int> writers_left{kWriters};
  std::atomic<int> write_failures{0};
  std::atomic<int> hits{0};
  int misses = 0;
  std::vector<std::string> problems;

  std::thread reader([&] {
    while (writers_left > 0) {
      Lookup lookup = store.read(key, kTarget);
      if (lookup.status == Status::hit &&
          lookup.entry->code == sample_code(lookup.entry->code.size()))
        ++hits;
      else if (lookup.status == Status::miss)
        ++misses;
      else
        problems.push_back(lookup.problem.empty() ? "hit with wrong code" : lookup.problem);
    }
  });
  std::vector<std::thread> writers;
  for (int writer = 0; writer < kWriters; ++writer)
    writers.emplace_back([&, writer] {
      for (int i = 0; i < kMostWritesEach && (i < kWritesEach || hits == 0); ++i) {
        Entry sized = entry;
        sized.code =
            sample_code(static_cast<std::size_t>((writer * kMostWritesEach + i) * 997 % 65536));
        try {
          store.write(sized);
        } catch (const Error &) {
          ++write_failures;
        }
      }
      --writers_left;
    });
  for (auto &writer : writers)
    writer.join();
  reader.join();

  EXPECT_EQ(write_failures, 0);
  EXPECT_TRUE(problems.empty()) << problems.size() << " rejected, first: " << problems.front();
  EXPECT_GT(hits, 0);
  EXPECT_EQ(store.read(key, kTarget).status, Status::hit);
  expect_only_entries();
  RecordProperty("hits", hits.load());
  RecordProperty("misses", misses);
}

TEST_F(DiskStoreTest, LockUsesOnePrivateLockFile) {
  FileLock lock = store.lock(key);
  FileLock other = store.lock(sample_entry("other").header.key); // another byte: no wait
  EXPECT_EQ(mode_of(root / "v2" / "lock"), 0600u);
  EXPECT_EQ(mode_of(root / "v2"), 0700u);
  EXPECT_EQ(tree(root), (std::set<std::string>{"v2", "v2/lock"}));
}

} // namespace
} // namespace kjit::cache
