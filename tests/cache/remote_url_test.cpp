#include "kjit/cache/remote_url.hpp"

#include "kjit/error.hpp"

#include <gtest/gtest.h>

namespace kjit::cache {
namespace {

TEST(RemoteUrl, ParsesEveryFormAndAttribute) {
  auto urls = parse_remote_storage(
      "  redis://kjit:p%40ss@cache.example:6380/2|read-only|connect-timeout=50 "
      "redis://secret@10.0.0.1 redis+unix:///run/redis.sock?db=3|operation-timeout=250 "
      "redis://[::1]:7000 redis://h");
  ASSERT_EQ(urls.size(), 5u);
  EXPECT_EQ(urls[0].host, "cache.example");
  EXPECT_EQ(urls[0].port, 6380);
  EXPECT_EQ(urls[0].db, 2);
  EXPECT_EQ(urls[0].user, "kjit");
  EXPECT_EQ(urls[0].password, "p@ss");
  EXPECT_TRUE(urls[0].read_only);
  EXPECT_EQ(urls[0].timeouts.connect, std::chrono::milliseconds(50));
  EXPECT_EQ(urls[0].timeouts.operation, std::chrono::milliseconds(1000));
  EXPECT_EQ(urls[0].description(), "redis://kjit:***@cache.example:6380/2");

  EXPECT_EQ(urls[1].user, "");
  EXPECT_EQ(urls[1].password, "secret");
  EXPECT_EQ(urls[1].port, 6379);
  EXPECT_EQ(urls[1].description(), "redis://***@10.0.0.1:6379/0");

  EXPECT_EQ(urls[2].transport, RemoteUrl::Transport::unix_socket);
  EXPECT_EQ(urls[2].socket_path, "/run/redis.sock");
  EXPECT_EQ(urls[2].db, 3);
  EXPECT_EQ(urls[2].timeouts.operation, std::chrono::milliseconds(250));
  EXPECT_EQ(urls[2].timeouts.connect, std::chrono::milliseconds(100));
  EXPECT_FALSE(urls[2].read_only);

  EXPECT_EQ(urls[3].host, "::1");
  EXPECT_EQ(urls[3].port, 7000);
  EXPECT_EQ(urls[4].host, "h");
  EXPECT_TRUE(urls[4].password.empty());
}

TEST(RemoteUrl, BlankIsNoRemote) { EXPECT_TRUE(parse_remote_storage(" \t ").empty()); }

TEST(RemoteUrl, RefusesWhatDoesNotParseNamingTheVariableAndTheForms) {
  for (const char *bad :
       {"http://h", "redis://", "redis://h:0", "redis://h:65536", "redis://h:x", "redis://h/x",
        "redis://h|read-write", "redis://h|connect-timeout=", "redis://h|operation-timeout=-1",
        "redis://h|connect-timeout=10s", "redis+unix://relative.sock", "redis+unix:///s?x=1",
        "redis://::1:80", "redis://[::1", "redis://u:@h", "redis://p%4@h", "redis://h:"}) {
    try {
      parse_remote_storage(std::string("redis://ok ") + bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_config) << bad;
      const std::string what = error.what();
      EXPECT_NE(what.find("KJIT_REMOTE_STORAGE"), std::string::npos) << what;
      EXPECT_NE(what.find("redis://[user:password@]host[:port][/db]"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(RemoteUrl, RefusesTlsSayingWhy) {
  try {
    parse_remote_storage("rediss://h:6380");
    ADD_FAILURE() << "rediss parsed";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_NE(std::string(error.what()).find("TLS"), std::string::npos) << error.what();
  }
}

} // namespace
} // namespace kjit::cache
