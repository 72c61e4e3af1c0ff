// `kjit cache push|pull`, `ls --remote` and `verify --remote` against a real redis-server, with
// values planted behind kjit's back: garbage, another key's entry, an entry cut short, a value
// signed for another name. A remote is untrusted input: nothing bad reaches the user tier.
#include "cli_fixture.hpp"
#include "tests/support/redis_server.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kjit {
namespace {

class RemoteCliTest : public CliTest {
protected:
  void SetUp() override {
    if (!hiprtc_available())
      GTEST_SKIP() << "hiprtc is not available";
  }
  std::string remote(std::string_view user = "writer", std::string_view attributes = "") const {
    return "KJIT_REMOTE_STORAGE='" + redis.url(user, attributes) + "'";
  }
  // `kjit <args> --json` with the user tier `cache` (a node of its own when not the fixture's).
  nlohmann::json json_of(const std::string &args, const std::string &environment, int status,
                         const std::string &cache = "cache") const {
    const CliRun run = kjit(args + " --json", environment, cache);
    EXPECT_EQ(run.status, status) << args << "\n" << run.err;
    return run.status == 2 ? nlohmann::json() : nlohmann::json::parse(run.out);
  }
  // Compiles scale<half, N> for gfx90a into the fixture's user tier, with no remote.
  nlohmann::json compile(int n) const {
    return json_of("compile scale -p T=half -p N=" + std::to_string(n) + " --target gfx90a", "", 0);
  }
  static std::string name_of(const std::string &key) { return "kjit/entry/v2/gfx90a/" + key; }
  static std::string bytes_of(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void plant(const std::string &name, const std::string &value) const {
    ASSERT_TRUE(redis.admin("SET %s %b", name.c_str(), value.data(), value.size()));
  }
  static int warnings_in(const std::string &err) {
    int count = 0;
    for (std::size_t at = 0; (at = err.find("kjit warning: ", at)) != std::string::npos; ++at)
      ++count;
    return count;
  }
  // Exit `status`: 2 bad input, 4 a remote that refuses or cannot be reached (an I/O failure).
  void expect_bad(const std::string &args, const std::string &environment,
                  const std::string &fragment, int status = 2) const {
    const CliRun run = kjit(args, environment);
    EXPECT_EQ(run.status, status) << args << "\n" << run.err;
    EXPECT_EQ(run.err.rfind("kjit: ", 0), 0u) << run.err;
    EXPECT_NE(run.err.find(fragment), std::string::npos) << args << "\nstderr: " << run.err;
  }

  testing::RedisServer redis;
};

TEST_F(RemoteCliTest, PushNeverOverwritesAndPullTakesOnlyValidEntries) {
  const nlohmann::json a = compile(64), b = compile(128);
  const nlohmann::json pushed = json_of("cache push", remote(), 0);
  EXPECT_EQ(pushed["entries"], 2);
  EXPECT_EQ(pushed["remotes"][0]["stored"], 2);
  const nlohmann::json again = json_of("cache push", remote(), 0);
  EXPECT_EQ(again["remotes"][0]["stored"], 0);
  EXPECT_EQ(again["remotes"][0]["already_present"], 2) << "push never overwrites";

  // Planted: garbage, a's entry under another key's name, b's entry cut short.
  const std::string garbage(64, 'a'), misplaced(64, 'b'), cut(64, 'c');
  plant(name_of(garbage), "not an entry");
  const std::string entry_a = bytes_of(a["entry"]);
  plant(name_of(misplaced), entry_a);
  plant(name_of(cut), bytes_of(b["entry"]).substr(0, entry_a.size() / 2));
  plant("kjit/entry/v2/gfx90a/not-a-key", "ignored by every listing");

  const nlohmann::json listed = json_of("cache ls --remote", remote(), 0);
  EXPECT_EQ(listed["remotes"][0]["entries"], 5);
  EXPECT_EQ(json_of("cache ls --remote --limit 2", remote(), 0)["remotes"][0]["shown"].size(), 2u);
  EXPECT_EQ(json_of("cache ls --remote --target gfx906", remote(), 0)["remotes"][0]["entries"], 0);

  const nlohmann::json verified = json_of("cache verify --remote", remote(), 1);
  EXPECT_EQ(verified["checked"], 5);
  std::set<std::string> bad;
  for (const auto &value : verified["bad"]) {
    bad.insert(value["key"].get<std::string>());
    EXPECT_EQ(value["action"], "none");
  }
  EXPECT_EQ(bad, (std::set<std::string>{garbage, misplaced, cut}));

  const nlohmann::json pulled = json_of("cache pull", remote(), 1, "node2");
  EXPECT_EQ(pulled["pulled"], 2);
  EXPECT_EQ(pulled["rejected"].size(), 3u);
  EXPECT_TRUE(pulled["missing"].empty());
  const nlohmann::json local = json_of("cache verify", "", 0, "node2");
  EXPECT_EQ(local["checked"], 2) << "only the two valid entries reached the user tier";
  const nlohmann::json hit =
      json_of("compile scale -p T=half -p N=64 --target gfx90a", "", 0, "node2");
  EXPECT_EQ(hit["origin"], "user cache");
  EXPECT_EQ(hit["key"], a["key"]);

  const nlohmann::json named = json_of("cache pull --target gfx90a " + b["key"].get<std::string>() +
                                           " " + std::string(64, 'd'),
                                       remote(), 1, "node3");
  EXPECT_EQ(named["pulled"], 1);
  EXPECT_EQ(named["missing"].size(), 1u);
  EXPECT_EQ(json_of("cache pull --target gfx90a " + b["key"].get<std::string>(), remote(), 0,
                    "node3")["already_present"],
            1);

  // --fix removes bad values only where it may write.
  const nlohmann::json kept =
      json_of("cache verify --remote --fix", remote("reader", "|read-only"), 1);
  for (const auto &value : kept["bad"])
    EXPECT_EQ(value["action"], "kept (read-only remote)");
  EXPECT_EQ(redis.keys("kjit/entry/v2/gfx90a/*").size(), 6u);
  const nlohmann::json fixed = json_of("cache verify --remote --fix", remote(), 1);
  for (const auto &value : fixed["bad"])
    EXPECT_EQ(value["action"], "removed");
  EXPECT_EQ(json_of("cache verify --remote", remote(), 0)["checked"], 2);
}

// A name holding another Redis type (a list, a hash) or a string longer than the stated maximum
// is one bad value, as garbage is: verify reports it and --fix removes it, pull brings in every
// good entry and reports it, and a Runtime's lookup is a miss with one warning, then a compile.
TEST_F(RemoteCliTest, AWrongTypeOrOversizeValueIsOneBadValueNotAFailureOfTheRemote) {
  const nlohmann::json a = compile(64), b = compile(128), c = compile(256);
  EXPECT_EQ(json_of("cache push", remote(), 0)["entries"], 3);
  const std::string list(64, 'a'), hash(64, 'b');
  ASSERT_TRUE(redis.admin("RPUSH %s x", name_of(list).c_str()));
  ASSERT_TRUE(redis.admin("HSET %s field x", name_of(hash).c_str()));
  // b's entry replaced by a list, c's by a value one byte over the maximum (made on the server).
  const std::string name_b = name_of(b["key"]), name_c = name_of(c["key"]);
  ASSERT_TRUE(redis.admin("DEL %s", name_b.c_str()));
  ASSERT_TRUE(redis.admin("RPUSH %s x", name_b.c_str()));
  const std::size_t max_value = std::size_t{64} << 20; // README: 64 MiB (kMaxRemoteValueBytes)
  ASSERT_TRUE(redis.admin("SETRANGE %s %s x", name_c.c_str(), std::to_string(max_value).c_str()));

  const nlohmann::json verified = json_of("cache verify --remote", remote(), 1);
  EXPECT_EQ(verified["checked"], 5);
  std::map<std::string, std::string> problems;
  for (const auto &value : verified["bad"])
    problems[value["key"]] = value["problem"];
  EXPECT_EQ(problems.size(), 4u);
  EXPECT_NE(problems[list].find("WRONGTYPE"), std::string::npos) << problems[list];
  EXPECT_NE(problems[c["key"]].find("more than the 64 MiB"), std::string::npos)
      << problems[c["key"]];

  const nlohmann::json pulled = json_of("cache pull", remote(), 1, "node2");
  EXPECT_EQ(pulled["pulled"], 1);
  EXPECT_EQ(pulled["rejected"].size(), 4u);

  for (const std::string n : {"128", "256"}) {
    const CliRun run =
        kjit("compile scale -p T=half --target gfx90a --json -p N=" + n, remote(), "node3");
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out)["origin"], "compiled");
    EXPECT_EQ(warnings_in(run.err), 1) << run.err;
  }

