// The record store (runtime/src/record_store.hpp) for each kind of record it keeps, code entries
// and tuning records alike: the tier order, the publish to the user tier and the remote, and the
// one waiting policy (a waiter takes what the lock holder published, and waits for a holder that
// hangs at most FleetWait::wait).
#include "kjit/runtime/tuning_table.hpp"
#include "runtime/src/entry_kind.hpp"
#include "runtime/src/record_store.hpp"
#include "tests/runtime/tuning_records.hpp"
#include "tests/support/fake_remote.hpp"
#include "tests/support/sample_entries.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <future>
#include <gtest/gtest.h>
#include <thread>

namespace kjit {
namespace {

namespace fs = std::filesystem;
using testing::FakeRemote;
using testing::TempDir;

// The record of one key, marked by a number so that a hit says which tier it came from.
struct Entries {
  using Kind = EntryKind;
  const cache::Entry entry = testing::sample_entry("one");
  std::vector<cache::DiskStore> stores;

  explicit Entries(const fs::path &home) {
    for (const char *name : {"first", "second", "user"})
      stores.emplace_back(home / name, cache::Access::read_write);
  }
  std::vector<Kind::Tier> prebuilt() const { return {&stores[0], &stores[1]}; }
  Kind::Tier user() const { return &stores[2]; }
  EntryKey key() const { return {entry.header.key, entry.header.target}; }
  cache::Entry record(int mark) const {
    cache::Entry marked = entry;
    marked.code.front() = static_cast<std::byte>(mark);
    return marked;
  }
  static int mark(const cache::Entry &record) { return static_cast<int>(record.code.front()); }
};

struct TuningRecords {
  using Kind = TuningKind;
  std::vector<fs::path> directories;

  explicit TuningRecords(const fs::path &home) {
    for (const char *name : {"first", "second", "user"})
      directories.push_back(home / name / "tuning");
  }
  std::vector<Kind::Tier> prebuilt() const { return {directories[0], directories[1]}; }
  Kind::Tier user() const { return directories[2]; }
  TuningKey key() const { return testing::rms_key(4096); }
  TuningRecord record(int mark) const {
    TuningRecord marked = testing::record_for(key());
    marked.winner.time_us = mark;
    return marked;
  }
  static int mark(const TuningRecord &record) { return static_cast<int>(record.winner.time_us); }
};

template <typename Records> class RecordStoreTest : public ::testing::Test {
protected:
  using Kind = typename Records::Kind;
  using Store = RecordStore<Kind>;

  RecordStoreTest() {
    fleet = {.lease_ttl = std::chrono::milliseconds(300),
             .wait = std::chrono::milliseconds(1000),
             .poll = std::chrono::milliseconds(2)};
    remote_tier = std::make_unique<RemoteTier>(
        std::vector<cache::RemoteStorage>{{"fake://remote", false, remote, remote, remote}}, fleet);
  }

  // Another process of this machine: its own store over the same tiers, and its own remote tier.
  std::unique_ptr<Store> store(bool with_user = true) {
    return std::make_unique<Store>(Kind{}, records.prebuilt(),
                                   with_user ? std::optional(records.user()) : std::nullopt,
                                   *remote_tier, fleet);
  }
  void put(const typename Kind::Tier &tier, int mark) { Kind{}.write(tier, records.record(mark)); }
  void put_remote(int mark) {
    const auto record = records.record(mark);
    remote->set_raw(Kind{}.remote_key_of(record), Kind{}.encode(record));
  }

  TempDir home;
  Records records{home.path()};
  FleetWait fleet;
  std::shared_ptr<FakeRemote> remote = std::make_shared<FakeRemote>();
  std::unique_ptr<RemoteTier> remote_tier;
};

using Kinds = ::testing::Types<Entries, TuningRecords>;
TYPED_TEST_SUITE(RecordStoreTest, Kinds);

TYPED_TEST(RecordStoreTest, AsksThePrebuiltTiersInOrderThenTheUserTierThenTheRemote) {
  auto store = this->store();
  EXPECT_FALSE(store->find(this->records.key()));

  this->put_remote(4);
  auto found = store->find(this->records.key());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::remote);
  EXPECT_EQ(TypeParam::mark(found->record), 4);

  found = store->find(this->records.key());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::user_cache) << "the remote's hit is kept in the user tier";
  EXPECT_EQ(TypeParam::mark(found->record), 4);

  this->put(this->records.prebuilt()[1], 2);
  found = store->find(this->records.key());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::prebuilt);
  EXPECT_EQ(TypeParam::mark(found->record), 2) << "a prebuilt tier before the user tier";

  this->put(this->records.prebuilt()[0], 1);
  found = store->find(this->records.key());
  ASSERT_TRUE(found);
  EXPECT_EQ(TypeParam::mark(found->record), 1) << "the prebuilt tiers in their order";
}

TYPED_TEST(RecordStoreTest, ARecordMadeIsPublishedToTheUserTierAndTheRemote) {
  auto store = this->store();
  {
    auto making = store->begin(this->records.key(), true);
    ASSERT_FALSE(making.published);
    EXPECT_TRUE(making.locked());
    EXPECT_FALSE(store->publish(making, this->records.record(7)).empty());
  }
  EXPECT_TRUE(this->remote->raw(typename TestFixture::Kind{}.remote_key(this->records.key())));

  auto memory_only = this->store(/*with_user=*/false);
  auto found = memory_only->find(this->records.key());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::remote);
  EXPECT_EQ(TypeParam::mark(found->record), 7);
  found = store->find(this->records.key());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->origin, Origin::user_cache);
}

TYPED_TEST(RecordStoreTest, AWaiterTakesWhatTheLockHolderPublished) {
  auto holder = this->store();
  std::optional<typename TestFixture::Store::Making> holding =
      holder->begin(this->records.key(), true);
  ASSERT_TRUE(holding->locked());

  auto waiter = std::async(std::launch::async, [&] {
    return this->store()->begin(this->records.key(), true).published;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  holder->publish(*holding, this->records.record(5));
  holding.reset(); // releases the lock and the lease
  const auto published = waiter.get();
  ASSERT_TRUE(published) << "the waiter made it again";
  EXPECT_EQ(published->origin, Origin::user_cache);
  EXPECT_EQ(TypeParam::mark(published->record), 5);
}

// The project's rule: never hang past a stated timeout, for every kind alike.
TYPED_TEST(RecordStoreTest, AWaiterForAHungLockHolderMakesItAfterTheStatedTimeout) {
  this->fleet.wait = std::chrono::milliseconds(200);
  std::optional<cache::FileLock> hung =
      typename TestFixture::Kind{}.lock(this->records.user(), this->records.key(), this->fleet);
  ASSERT_TRUE(hung);

  const auto started = std::chrono::steady_clock::now();
  auto waiter = std::async(std::launch::async, [&] {
    auto store = this->store();
    auto making = store->begin(this->records.key(), true);
    EXPECT_FALSE(making.locked());
    EXPECT_FALSE(making.published);
    return store->publish(making, this->records.record(6));
  });
  const bool returned = waiter.wait_for(this->fleet.wait * 20) == std::future_status::ready;
  hung.reset();
  const fs::path published = waiter.get();
  EXPECT_TRUE(returned) << "waited past FleetWait::wait";
  EXPECT_GE(std::chrono::steady_clock::now() - started, this->fleet.wait - this->fleet.poll)
      << "it waited for the holder first";
  EXPECT_FALSE(published.empty()) << "published to the user tier without the lock";
  EXPECT_EQ(TypeParam::mark(this->store()->find(this->records.key())->record), 6);
}

} // namespace
} // namespace kjit
