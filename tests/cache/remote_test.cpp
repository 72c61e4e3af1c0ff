#include "kjit/cache/remote.hpp"

#include "tests/support/fake_remote.hpp"

#include <gtest/gtest.h>

namespace kjit::cache {
namespace {

Key key_of_text(std::string_view text) {
  return KeyBuilder().add("text", std::string(text)).finish();
}

RecordKey record(std::string target, std::string_view text = "a") {
  return {kEntryRecord, std::move(target), key_of_text(text)};
}

TEST(RemoteNames, NamespacedByKindFormatAndTarget) {
  const RecordKey entry = record("gfx90a:sramecc+:xnack-");
  EXPECT_EQ(storage_name(entry), "kjit/entry/v" + std::to_string(kEntryFormatVersion) +
                                     "/gfx90a:sramecc+:xnack-/" + entry.key.hex());
  EXPECT_TRUE(storage_name(entry).starts_with(storage_prefix(kEntryRecord)));
  EXPECT_FALSE(lease_name(entry).starts_with(storage_prefix(kEntryRecord)));
  EXPECT_NE(lease_name(entry), storage_name(entry));

  constexpr RecordKind tuning{"tuning", 1};
  const RecordKey table{tuning, "sm_90a", entry.key};
  EXPECT_NE(storage_name(table), storage_name(entry));
  EXPECT_FALSE(parse_storage_name(storage_name(table), kEntryRecord));
  EXPECT_EQ(parse_storage_name(storage_name(table), tuning), table);
}

TEST(RemoteNames, ParseIsTheInverseAndRefusesOtherShapes) {
  const RecordKey entry = record("sm_90a");
  EXPECT_EQ(parse_storage_name(storage_name(entry), kEntryRecord), entry);
  const std::string prefix = storage_prefix(kEntryRecord);
  for (std::string bad : {std::string("kjit/entry/v999/sm_90a/") + entry.key.hex(),
                          prefix + "sm_90a/" + entry.key.hex().substr(1), prefix + entry.key.hex(),
                          prefix + "/" + entry.key.hex(), prefix + "a/b/" + entry.key.hex(),
                          lease_name(entry), std::string("other")})
    EXPECT_FALSE(parse_storage_name(bad, kEntryRecord)) << bad;
}

std::vector<std::byte> bytes(std::string_view text) {
  std::vector<std::byte> out;
  for (char c : text)
    out.push_back(static_cast<std::byte>(c));
  return out;
}

TEST(FakeRemote, OnlyIfAbsentKeepsThePresentValue) {
  testing::FakeRemote remote;
  const RecordKey entry = record("sm_90a");
  auto missing = remote.get(entry);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing.value());
  EXPECT_EQ(remote.put(entry, bytes("one"), PutMode::only_if_absent).value(), PutOutcome::stored);
  EXPECT_EQ(remote.put(entry, bytes("two"), PutMode::only_if_absent).value(),
            PutOutcome::already_present);
  EXPECT_EQ(*remote.get(entry).value(), bytes("one"));
  EXPECT_EQ(remote.put(entry, bytes("two"), PutMode::overwrite).value(), PutOutcome::stored);
  EXPECT_EQ(*remote.get(entry).value(), bytes("two"));
  EXPECT_TRUE(remote.remove(entry).value());
  EXPECT_FALSE(remote.remove(entry).value());
}

TEST(FakeRemote, FailuresAreValues) {
  testing::FakeRemote remote;
  remote.fail_with(RemoteFault{RemoteFailure::error, "refused"});
  auto failed = remote.get(record("sm_90a"));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.fault().failure, RemoteFailure::error);
  remote.fail_with(std::nullopt);
  remote.delay(std::chrono::milliseconds(50), {.operation = std::chrono::milliseconds(5)});
  auto stalled = remote.put(record("sm_90a"), bytes("x"), PutMode::only_if_absent);
  ASSERT_FALSE(stalled.ok());
  EXPECT_EQ(stalled.fault().failure, RemoteFailure::timeout);
}

TEST(FakeRemote, LeaseIsExclusiveUntilReleasedOrExpired) {
  testing::FakeRemote remote;
  const RecordKey entry = record("sm_90a");
  const auto long_ttl = std::chrono::seconds(60);
  auto first = remote.try_acquire(entry, long_ttl).value();
  ASSERT_TRUE(first);
  EXPECT_FALSE(remote.try_acquire(entry, long_ttl).value());
  EXPECT_TRUE(remote.renew(entry, *first, long_ttl).value());
  EXPECT_FALSE(remote.release(entry, "someone else's").value());
  EXPECT_TRUE(remote.release(entry, *first).value());
  auto second = remote.try_acquire(entry, std::chrono::milliseconds(1)).value();
  ASSERT_TRUE(second);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(remote.renew(entry, *second, long_ttl).value()); // expired: lost
  auto third = remote.try_acquire(entry, long_ttl).value();
  ASSERT_TRUE(third);
  EXPECT_FALSE(remote.release(entry, *second).value()); // never deletes another holder's lease
  EXPECT_FALSE(remote.try_acquire(entry, long_ttl).value());
}

TEST(FakeRemote, ScanVisitsTheRecordsOfOneKind) {
  testing::FakeRemote remote;
  remote.put(record("sm_90a", "a"), bytes("1"), PutMode::overwrite);
  remote.put(record("gfx90a", "b"), bytes("2"), PutMode::overwrite);
  remote.put({RecordKind{"tuning", 1}, "sm_90a", key_of_text("a")}, bytes("3"), PutMode::overwrite);
  std::vector<RecordKey> seen;
  auto visits = remote.scan(kEntryRecord, [&](const RecordKey &found) { seen.push_back(found); });
  ASSERT_TRUE(visits.ok());
  EXPECT_EQ(visits.value(), 2u);
  EXPECT_EQ(seen.size(), 2u);
}

} // namespace
} // namespace kjit::cache