  const nlohmann::json fixed = json_of("cache verify --remote --fix", remote(), 1);
  EXPECT_EQ(fixed["bad"].size(), 4u);
  for (const auto &value : fixed["bad"])
    EXPECT_EQ(value["action"], "removed");
  EXPECT_EQ(json_of("cache verify --remote", remote(), 0)["checked"], 1);
}

TEST_F(RemoteCliTest, WithAFleetSecretVerifyAndPullRefuseValuesNotSignedForTheirName) {
  const std::filesystem::path secret = dir / "secret";
  std::ofstream(secret) << "fleet secret\n";
  std::filesystem::permissions(secret, std::filesystem::perms::owner_read);
  const std::string signing = remote() + " KJIT_REMOTE_SECRET_FILE='" + secret.string() + "'";
  const nlohmann::json a = compile(64);
  EXPECT_EQ(json_of("cache push", signing, 0)["remotes"][0]["stored"], 1);
  const std::string copied(64, 'e'), unsigned_copy(64, 'f');
  ASSERT_TRUE(redis.admin("COPY %s %s", name_of(a["key"]).c_str(), name_of(copied).c_str()));
  plant(name_of(unsigned_copy), bytes_of(a["entry"]));

  const nlohmann::json verified = json_of("cache verify --remote", signing, 1);
  EXPECT_EQ(verified["checked"], 3);
  std::map<std::string, std::string> problems;
  for (const auto &value : verified["bad"])
    problems[value["key"]] = value["problem"];
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[copied].find("wrongly signed"), std::string::npos) << problems[copied];
  EXPECT_NE(problems[unsigned_copy].find("unsigned"), std::string::npos) << problems[unsigned_copy];

  const nlohmann::json pulled = json_of("cache pull", signing, 1, "node2");
  EXPECT_EQ(pulled["pulled"], 1);
  EXPECT_EQ(pulled["rejected"].size(), 2u);
}

