// The tiered store on its own, over temporary directories and an in-process fake remote: the
// order of the cascade, the promotion of a remote hit into the user tier, a bad entry in one tier
// falling through to the next, the re-read under the lock, and a read-only tier never written.
#include "kjit/cache/layout.hpp"
#include "runtime/src/tiered_store.hpp"
#include "tests/runtime/fake_compiler.hpp"
#include "tests/support/fake_remote.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/sample_entries.hpp"
#include "tests/support/temp_dir.hpp"

#include <fstream>
#include <future>
#include <gtest/gtest.h>
#include <map>

namespace kjit {
namespace {

namespace fs = std::filesystem;
using testing::FakeRemote;
using testing::kTarget;
using testing::LogCapture;
using testing::sample_entry;
using testing::TempDir;

// Every file under `root` with its size and mtime: what a read-only tier must keep.
std::map<fs::path, std::pair<std::uintmax_t, fs::file_time_type>> snapshot(const fs::path &root) {
  std::map<fs::path, std::pair<std::uintmax_t, fs::file_time_type>> files;
  for (const auto &item : fs::recursive_directory_iterator(root))
    files[item.path()] = {item.is_regular_file() ? item.file_size() : 0, item.last_write_time()};
  return files;
}

class TieredStoreTest : public ::testing::Test {
protected:
  TieredStoreTest() {
    config.cache_dir = home / "cache";
    config.prebuilt_dir = home / "prebuilt";
    config.remote_urls = {testing::fake_remote_url(remote)};
    config.fleet = {.lease_ttl = std::chrono::milliseconds(300),
                    .wait = std::chrono::milliseconds(1000),
                    .poll = std::chrono::milliseconds(2)};
    fs::create_directories(config.prebuilt_dir);
  }

  // `entry` with its code marked by the tier it is put in, so a hit says where it came from.
  static cache::Entry marked(cache::Entry entry, std::byte mark) {
    entry.code.front() = mark;
    return entry;
  }
  void put_prebuilt(const cache::Entry &entry) {
    cache::DiskStore(config.prebuilt_dir, cache::Access::read_write)
        .write(marked(entry, kPrebuilt));
  }
  void put_user(const cache::Entry &entry) { user.write(marked(entry, kUser)); }
  void put_remote(const cache::Entry &entry) {
    remote->set_raw({cache::kEntryRecord, entry.header.target, entry.header.key},
                    cache::encode_entry(marked(entry, kRemote)));
  }
  static void corrupt(const fs::path &path) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-1, std::ios::end);
    file.put('\x5a');
  }
  std::optional<Found> find(TieredStore &store, const cache::Entry &entry,
                            const TieredStore::MakeStandIns &stand_ins = none) {
    return store.find(entry.header.key, entry.header.target, stand_ins);
  }

  static constexpr std::byte kPrebuilt{0x01}, kUser{0x02}, kRemote{0x03};
  static inline const TieredStore::MakeStandIns none = [] {
    return std::vector<TieredStore::StandIn>();
  };

  TempDir home;
  Config config;
  std::shared_ptr<FakeRemote> remote = std::make_shared<FakeRemote>();
  const cache::DiskStore user{home / "cache", cache::Access::read_write};
  const cache::Entry entry = sample_entry("one");
};

TEST_F(TieredStoreTest, AsksEachPrebuiltTierInOrderKjitsOwnLastAndWritesNone) {
  const cache::Entry other = sample_entry("two");
  const fs::path library = home / "mylib-prebuilt", missing = home / "missing";
  cache::DiskStore(library, cache::Access::read_write).write(marked(entry, std::byte{0x11}));
  put_prebuilt(entry);
  put_prebuilt(other);
  config.prebuilt_dirs = {missing, library};
  const auto before = snapshot(library);
  TieredStore store(config);

  auto found = find(store, entry);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::prebuilt);
  EXPECT_EQ(found->record.code.front(), std::byte{0x11}) << "the library's tier comes first";
  EXPECT_EQ(found->path.string().rfind(library.string(), 0), 0u) << found->path;
  found = find(store, other);
  ASSERT_TRUE(found) << "kjit's own tier is searched after it";
  EXPECT_EQ(found->record.code.front(), kPrebuilt);
  EXPECT_EQ(snapshot(library), before) << "a prebuilt tier is read-only";
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(TieredStoreTest, AsksPrebuiltThenUserThenRemote) {
  put_prebuilt(entry);
  put_user(entry);
  put_remote(entry);
  TieredStore store(config);

  auto found = find(store, entry);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::prebuilt);
  EXPECT_EQ(found->record.code.front(), kPrebuilt);
  EXPECT_EQ(remote->gets(), 0) << "a local hit asks no remote";

  fs::remove_all(cache::Layout(config.prebuilt_dir).version_directory());
  found = find(store, entry);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::user_cache);
  EXPECT_EQ(found->record.code.front(), kUser);
  EXPECT_EQ(found->path, user.layout().entry_path(entry.header.key, kTarget));

  ASSERT_EQ(user.remove(entry.header.key, kTarget), "");
  found = find(store, entry);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::remote);
  EXPECT_EQ(found->record.code.front(), kRemote);

  TieredStore cold(config);
  EXPECT_FALSE(find(cold, sample_entry("absent")));
}

