#include "kjit/error.hpp"
#include "kjit/runtime/config.hpp"
#include "kjit/runtime/remotes.hpp"
#include "tests/support/scoped_environment.hpp"

#include <gtest/gtest.h>

namespace kjit {
namespace {

using testing::ScopedEnvironment;

TEST(Config, ReadsTheEnvironment) {
  ScopedEnvironment env;
  env.set("KJIT_MODE", "prebuilt");
  env.set("KJIT_REBUILD", "1");
  env.set("KJIT_CACHE_DIR", "/tmp/kjit-config-test");
  env.set("KJIT_PREBUILT_DIR", "/opt/kjit/prebuilt");
  const Config config = Config::from_environment();
  EXPECT_EQ(config.mode, Mode::prebuilt);
  EXPECT_TRUE(config.rebuild);
  EXPECT_EQ(config.cache_dir, "/tmp/kjit-config-test");
  EXPECT_EQ(config.prebuilt_dir, "/opt/kjit/prebuilt");
}

TEST(Config, ThePrebuiltPathComesBeforeKjitsOwnTier) {
  ScopedEnvironment env;
  env.set("KJIT_PREBUILT_DIR", "/opt/kjit/prebuilt");
  env.set("KJIT_PREBUILT_PATH", "/opt/mylib/prebuilt::/opt/other:/opt/kjit/prebuilt:");
  Config config = Config::from_environment();
  EXPECT_EQ(config.prebuilt_dirs, (std::vector<std::filesystem::path>{
                                      "/opt/mylib/prebuilt", "/opt/other", "/opt/kjit/prebuilt"}));
  config.prebuilt_dirs.push_back("/usr/lib/mylib2/prebuilt"); // a library adds its own
  EXPECT_EQ(config.prebuilt_tiers(),
            (std::vector<std::filesystem::path>{"/opt/mylib/prebuilt", "/opt/other",
                                                "/opt/kjit/prebuilt", "/usr/lib/mylib2/prebuilt"}))
      << "each once, in order";
  env.set("KJIT_PREBUILT_PATH", nullptr);
  EXPECT_EQ(Config::from_environment().prebuilt_tiers(),
            std::vector<std::filesystem::path>{"/opt/kjit/prebuilt"});
}

TEST(Config, DefaultsFollowXdgThenHome) {
  ScopedEnvironment env;
  env.set("KJIT_MODE", nullptr);
  env.set("KJIT_REBUILD", nullptr);
  env.set("KJIT_CACHE_DIR", nullptr);
  env.set("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(Config::from_environment().cache_dir, "/xdg/kjit");
  env.set("XDG_CACHE_HOME", nullptr);
  env.set("HOME", "/home/someone");
  EXPECT_EQ(Config::from_environment().cache_dir, "/home/someone/.cache/kjit");
  EXPECT_EQ(Config::from_environment().mode, Mode::jit);
  EXPECT_FALSE(Config::from_environment().rebuild);
}

TEST(Config, RejectsValuesItDoesNotKnow) {
  ScopedEnvironment env;
  env.set("KJIT_MODE", "sometimes");
  try {
    Config::from_environment();
    FAIL() << "KJIT_MODE=sometimes was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_STREQ(error.what(), "KJIT_MODE='sometimes' is not valid; it accepts jit or prebuilt");
  }
  env.set("KJIT_MODE", nullptr);
  env.set("KJIT_REBUILD", "yes");
  EXPECT_THROW(Config::from_environment(), Error);
  env.set("KJIT_REBUILD", nullptr);
  env.set("KJIT_CACHE_SIZE", "lots");
  try {
    Config::from_environment();
    FAIL() << "KJIT_CACHE_SIZE=lots was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_NE(error.summary().find("KJIT_CACHE_SIZE='lots'"), std::string::npos);
  }
}

TEST(Config, CacheSizeIsInMegabytesUnlessAUnitIsGiven) {
  ScopedEnvironment env;
  env.set("KJIT_CACHE_SIZE", nullptr);
  EXPECT_EQ(Config::from_environment().cache_size_bytes, 0u) << "unbounded by default";
  env.set("KJIT_CACHE_SIZE", "512");
  EXPECT_EQ(Config::from_environment().cache_size_bytes, 512u << 20);
  env.set("KJIT_CACHE_SIZE", "20G");
  EXPECT_EQ(Config::from_environment().cache_size_bytes, 20ull << 30);
}

TEST(Config, AHugeCacheSizeIsBadConfigNotAnEscapedException) {
  ScopedEnvironment env;
  const std::string huge(400, '9'); // std::stod threw std::out_of_range on it
  env.set("KJIT_CACHE_SIZE", huge.c_str());
  try {
    Config::from_environment();
    FAIL() << "KJIT_CACHE_SIZE=" << huge << " was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_NE(error.summary().find("KJIT_CACHE_SIZE='999"), std::string::npos) << error.summary();
  }
}

TEST(Config, ReadsTheRemotesAndRefusesABadOneOrAnOpenSecret) {
  ScopedEnvironment env;
  env.set("KJIT_REMOTE_STORAGE", nullptr);
  EXPECT_TRUE(Config::from_environment().remote_urls.empty());
  env.set("KJIT_REMOTE_STORAGE", "redis://kjit:pw@127.0.0.1:1/3|read-only redis://127.0.0.1:2");
  env.set("KJIT_REMOTE_SECRET_FILE", nullptr);
  const Config config = Config::from_environment();
  EXPECT_EQ(config.remote_urls, (std::vector<std::string>{"redis://kjit:pw@127.0.0.1:1/3|read-only",
                                                          "redis://127.0.0.1:2"}));
  const std::vector<cache::RemoteStorage> remotes = open_remotes(config);
  ASSERT_EQ(remotes.size(), 2u);
  EXPECT_EQ(remotes[0].description, "redis://kjit:***@127.0.0.1:1/3");
  EXPECT_TRUE(remotes[0].read_only);
  EXPECT_EQ(remotes[0].leases, nullptr);
  EXPECT_NE(remotes[1].leases, nullptr);
  EXPECT_EQ(open_remotes(config)[1].backend, remotes[1].backend) << "one backend per process";

  env.set("KJIT_REMOTE_STORAGE", "memcached://h");
  try {
    Config::from_environment();
    FAIL() << "memcached:// was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_NE(error.summary().find("KJIT_REMOTE_STORAGE"), std::string::npos);
  }
  env.set("KJIT_REMOTE_STORAGE", "redis://127.0.0.1:2");
  env.set("KJIT_REMOTE_SECRET_FILE", "/etc/passwd"); // readable by all: refused
  try {
    Config::from_environment();
    FAIL() << "a world-readable secret was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_NE(error.summary().find("KJIT_REMOTE_SECRET_FILE"), std::string::npos);
  }
}

TEST(Config, ReadsTheFleetLeaseAndWaitInMilliseconds) {
  ScopedEnvironment env;
  env.set("KJIT_REMOTE_LEASE_MS", nullptr);
  env.set("KJIT_REMOTE_WAIT_MS", nullptr);
  EXPECT_EQ(Config::from_environment().fleet.lease_ttl, FleetWait{}.lease_ttl);
  env.set("KJIT_REMOTE_LEASE_MS", "1500");
  env.set("KJIT_REMOTE_WAIT_MS", "0");
  const Config config = Config::from_environment();
  EXPECT_EQ(config.fleet.lease_ttl, std::chrono::milliseconds(1500));
  EXPECT_EQ(config.fleet.wait, std::chrono::milliseconds(0));
  for (const char *bad : {"5", "2s", "-1", " 100", "99999999999999999999"}) {
    env.set("KJIT_REMOTE_LEASE_MS", bad);
    try {
      Config::from_environment();
      ADD_FAILURE() << "KJIT_REMOTE_LEASE_MS=" << bad << " was accepted";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_config);
      EXPECT_EQ(error.summary(), "KJIT_REMOTE_LEASE_MS='" + std::string(bad) +
                                     "' is not valid; it accepts milliseconds from 10 to 3600000");
    }
  }
  env.set("KJIT_REMOTE_LEASE_MS", nullptr);
  env.set("KJIT_REMOTE_WAIT_MS", "soon");
  EXPECT_THROW(Config::from_environment(), Error);
}

} // namespace
} // namespace kjit