TEST_F(RemoteCliTest, PushAndPullTakeASubsetAndEitherLocalTier) {
  const nlohmann::json a = compile(64), b = compile(128);
  const std::string key_a = a["key"], key_b = b["key"], absent(64, 'a');
  const nlohmann::json one = json_of("cache push --target gfx90a " + key_a, remote(), 0);
  EXPECT_EQ(one["entries"], 1);
  EXPECT_EQ(one["remotes"][0]["stored"], 1);
  EXPECT_EQ(redis.keys("kjit/entry/*"), std::vector<std::string>{name_of(key_a)});
  EXPECT_EQ(json_of("cache push --target gfx906", remote(), 0)["entries"], 0)
      << "no entry of that target";
  const nlohmann::json partly = json_of("cache push --target gfx90a " + absent, remote(), 1);
  EXPECT_EQ(partly["missing"].size(), 1u) << "a key named but not in the tier";

  // A build machine fills a prebuilt tier from the remote; a node then hits it there.
  const std::string prebuilt = "KJIT_PREBUILT_DIR='" + (dir / "prebuilt").string() + "' ";
  const nlohmann::json filled =
      json_of("cache pull --tier prebuilt", prebuilt + remote(), 0, "builder");
  EXPECT_EQ(filled["tier"], "prebuilt");
  EXPECT_EQ(filled["pulled"], 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "builder")) << "the user tier was not written";
  const nlohmann::json hit =
      json_of("compile scale -p T=half -p N=64 --target gfx90a", prebuilt, 0, "node2");
  EXPECT_EQ(hit["origin"], "prebuilt");
  EXPECT_EQ(hit["key"], key_a);

  // ...and publishes it back from there to an empty remote.
  ASSERT_TRUE(redis.admin("FLUSHALL"));
  const nlohmann::json from_prebuilt =
      json_of("cache push --tier prebuilt", prebuilt + remote(), 0);
  EXPECT_EQ(from_prebuilt["tier"], "prebuilt");
  EXPECT_EQ(from_prebuilt["remotes"][0]["stored"], 1);
  EXPECT_EQ(redis.keys("kjit/entry/*"), std::vector<std::string>{name_of(key_a)});
  expect_bad("cache push --tier prebuilt",
             "KJIT_PREBUILT_DIR='" + (dir / "none").string() + "' " + remote(), "no prebuilt tier");
  expect_bad("cache pull --tier nosuch", remote(), "--tier nosuch");
  expect_bad("cache push " + key_b, remote(), "needs --target");
}