TEST_F(TieredStoreTest, ARemoteHitIsKeptInTheUserTier) {
  put_remote(entry);
  TieredStore store(config);
  auto found = find(store, entry);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::remote);
  EXPECT_EQ(found->path, user.layout().entry_path(entry.header.key, kTarget));

  cache::Lookup kept = user.read(entry.header.key, kTarget);
  ASSERT_EQ(kept.status, cache::Lookup::Status::hit);
  EXPECT_EQ(kept.entry->code.front(), kRemote);
  const int gets = remote->gets();
  found = find(store, entry);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::user_cache);
  EXPECT_EQ(remote->gets(), gets);
}

TEST_F(TieredStoreTest, ABadEntryInOneTierFallsThroughToTheNext) {
  put_prebuilt(entry);
  put_user(entry);
  put_remote(entry);
  corrupt(cache::DiskStore(config.prebuilt_dir, cache::Access::read_only)
              .layout()
              .entry_path(entry.header.key, kTarget));
  corrupt(user.layout().entry_path(entry.header.key, kTarget));
  LogCapture log;
  TieredStore store(config);

  auto found = find(store, entry);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::remote);
  EXPECT_EQ(log.warnings(), 2) << log.text();
  EXPECT_EQ(user.read(entry.header.key, kTarget).status, cache::Lookup::Status::hit)
      << "the remote's entry replaced the corrupt one";

  // A value in the remote that is another key's entry is a miss too.
  const cache::Entry other = sample_entry("other");
  remote->set_raw({cache::kEntryRecord, kTarget, other.header.key}, cache::encode_entry(entry));
  EXPECT_FALSE(find(store, other));
}

TEST_F(TieredStoreTest, AnEntryOfSeveralKernelsIsAMiss) {
  cache::Entry several = entry;
  several.header.kernels.push_back({"scale<half, 256>", "_Z5scaleI6__halfLi256EEvPT_S2_i"});
  put_user(several);
  put_remote(entry);
  LogCapture log;
  TieredStore store(config);
  auto found = find(store, entry);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::remote);
  EXPECT_NE(log.text().find("expected 1"), std::string::npos) << log.text();
}

TEST_F(TieredStoreTest, StandInsAreAskedAfterTheLocalTiersAndBeforeTheRemote) {
  const cache::Entry portable = sample_entry("one", "gfx90a");
  const cache::Entry generic = sample_entry("one", "gfx9-generic");
  put_user(generic);
  put_prebuilt(portable);
  put_remote(entry);
  int made = 0;
  auto stand_ins = [&] {
    ++made;
    return std::vector<TieredStore::StandIn>{{portable.header.key, "gfx90a"},
                                             {generic.header.key, "gfx9-generic"}};
  };
  TieredStore store(config);
  auto found = find(store, entry, stand_ins);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::prebuilt);
  EXPECT_EQ(found->record.header.target, "gfx90a") << "the stand-ins in their order";
  EXPECT_EQ(remote->gets(), 0);

  fs::remove_all(cache::Layout(config.prebuilt_dir).version_directory());
  found = find(store, entry, stand_ins);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::user_cache);
  EXPECT_EQ(found->record.header.target, "gfx9-generic");

  put_user(entry);
  made = 0;
  ASSERT_TRUE(find(store, entry, stand_ins));
  EXPECT_EQ(made, 0) << "a stand-in costs a key: made only when the local tiers miss";
}

