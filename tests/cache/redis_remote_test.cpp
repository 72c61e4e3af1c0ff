// The Redis remote against a real redis-server on a loopback port: records, leases and listing,
// then every fault the issue names, each a fault value within the configured timeouts.
#include "kjit/cache/redis_remote.hpp"

#include "kjit/cache/signed_remote.hpp"
#include "tests/support/files.hpp"
#include "tests/support/redis_server.hpp"

#include <gtest/gtest.h>

#include <set>

namespace kjit::cache {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using testing::bytes_of;

RecordKey record(std::string_view text) {
  return {kEntryRecord, "gfx90a:sramecc+:xnack-",
          KeyBuilder().add("t", std::string(text)).finish()};
}

RemoteStorage open(const std::string &url) {
  return open_redis_remote(parse_remote_storage(url).at(0));
}

class RedisRemoteTest : public ::testing::Test {
protected:
  testing::RedisServer server;
};

TEST_F(RedisRemoteTest, PutsOnlyIfAbsentGetsRemovesAndScans) {
  RemoteStorage remote = open(server.url());
  const RecordKey a = record("a");
  auto missing = remote.backend->get(a);
  ASSERT_TRUE(missing.ok()) << missing.fault().message;
  EXPECT_FALSE(missing.value());

  std::vector<std::byte> value =
      bytes_of(std::string("\0binary\r\n", 9) + std::string(100000, 'x'));
  auto stored = remote.backend->put(a, value, PutMode::only_if_absent);
  ASSERT_TRUE(stored.ok()) << stored.fault().message;
  EXPECT_EQ(stored.value(), PutOutcome::stored);
  auto kept = remote.backend->put(a, bytes_of("other"), PutMode::only_if_absent);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept.value(), PutOutcome::already_present);
  auto back = remote.backend->get(a);
  ASSERT_TRUE(back.ok() && back.value());
  EXPECT_EQ(*back.value(), value);

  ASSERT_TRUE(remote.backend->put(record("b"), bytes_of("b"), PutMode::overwrite).ok());
  ASSERT_TRUE(server.admin("SET %s %s", "kjit/entry/v2/not-a-key", "x"));
  ASSERT_TRUE(remote.leases->try_acquire(record("c"), 10s).ok());
  std::set<std::string> seen;
  auto visits =
      remote.listing->scan(kEntryRecord, [&](const RecordKey &r) { seen.insert(r.key.hex()); });
  ASSERT_TRUE(visits.ok()) << visits.fault().message;
  EXPECT_EQ(seen, (std::set<std::string>{a.key.hex(), record("b").key.hex()}));

  auto removed = remote.backend->remove(a);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed.value());
  EXPECT_FALSE(remote.backend->get(a).value());
}

TEST_F(RedisRemoteTest, SelectsTheDatabaseAndReachesAUnixSocket) {
  RemoteStorage db0 = open(server.url());
  RemoteStorage db1 = open(server.url("writer", "/1"));
  RemoteStorage by_socket = open("redis+unix://writer:" + std::string(server.kWriterPassword) +
                                 "@" + server.socket_path() + "?db=1");
  ASSERT_TRUE(db1.backend->put(record("a"), bytes_of("in 1"), PutMode::overwrite).ok());
  EXPECT_FALSE(db0.backend->get(record("a")).value());
  auto through_socket = by_socket.backend->get(record("a"));
  ASSERT_TRUE(through_socket.ok()) << through_socket.fault().message;
  ASSERT_TRUE(through_socket.value());
  EXPECT_EQ(*through_socket.value(), bytes_of("in 1"));
}

TEST_F(RedisRemoteTest, LeasesAreExclusiveRenewableReleasedByTheirHolderAndExpire) {
  RemoteStorage one = open(server.url()), two = open(server.url());
  const RecordKey r = record("leased");
  auto held = one.leases->try_acquire(r, 10s);
  ASSERT_TRUE(held.ok() && held.value());
  auto refused = two.leases->try_acquire(r, 10s);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused.value());
  EXPECT_FALSE(two.leases->renew(r, "not the token", 10s).value());
  EXPECT_FALSE(two.leases->release(r, "not the token").value());
  EXPECT_TRUE(one.leases->renew(r, *held.value(), 10s).value());
  EXPECT_TRUE(one.leases->release(r, *held.value()).value());
  EXPECT_FALSE(one.leases->release(r, *held.value()).value()) << "released twice";

  auto short_lease = one.leases->try_acquire(r, 150ms);
  ASSERT_TRUE(short_lease.ok() && short_lease.value());
  std::this_thread::sleep_for(400ms);
  auto after_expiry = two.leases->try_acquire(r, 10s);
  ASSERT_TRUE(after_expiry.ok() && after_expiry.value()) << "an expired lease still held";
  EXPECT_FALSE(one.leases->renew(r, *short_lease.value(), 10s).value());
  EXPECT_FALSE(one.leases->release(r, *short_lease.value()).value())
      << "the expired holder deleted the new holder's lease";
  EXPECT_FALSE(one.leases->try_acquire(r, 10s).value().has_value());
}

