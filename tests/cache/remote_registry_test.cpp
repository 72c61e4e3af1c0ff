// Remotes are opened by the scheme of their URL (remote_registry.hpp), so that a new store is one
// backend file and one line in the registry's table.
#include "kjit/cache/remote_registry.hpp"

#include "kjit/error.hpp"

#include <gtest/gtest.h>

namespace kjit::cache {
namespace {

TEST(RemoteRegistry, EachUrlIsOpenedByItsSchemesBackendInOrder) {
  const std::vector<RemoteStorage> remotes = open_remote_storages(
      " redis://kjit:pw@127.0.0.1:1/3|read-only\tredis+unix:///run/r.sock ", std::nullopt);
  ASSERT_EQ(remotes.size(), 2u);
  EXPECT_EQ(remotes[0].description, "redis://kjit:***@127.0.0.1:1/3");
  EXPECT_TRUE(remotes[0].read_only);
  EXPECT_EQ(remotes[0].leases, nullptr) << "a read-only remote takes no leases";
  EXPECT_EQ(remotes[1].description, "redis+unix:///run/r.sock");
  EXPECT_NE(remotes[1].backend, nullptr);
  EXPECT_TRUE(open_remote_storages(" \t", std::nullopt).empty());
}

TEST(RemoteRegistry, AFleetSecretWrapsEveryBackend) {
  const RemoteStorage plain = open_remote_storages("redis://127.0.0.1:1", std::nullopt).at(0);
  const RemoteStorage signed_one = open_remote_storages("redis://127.0.0.1:1", "secret").at(0);
  EXPECT_EQ(signed_one.description, plain.description);
  // The Redis object serves leases either way; with a secret, values go through the wrapper.
  EXPECT_EQ(dynamic_cast<RemoteBackend *>(plain.leases.get()), plain.backend.get());
  EXPECT_NE(dynamic_cast<RemoteBackend *>(signed_one.leases.get()), signed_one.backend.get());
}

TEST(RemoteRegistry, AnUnknownSchemeIsRefusedNamingTheKnownOnes) {
  for (const char *urls : {"redis://ok memcached://h", "h:6379", "://h"}) {
    try {
      open_remote_storages(urls, std::nullopt);
      ADD_FAILURE() << urls << " was accepted";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_config);
      EXPECT_NE(error.summary().find("KJIT_REMOTE_STORAGE"), std::string::npos) << error.summary();
      EXPECT_NE(error.summary().find("unknown scheme; accepted: redis://, redis+unix://"),
                std::string::npos)
          << error.summary();
    }
  }
}

TEST(RemoteRegistry, ABackendRefusesWhatItCannotServe) {
  try {
    open_remote_storages("rediss://h:6380", std::nullopt);
    ADD_FAILURE() << "rediss was accepted";
  } catch (const Error &error) {
    EXPECT_NE(error.summary().find("TLS"), std::string::npos) << error.summary();
  }
}

} // namespace
} // namespace kjit::cache