// The device's runtime loads code objects up to a version (a generic target's are version 6): a
// newer entry is a miss, the next stand-in is asked, and one warning tells why for that target.
TEST_F(TieredStoreTest, AnEntryNewerThanTheDevicesRuntimeLoadsIsAMissWarnedOnce) {
  cache::Entry generic = sample_entry("one", "gfx12-generic");
  generic.code = testing::FakeCompiler::code_object_header(6);
  cache::Entry processor = sample_entry("one", "gfx1201");
  processor.code = testing::FakeCompiler::code_object_header(5);
  cache::DiskStore(config.prebuilt_dir, cache::Access::read_write).write(generic);
  user.write(processor);
  auto stand_ins = [&] {
    return std::vector<TieredStore::StandIn>{{generic.header.key, generic.header.target},
                                             {processor.header.key, processor.header.target}};
  };
  LogCapture log;
  TieredStore store(config);
  for (int lookup = 0; lookup < 3; ++lookup) {
    auto found = store.find(entry.header.key, entry.header.target, stand_ins, 5);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->record.header.target, "gfx1201");
  }
  EXPECT_EQ(log.warnings(), 1) << log.text();
  EXPECT_NE(log.text().find("for gfx12-generic: its code object is version 6"), std::string::npos)
      << log.text();

  for (int newest : {6, any_code_object}) {
    auto found = store.find(entry.header.key, entry.header.target, stand_ins, newest);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->record.header.target, "gfx12-generic") << newest;
  }
  fs::remove(user.layout().entry_path(processor.header.key, processor.header.target));
  EXPECT_FALSE(store.find(sample_entry("absent").header.key, kTarget, stand_ins, 4))
      << "no stand-in a version 4 runtime loads";
}

TEST_F(TieredStoreTest, ReadOnlyTiersAreNeverWritten) {
  put_prebuilt(sample_entry("shipped"));
  put_remote(entry);
  const auto before = snapshot(config.prebuilt_dir);
  {
    TieredStore store(config);
    ASSERT_TRUE(find(store, sample_entry("shipped")));
    ASSERT_TRUE(find(store, entry)); // a remote hit: promoted to the user tier only
    const cache::Entry compiled = sample_entry("compiled");
    {
      TieredStore::Compiling compiling = store.begin_compile(compiled.header.key, kTarget, true);
      ASSERT_FALSE(compiling.published);
      store.publish(compiling, compiled);
    }
    store.add_statistics({.compiles = 1});
    store.prune(1);
  }
  EXPECT_EQ(snapshot(config.prebuilt_dir), before);
  EXPECT_EQ(user.read(sample_entry("shipped").header.key, kTarget).status,
            cache::Lookup::Status::miss)
      << "a prebuilt hit is not copied";

  // A read-only remote is asked but never written.
  config.remote_urls = {testing::fake_remote_url(remote, true)};
  TieredStore store(config);
  const cache::Entry compiled = sample_entry("compiled elsewhere");
  TieredStore::Compiling compiling = store.begin_compile(compiled.header.key, kTarget, true);
  store.publish(compiling, compiled);
  EXPECT_FALSE(remote->raw({cache::kEntryRecord, kTarget, compiled.header.key}));
}

TEST_F(TieredStoreTest, ACompileIsPublishedToTheUserTierAndTheRemote) {
  TieredStore store(config);
  ASSERT_FALSE(find(store, entry));
  TieredStore::Compiling compiling = store.begin_compile(entry.header.key, kTarget, true);
  ASSERT_FALSE(compiling.published);
  EXPECT_EQ(store.publish(compiling, entry), user.layout().entry_path(entry.header.key, kTarget));
  EXPECT_EQ(user.read(entry.header.key, kTarget).status, cache::Lookup::Status::hit);
  EXPECT_EQ(remote->raw({cache::kEntryRecord, kTarget, entry.header.key}),
            cache::encode_entry(entry));

  // Without a user tier, the remote still gets it.
  config.cache_dir.clear();
  TieredStore memory_only(config);
  const cache::Entry other = sample_entry("other");
  TieredStore::Compiling unlocked = memory_only.begin_compile(other.header.key, kTarget, true);
  EXPECT_EQ(memory_only.publish(unlocked, other), fs::path());
  EXPECT_TRUE(remote->raw({cache::kEntryRecord, kTarget, other.header.key}));
}

