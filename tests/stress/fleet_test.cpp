// A fleet of real processes sharing a real Redis (issue 15, "One compile per fleet"): each node is
// a `kjit compile` process with its own empty user tier, so nothing but the remote tier joins them.
// They ask for one missing variant at once, with the real compiler (hiprtc). Exactly one of them
// compiles; the others take the entry it published. In the fault variant the node holding the
// lease is SIGKILLed mid-compile: the others wait until its lease expires, then one of them
// compiles, and every node ends within the bound.
#include "child.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "tests/cache/support.hpp"
#include "tests/support/redis_server.hpp"

#include <csignal>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kjit::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kNodes = 8;
// Every node ends within this of the storm's start, or the test fails (and kills it). A node that
// finds the lease held waits at most kWait for the entry before compiling itself, so a broken
// lease shows as extra compiles within the bound, not as a timeout.
constexpr auto kBound = std::chrono::seconds(40);
constexpr auto kWait = std::chrono::seconds(20);
// Short, so that the fault variant waits little for a dead holder's lease to expire.
constexpr auto kLeaseTtl = std::chrono::milliseconds(1500);

class Fleet : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      jit::load_compiler(Vendor::amd);
    } catch (const Error &error) {
      GTEST_SKIP() << "hiprtc is not available: " << error.summary();
    }
  }

  fs::path node_cache(int node) const { return scratch.path() / ("node-" + std::to_string(node)); }

  // Node `node`: `kjit compile` of scale<half, 4096> for gfx90a, its own user tier, the shared
  // remote.
  Child start_node(int node) const {
    return Child(
        {"compile", "scale", "-p", "T=half", "-p", "N=4096", "--target", "gfx90a", "--json"},
        {{"KJIT_CACHE_DIR", node_cache(node).string()},
         {"KJIT_REMOTE_STORAGE", redis.url()},
         {"KJIT_REMOTE_LEASE_MS", std::to_string(kLeaseTtl.count())},
         {"KJIT_REMOTE_WAIT_MS", std::to_string(kWait.count() * 1000)}},
        {}, scratch.path(), KJIT_CLI);
  }

  // Waits for every node until `started` + kBound; a node still running then fails the test.
  static std::vector<ChildOutcome> wait_all(std::vector<Child> &nodes, Clock::time_point started) {
    std::vector<ChildOutcome> outcomes;
    for (Child &node : nodes) {
      const pid_t pid = node.pid();
      std::optional<ChildOutcome> outcome = node.wait_until(started + kBound);
      if (!outcome) {
        ADD_FAILURE() << "node " << pid << " still ran " << kBound.count()
                      << " s after the storm began";
        continue;
      }
      outcomes.push_back(std::move(*outcome));
    }
    return outcomes;
  }

  struct Tally {
    int compiled = 0, remote = 0;
    std::set<std::string> keys;
    std::set<std::string> entries; // the bytes of each node's entry file
    const ChildOutcome *compiler = nullptr;
  };
  static Tally tally(const std::vector<ChildOutcome> &outcomes) {
    Tally tally;
    for (const ChildOutcome &outcome : outcomes) {
      EXPECT_TRUE(outcome.succeeded()) << outcome.out << outcome.err;
      EXPECT_EQ(outcome.warnings(), 0) << outcome.err;
      if (!outcome.succeeded())
        continue;
      const nlohmann::json result = nlohmann::json::parse(outcome.out);
      if (result["origin"] == "compiled") {
        ++tally.compiled;
        tally.compiler = &outcome;
      }
      tally.remote += result["origin"] == "remote";
      tally.keys.insert(result["key"].get<std::string>());
      std::ifstream entry(result["entry"].get<std::string>(), std::ios::binary);
      tally.entries.insert({std::istreambuf_iterator<char>(entry), {}});
    }
    return tally;
  }

  // The compiles and remote hits the nodes' own statistics (`kjit cache stats`) count, summed.
  std::pair<std::uint64_t, std::uint64_t> counted(int first, int last) const {
    std::uint64_t compiles = 0, remote_hits = 0;
    for (int node = first; node <= last; ++node) {
      const ChildOutcome stats =
          run_kjit({"cache", "stats", "--json"}, node_cache(node), scratch.path());
      EXPECT_TRUE(stats.succeeded()) << stats.err;
      if (!stats.succeeded())
        continue;
      const nlohmann::json counters = nlohmann::json::parse(stats.out)["counters"];
      compiles += counters["compiles"].get<std::uint64_t>();
      remote_hits += counters["remote_hits"].get<std::uint64_t>();
    }
    return {compiles, remote_hits};
  }

  cache::testing::ScratchDir scratch;
  RedisServer redis;
};