// `kjit cache stats` sums what every process's remote tier did: a miss and a hit, a server that
// stalls (timeouts) and one that is gone (errors), each fault one warning and the compile done.
TEST_F(RemoteCliTest, CacheStatsCountRemoteHitsMissesErrorsAndTimeouts) {
  const auto counters = [&](const std::string &cache) {
    return json_of("cache stats", "", 0, cache)["counters"];
  };
  const std::string scale = "compile scale -p T=half --target gfx90a -p N=";
  EXPECT_EQ(json_of(scale + "64", remote(), 0)["origin"], "compiled");
  nlohmann::json first = counters("cache");
  EXPECT_EQ(first["remote_misses"], 1);
  EXPECT_EQ(first["remote_hits"], 0);
  EXPECT_EQ(json_of(scale + "64", remote(), 0, "node2")["origin"], "remote");
  EXPECT_EQ(counters("node2")["remote_hits"], 1);
  EXPECT_EQ(counters("node2")["remote_misses"], 0);

  redis.signal(SIGSTOP);
  const CliRun stalled = kjit(scale + "128 --json", remote("writer", "|operation-timeout=200"));
  redis.signal(SIGCONT);
  EXPECT_EQ(stalled.status, 0) << stalled.err;
  EXPECT_EQ(warnings_in(stalled.err), 1) << stalled.err;
  const nlohmann::json after_stall = counters("cache");
  EXPECT_GE(after_stall["remote_timeouts"], 1);
  EXPECT_EQ(after_stall["remote_errors"], 0);

  redis.kill();
  const CliRun down = kjit(scale + "256 --json", remote());
  EXPECT_EQ(down.status, 0) << down.err;
  EXPECT_EQ(warnings_in(down.err), 1) << down.err;
  const nlohmann::json after_down = counters("cache");
  EXPECT_GE(after_down["remote_errors"], 1);
  EXPECT_EQ(after_down["remote_timeouts"], after_stall["remote_timeouts"]);
  EXPECT_EQ(after_down["remote_misses"], 1) << "a fault is counted as a fault, not a miss";
}

TEST_F(RemoteCliTest, BadInputIsExitTwoAndARemoteThatRefusesExitFourWithOneLine) {
  compile(64);
  expect_bad("cache ls --remote",
             "KJIT_REMOTE_STORAGE=", "no remote cache: set KJIT_REMOTE_STORAGE");
  expect_bad("cache pull " + std::string(64, 'a'), remote(), "needs --target");
  expect_bad("cache pull --target gfx90a xyz", remote(), "'xyz' is not a key");
  expect_bad("cache push --tier nosuch", remote(), "--tier nosuch");
  expect_bad("cache push", remote("reader", "|read-only"), "read-only: nowhere to push");
  expect_bad("cache push", remote("reader"), "publishing kjit/entry/v2/gfx90a/", 4);
  redis.kill();
  expect_bad("cache ls --remote", remote(), "remote cache redis://writer:***@127.0.0.1", 4);
  expect_bad("cache verify --remote", remote(), "Connection refused", 4);
  expect_bad("cache pull", remote(), "listing its records", 4);
}

} // namespace
} // namespace kjit