TEST_F(TieredStoreTest, UnderTheLockTheUserTierIsReadAgain) {
  TieredStore store(config);
  ASSERT_FALSE(find(store, entry));
  put_user(entry); // another process published it meanwhile
  TieredStore::Compiling compiling = store.begin_compile(entry.header.key, kTarget, true);
  ASSERT_TRUE(compiling.published);
  EXPECT_EQ(compiling.published->origin, Origin::user_cache);
  EXPECT_EQ(compiling.published->record.code.front(), kUser);

  // KJIT_REBUILD: nothing is reused.
  TieredStore::Compiling rebuilding =
      store.begin_compile(sample_entry("two").header.key, kTarget, false);
  EXPECT_FALSE(rebuilding.published);
}

TEST_F(TieredStoreTest, UnderTheLockARejectedUserEntryIsRemoved) {
  const fs::path planted = user.layout().entry_path(entry.header.key, kTarget);
  fs::create_directories(planted / "inside");
  LogCapture log;
  TieredStore store(config);
  ASSERT_FALSE(find(store, entry));
  TieredStore::Compiling compiling = store.begin_compile(entry.header.key, kTarget, true);
  EXPECT_FALSE(compiling.published);
  EXPECT_FALSE(fs::exists(planted));
  EXPECT_EQ(store.publish(compiling, entry), planted);
  EXPECT_TRUE(fs::is_regular_file(planted));
}

TEST_F(TieredStoreTest, ANodeWaitingOnAnotherNodesLeaseTakesWhatItPublishes) {
  TieredStore holder(config), waiter(config);
  TieredStore::Compiling compiling = holder.begin_compile(entry.header.key, kTarget, true);
  ASSERT_FALSE(compiling.published);
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    holder.publish(compiling, entry);
  });
  config.cache_dir = home / "other-node";
  TieredStore other_node(config);
  TieredStore::Compiling waited = other_node.begin_compile(entry.header.key, kTarget, true);
  publisher.join();
  ASSERT_TRUE(waited.published);
  EXPECT_EQ(waited.published->origin, Origin::remote);
  EXPECT_TRUE(fs::is_regular_file(waited.published->path)) << "kept in its user tier";
}

TEST_F(TieredStoreTest, StatisticsAndPruningAreSeparate) {
  {
    TieredStore store(config);
    {
      TieredStore::Compiling compiling = store.begin_compile(entry.header.key, kTarget, true);
      store.publish(compiling, entry);
    }
    store.add_statistics({.user_hits = 2, .compiles = 1});
    EXPECT_EQ(user.read(entry.header.key, kTarget).status, cache::Lookup::Status::hit)
        << "adding statistics prunes nothing";
    store.prune(1);
  }
  const cache::CacheCounters total = cache::StatsFiles(user.layout().stats_directory()).total();
  EXPECT_EQ(total.compiles, 1u);
  EXPECT_EQ(total.user_hits, 2u);
  EXPECT_EQ(user.read(entry.header.key, kTarget).status, cache::Lookup::Status::miss)
      << "pruned to one byte";
}

// The project's rule: never hang past a stated timeout. A process holding a key's lock that hangs
// (a compile stuck in the compiler) delays another process's compile of that key by at most
// FleetWait::wait (KJIT_REMOTE_WAIT_MS); then it compiles and publishes the entry itself.
TEST_F(TieredStoreTest, ACompileWaitsForAHungLockHolderAtMostTheStatedTimeout) {
  config.fleet.wait = std::chrono::milliseconds(200);
  TieredStore store(config);
  std::optional<cache::FileLock> hung = user.lock(entry.header.key);
  auto waiter = std::async(std::launch::async,
                           [&] { return store.begin_compile(entry.header.key, kTarget, true); });
  const bool returned = waiter.wait_for(config.fleet.wait * 20) == std::future_status::ready;
  hung.reset(); // so that a waiter that blocks (the defect) ends with the test
  TieredStore::Compiling compiling = waiter.get();
  EXPECT_TRUE(returned) << "waited for the lock holder past KJIT_REMOTE_WAIT_MS";
  EXPECT_FALSE(compiling.locked());
  EXPECT_FALSE(compiling.published);
  EXPECT_EQ(store.publish(compiling, entry), user.layout().entry_path(entry.header.key, kTarget))
      << "published without the lock: the write is a rename";
}

} // namespace
} // namespace kjit