TEST_F(Fleet, EightNodesAskingForOneMissingVariantAtOnceCompileItOnce) {
  std::vector<Child> nodes;
  const auto started = Clock::now();
  for (int node = 0; node < kNodes; ++node)
    nodes.push_back(start_node(node));
  const std::vector<ChildOutcome> outcomes = wait_all(nodes, started);
  ASSERT_EQ(outcomes.size(), std::size_t{kNodes});

  const Tally result = tally(outcomes);
  EXPECT_EQ(result.compiled, 1) << "compiles in the fleet";
  EXPECT_EQ(result.remote, kNodes - 1) << "nodes that took the published entry";
  EXPECT_EQ(result.keys.size(), 1u);
  EXPECT_EQ(result.entries.size(), 1u) << "every node holds the same entry, byte for byte";
  EXPECT_EQ(counted(0, kNodes - 1), std::make_pair(std::uint64_t{1}, std::uint64_t{kNodes - 1}))
      << "(compiles, remote hits) in the nodes' statistics";
  EXPECT_EQ(redis.keys("kjit/entry/*").size(), 1u) << "one value published";
  EXPECT_TRUE(redis.keys("kjit/lease/*").empty()) << "the lease was released";
}

TEST_F(Fleet, WhenTheLeaseHolderIsKilledMidCompileAnotherNodeCompilesOnceItsLeaseExpires) {
  const auto started = Clock::now();
  Child holder = start_node(0);
  // Killed the moment its lease appears: it is compiling then (half a second with hiprtc), and the
  // check below proves it had published nothing.
  const RedisServer::Connection watcher = redis.connect_admin();
  ASSERT_TRUE(watcher);
  std::vector<std::string> leases;
  while ((leases = RedisServer::keys(watcher.get(), "kjit/lease/*")).empty()) {
    if (std::optional<ChildOutcome> ended = holder.wait_until(Clock::now()))
      FAIL() << "the first node ended without taking the lease: " << ended->out << ended->err;
    ASSERT_LT(Clock::now(), started + kBound) << "the first node never took the lease";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(holder.pid(), SIGKILL);
  EXPECT_TRUE(holder.wait().killed());
  ASSERT_TRUE(redis.keys("kjit/entry/*").empty())
      << "the holder published before it was killed: it was not killed mid-compile";
  ASSERT_EQ(leases.size(), 1u);
  const long long left = redis.pttl(leases.front());
  ASSERT_GT(left, 0) << "the dead holder's lease still stands";
  const auto expires = Clock::now() + std::chrono::milliseconds(left);

  std::vector<Child> nodes;
  for (int node = 1; node < kNodes; ++node)
    nodes.push_back(start_node(node));
  const std::vector<ChildOutcome> outcomes = wait_all(nodes, started);
  ASSERT_EQ(outcomes.size(), std::size_t{kNodes - 1});

  const Tally result = tally(outcomes);
  EXPECT_EQ(result.compiled, 1) << "one more compile after the holder died";
  EXPECT_EQ(result.remote, kNodes - 2);
  EXPECT_EQ(result.entries.size(), 1u);
  for (const ChildOutcome &outcome : outcomes)
    EXPECT_GE(outcome.ended, expires) << "a node finished while the dead holder's lease stood";
  EXPECT_EQ(counted(1, kNodes - 1), std::make_pair(std::uint64_t{1}, std::uint64_t{kNodes - 2}));
  EXPECT_EQ(redis.keys("kjit/entry/*").size(), 1u);
  EXPECT_TRUE(redis.keys("kjit/lease/*").empty()) << "the new holder released its lease";
}

} // namespace
} // namespace kjit::testing