TEST_F(RedisRemoteTest, AWrongPasswordIsAFaultThatDoesNotShowThePassword) {
  RemoteStorage remote =
      open("redis://writer:wrong-password@127.0.0.1:" + std::to_string(server.port()));
  auto got = remote.backend->get(record("a"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.fault().failure, RemoteFailure::error);
  EXPECT_EQ(got.fault().message.find("wrong-password"), std::string::npos) << got.fault().message;
}

TEST_F(RedisRemoteTest, AReadOnlyUserReadsAndItsWritesAreDeniedFaults) {
  RemoteStorage writer = open(server.url());
  ASSERT_TRUE(writer.backend->put(record("a"), bytes_of("a"), PutMode::overwrite).ok());
  RemoteStorage reader = open(server.url("reader"));
  auto got = reader.backend->get(record("a"));
  ASSERT_TRUE(got.ok()) << got.fault().message;
  EXPECT_TRUE(got.value());
  auto denied = reader.backend->put(record("b"), bytes_of("b"), PutMode::only_if_absent);
  ASSERT_FALSE(denied.ok());
  EXPECT_NE(denied.fault().message.find("NOPERM"), std::string::npos) << denied.fault().message;
  EXPECT_FALSE(reader.leases->try_acquire(record("b"), 1s).ok());
  for (int i = 0; i < 2 * kBreakerFailures; ++i)
    EXPECT_FALSE(reader.backend->put(record("b"), bytes_of("b"), PutMode::only_if_absent).ok());
  EXPECT_TRUE(reader.backend->get(record("a")).ok()) << "denied writes opened the breaker";
  EXPECT_FALSE(writer.backend->get(record("b")).value());
}

TEST_F(RedisRemoteTest, TheReadOnlyAttributeNeverWritesNorLeases) {
  RemoteStorage remote = open(server.url("writer", "|read-only"));
  EXPECT_TRUE(remote.read_only);
  EXPECT_EQ(remote.leases, nullptr);
  EXPECT_FALSE(remote.backend->put(record("a"), bytes_of("a"), PutMode::overwrite).ok());
  EXPECT_FALSE(remote.backend->remove(record("a")).ok());
  EXPECT_FALSE(open(server.url()).backend->get(record("a")).value());
}

// Each stall is a timeout within the operation timeout and a margin for a loaded machine; the
// breaker then answers at once.
void expect_bounded_timeouts_then_the_breaker(RemoteStorage &remote) {
  for (int i = 0; i < kBreakerFailures; ++i) {
    const auto start = Clock::now();
    auto got = remote.backend->get(record("a"));
    ASSERT_FALSE(got.ok());
    EXPECT_LT(Clock::now() - start, 3s) << "waited past the 200 ms timeout";
  }
  const auto start = Clock::now();
  for (int i = 0; i < 1000; ++i) {
    auto skipped = remote.backend->get(record("a"));
    ASSERT_FALSE(skipped.ok());
    EXPECT_NE(skipped.fault().message.find("skipped"), std::string::npos);
  }
  EXPECT_LT(Clock::now() - start, 1s) << "an open breaker still waits on the server";
}

TEST_F(RedisRemoteTest, AStoppedServerTimesOutThenIsSkipped) {
  RemoteStorage remote = open(server.url("writer", "|operation-timeout=200"));
  ASSERT_TRUE(remote.backend->get(record("a")).ok());
  server.signal(SIGSTOP);
  auto got = remote.backend->get(record("a"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.fault().failure, RemoteFailure::timeout) << got.fault().message;
  expect_bounded_timeouts_then_the_breaker(remote);
  // A fresh connection to a stopped server: the kernel accepts it, AUTH's reply never comes.
  RemoteStorage fresh = open(server.url("writer", "|operation-timeout=200"));
  expect_bounded_timeouts_then_the_breaker(fresh);
  server.signal(SIGCONT);
}

TEST_F(RedisRemoteTest, AKilledServerIsAFaultAtOnceThenIsSkipped) {
  RemoteStorage remote = open(server.url("writer", "|operation-timeout=200"));
  ASSERT_TRUE(remote.backend->put(record("a"), bytes_of("a"), PutMode::overwrite).ok());
  server.kill();
  auto got = remote.backend->get(record("a"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.fault().failure, RemoteFailure::error) << got.fault().message;
  expect_bounded_timeouts_then_the_breaker(remote);
}

TEST_F(RedisRemoteTest, ClientPauseAndDebugSleepAreTimeouts) {
  RemoteStorage remote = open(server.url("writer", "|operation-timeout=200"));
  ASSERT_TRUE(remote.backend->get(record("a")).ok());
  ASSERT_TRUE(server.admin("CLIENT PAUSE %d ALL", 1500));
  const auto start = Clock::now();
  auto paused = remote.backend->get(record("a"));
  ASSERT_FALSE(paused.ok());
  EXPECT_EQ(paused.fault().failure, RemoteFailure::timeout) << paused.fault().message;
  EXPECT_LT(Clock::now() - start, 1200ms);
  std::this_thread::sleep_for(1500ms);
  ASSERT_TRUE(remote.backend->get(record("a")).ok()) << "did not reconnect after the pause";

  std::thread sleeper([&] { server.admin("DEBUG SLEEP %s", "1.5"); });
  std::this_thread::sleep_for(100ms);
  auto slept = remote.backend->get(record("a"));
  sleeper.join();
  ASSERT_FALSE(slept.ok());
  EXPECT_EQ(slept.fault().failure, RemoteFailure::timeout) << slept.fault().message;
  ASSERT_TRUE(remote.backend->get(record("a")).ok()) << "did not reconnect after the sleep";
}

// A name holding a list, or a string longer than kMaxRemoteValueBytes, is a bad record, not a
// failure of the remote: refused (the oversize one from its length, before its bytes are read),
// never tripping the breaker, and the next read on the same remote works.
TEST_F(RedisRemoteTest, AWrongTypeOrOversizeValueIsRefusedAndTheRemoteStaysUsable) {
  RemoteStorage remote = open(server.url());
  const RecordKey list = record("list"), big = record("big"), edge = record("edge"),
                  fine = record("fine");
  ASSERT_TRUE(server.admin("RPUSH %s x", storage_name(list).c_str()));
  // Made on the server: the maximum plus one byte, and the maximum exactly.
  ASSERT_TRUE(server.admin("SETRANGE %s %s x", storage_name(big).c_str(),
                           std::to_string(kMaxRemoteValueBytes).c_str()));
  ASSERT_TRUE(server.admin("SETRANGE %s %s x", storage_name(edge).c_str(),
                           std::to_string(kMaxRemoteValueBytes - 1).c_str()));
  ASSERT_TRUE(remote.backend->put(fine, bytes_of("fine"), PutMode::overwrite).ok());
  for (int round = 0; round < 4; ++round) { // more rounds than the breaker's three failures
    auto wrong = remote.backend->get(list);
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.fault().failure, RemoteFailure::refused) << wrong.fault().message;
    EXPECT_NE(wrong.fault().message.find("WRONGTYPE"), std::string::npos);
    auto oversize = remote.backend->get(big);
    ASSERT_FALSE(oversize.ok());
    EXPECT_EQ(oversize.fault().failure, RemoteFailure::refused) << oversize.fault().message;
    EXPECT_NE(oversize.fault().message.find(std::to_string(kMaxRemoteValueBytes + 1) + " bytes"),
              std::string::npos)
        << oversize.fault().message;
    auto good = remote.backend->get(fine);
    ASSERT_TRUE(good.ok() && good.value()) << "round " << round;
    EXPECT_EQ(*good.value(), bytes_of("fine"));
  }
  auto largest = remote.backend->get(edge);
  ASSERT_TRUE(largest.ok() && largest.value()) << largest.fault().message;
  EXPECT_EQ(largest.value()->size(), kMaxRemoteValueBytes);
  auto through_signer = signed_backend(remote.backend, "fleet secret")->get(big);
  ASSERT_FALSE(through_signer.ok());
  EXPECT_EQ(through_signer.fault().failure, RemoteFailure::refused);
  auto removed = remote.backend->remove(list);
  ASSERT_TRUE(removed.ok() && removed.value()) << "a bad record of another type can be removed";
}

TEST_F(RedisRemoteTest, WithASecretValuesRewrittenBehindItsBackAreRefused) {
  RemoteStorage remote = open(server.url());
  auto signer = signed_backend(remote.backend, "fleet secret");
  const RecordKey a = record("a");
  ASSERT_TRUE(signer->put(a, bytes_of("the code object"), PutMode::only_if_absent).ok());
  auto good = signer->get(a);
  ASSERT_TRUE(good.ok() && good.value());
  EXPECT_EQ(*good.value(), bytes_of("the code object"));
  const std::string name = storage_name(a);
  for (const char *rewritten : {"garbage", "kjit-hmac-sha256:short", ""}) {
    ASSERT_TRUE(server.admin("SET %s %s", name.c_str(), rewritten));
    auto got = signer->get(a);
    ASSERT_FALSE(got.ok()) << "accepted '" << rewritten << "'";
    EXPECT_NE(got.fault().message.find("signed"), std::string::npos);
  }
  // Another record's signed value, copied under this name.
  ASSERT_TRUE(signer->put(record("b"), bytes_of("b's code"), PutMode::overwrite).ok());
  ASSERT_TRUE(server.admin("COPY %s %s REPLACE", storage_name(record("b")).c_str(), name.c_str()));
  EXPECT_FALSE(signer->get(a).ok());
}

} // namespace
} // namespace kjit::cache
