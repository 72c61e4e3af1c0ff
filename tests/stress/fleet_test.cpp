// A fleet of real processes sharing a real Redis (issue 15, "One compile per fleet"): each node is
// a kjit_stress_child process of four threads with its own empty user tier, so nothing but the
// remote tier joins them. Released at the same moment, they ask for one missing variant. Exactly
// one compile happens in the whole fleet, and every caller gets a valid code object, the same
// bytes on every node. In the fault variant the node that took the lease is SIGKILLed mid-compile:
// nobody compiles until its lease expires, then exactly one node does, and every surviving caller
// succeeds within the bound.
//
// The compiles are counted twice: by each node's Runtime (its "compiled=" line and `kjit cache
// stats`) and, with the fake NVRTC, by the compiler itself, which writes a byte to a pipe of the
// test's as each compile starts (the count does not depend on the code under test). The fake's
// compile takes kFakeCompile, longer than the lease, so the holder must renew its lease to keep it,
// and the test sees exactly when a compile starts without sleeping for it.
#include "child.hpp"
#include "fake_nvrtc.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "tests/support/redis_server.hpp"
#include "tests/support/temp_dir.hpp"

#include <csignal>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <set>
#include <stdexcept>
#include <unistd.h>

namespace kjit::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Environment = std::vector<std::pair<std::string, std::string>>;

constexpr int kNodes = 8;
constexpr int kThreads = 4;
// Every node ends within this of the storm's release, or the test fails (and kills it). A node
// that finds the lease held waits at most kWait for the entry before compiling itself, so a
// broken lease shows as extra compiles within the bound, not as a timeout.
constexpr auto kBound = std::chrono::seconds(60);
constexpr auto kWait = std::chrono::seconds(30);
// Short, so that the fault variant waits little for a dead holder's lease to expire; renewed every
// second, which leaves a holder on a loaded 2-core machine two seconds of slack.
constexpr auto kLeaseTtl = std::chrono::milliseconds(3000);
// Longer than the lease: a holder that did not renew its lease would lose it mid-compile.
constexpr auto kFakeCompile = std::chrono::milliseconds(4000);

// How the nodes compile: the fake NVRTC (always there, its compiles reported on a pipe) or the
// real hiprtc (where installed; the code checked as an AMDGPU ELF holding the kernel).
struct FleetCompiler {
  const char *name;
  const char *target;
  const char *expect; // kjit_stress_child --expect
  bool reports_compiles;
};
void PrintTo(const FleetCompiler &compiler, std::ostream *out) { *out << compiler.name; }
constexpr FleetCompiler kFakeNvrtc{"FakeNvrtc", "sm_90", "fake", true};
constexpr FleetCompiler kHiprtc{"Hiprtc", "gfx90a", "elf", false};

// The fleet's nodes, running, and the read ends of the pipes their compilers report on.
struct RunningFleet {
  StartedStorm storm;
  std::vector<int> progress; // by node; closed by the destructor
  RunningFleet() = default;
  RunningFleet(RunningFleet &&) = default;
  ~RunningFleet() {
    for (int fd : progress)
      ::close(fd);
  }
};

// A compile start the fake compiler reported: which node, when the test saw it.
struct CompileStart {
  std::size_t node;
  Clock::time_point seen;
};

class FleetTest : public ::testing::Test {
protected:
  fs::path node_cache(std::size_t node) const {
    return scratch.path() / ("node-" + std::to_string(node));
  }

  RunningFleet start_fleet(const FleetCompiler &compiler) const {
    RunningFleet fleet;
    std::vector<StormNode> nodes;
    std::vector<int> write_ends;
    for (std::size_t node = 0; node < kNodes; ++node) {
      int progress[2];
      if (::pipe2(progress, O_CLOEXEC) != 0)
        throw std::runtime_error("pipe failed");
      fleet.progress.push_back(progress[0]);
      write_ends.push_back(progress[1]);
      Environment environment = {{"KJIT_REMOTE_STORAGE", redis.url()},
                                 {"KJIT_REMOTE_LEASE_MS", std::to_string(kLeaseTtl.count())},
                                 {"KJIT_REMOTE_WAIT_MS", std::to_string(kWait.count() * 1000)}};
      if (compiler.reports_compiles)
        environment.insert(
            environment.end(),
            {{"LD_LIBRARY_PATH", KJIT_FAKE_NVRTC_DIR},
             {fake_nvrtc::compile_us_variable, std::to_string(kFakeCompile.count() * 1000)},
             // The first descriptor a storm node is handed after the storm's own two.
             {fake_nvrtc::progress_fd_variable, std::to_string(child_fd_base + 2)}});
      nodes.push_back({{"--cache", node_cache(node).string(), "--target", compiler.target, "-p",
                        "T=half", "-p", "N=4096", "--expect", compiler.expect},
                       environment,
                       {progress[1]}});
    }
    fleet.storm = start_storm(nodes, kThreads, scratch.path());
    for (int fd : write_ends)
      ::close(fd); // each pipe reads end of file once its node is gone
    return fleet;
  }

  // The compile starts reported on `fleet`'s pipes (except `skipped`'s) until `until` says stop
  // or every pipe has ended; stops at the bound too.
  static std::vector<CompileStart>
  watch_compiles(RunningFleet &fleet, std::optional<std::size_t> skipped,
                 const std::function<bool(const std::vector<CompileStart> &)> &until) {
    std::vector<CompileStart> starts;
    std::vector<pollfd> open;
    std::vector<std::size_t> node_of;
    for (std::size_t node = 0; node < fleet.progress.size(); ++node)
      if (node != skipped) {
        open.push_back({fleet.progress[node], POLLIN, 0});
        node_of.push_back(node);
      }
    const auto deadline = fleet.storm.released + kBound;
    while (!open.empty() && !until(starts) && Clock::now() < deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(open.data(), open.size(), static_cast<int>(left.count()) + 1) <= 0)
        continue;
      for (std::size_t i = open.size(); i-- > 0;) {
        if (open[i].revents == 0)
          continue;
        char step = 0;
        if (::read(open[i].fd, &step, 1) != 1) { // end of file: the node is gone
          open.erase(open.begin() + static_cast<long>(i));
          node_of.erase(node_of.begin() + static_cast<long>(i));
        } else if (step == fake_nvrtc::compile_started)
          starts.push_back({node_of[i], Clock::now()});
      }
    }
    return starts;
  }

  // Waits for every node until the bound; a node still running then fails the test.
  static std::vector<ChildOutcome> wait_all(RunningFleet &fleet) {
    std::vector<ChildOutcome> outcomes;
    for (Child &node : fleet.storm.children) {
      if (node.pid() < 0)
        continue; // waited for already (the killed holder)
      const pid_t pid = node.pid();
      std::optional<ChildOutcome> outcome = node.wait_until(fleet.storm.released + kBound);
      if (!outcome) {
        ADD_FAILURE() << "node " << pid << " still ran " << kBound.count()
                      << " s after the storm began";
        continue;
      }
      outcomes.push_back(std::move(*outcome));
    }
    return outcomes;
  }

  // What the nodes printed, summed, and the code objects they got (sha256 of the bytes).
  struct Tally {
    std::uint64_t compiled = 0, remote_hits = 0, valid = 0;
    std::set<std::string> codes;
  };
  static Tally tally(const std::vector<ChildOutcome> &outcomes) {
    Tally tally;
    for (const ChildOutcome &outcome : outcomes) {
      EXPECT_TRUE(outcome.succeeded()) << "wait status " << outcome.status << "\n"
                                       << outcome.out << outcome.err;
      EXPECT_EQ(outcome.warnings(), 0) << outcome.err;
      tally.compiled += outcome.number("compiled");
      tally.remote_hits += outcome.number("remote_hits");
      tally.valid += outcome.number("valid");
      tally.codes.insert(outcome.fields.count("code") ? outcome.fields.at("code") : "none");
    }
    return tally;
  }

  // The compiles and remote hits the nodes' own statistics (`kjit cache stats`) count, summed.
  std::pair<std::uint64_t, std::uint64_t> counted(std::optional<std::size_t> skipped) const {
    std::uint64_t compiles = 0, remote_hits = 0;
    for (std::size_t node = 0; node < kNodes; ++node) {
      if (node == skipped)
        continue;
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

  testing::TempDir scratch;
  RedisServer redis;
};

class Fleet : public FleetTest, public ::testing::WithParamInterface<FleetCompiler> {};
using FleetKill = FleetTest;

void skip_without(const FleetCompiler &compiler) {
  if (compiler.reports_compiles)
    return; // the fake NVRTC is built with the tests
  try {
    jit::load_compiler(Vendor::amd);
  } catch (const Error &error) {
    GTEST_SKIP() << "hiprtc is not available: " << error.summary();
  }
}

TEST_P(Fleet, EightNodesOfFourThreadsAskingForOneMissingVariantCompileItOnce) {
  const FleetCompiler compiler = GetParam();
  skip_without(compiler);
  if (::testing::Test::IsSkipped())
    return;
  RunningFleet fleet = start_fleet(compiler);
  const std::vector<CompileStart> starts =
      watch_compiles(fleet, std::nullopt, [](const auto &) { return false; });
  const std::vector<ChildOutcome> outcomes = wait_all(fleet);
  ASSERT_EQ(outcomes.size(), std::size_t{kNodes});

  const Tally result = tally(outcomes);
  if (compiler.reports_compiles) {
    EXPECT_EQ(starts.size(), 1u) << "compiles the compiler saw in the whole fleet";
  }
  EXPECT_EQ(result.compiled, 1u) << "compiles the nodes' Runtimes counted";
  EXPECT_EQ(result.remote_hits, kNodes - 1u) << "nodes that took the published entry";
  EXPECT_EQ(result.valid, std::uint64_t{kNodes * kThreads}) << "callers with a valid code object";
  EXPECT_EQ(result.codes.size(), 1u) << "every node got the same bytes";
  EXPECT_EQ(counted(std::nullopt), std::make_pair(std::uint64_t{1}, std::uint64_t{kNodes - 1}))
      << "(compiles, remote hits) in the nodes' statistics";
  EXPECT_EQ(redis.keys("kjit/entry/*").size(), 1u) << "one value published";
  EXPECT_TRUE(redis.keys("kjit/lease/*").empty()) << "the lease was released";
}

// The fake compiler only: it says when a compile starts, so the holder is killed inside it.
TEST_F(FleetKill, WhenTheLeaseHolderIsKilledMidCompileOneMoreCompileFollowsItsLeaseExpiry) {
  RunningFleet fleet = start_fleet(kFakeNvrtc);
  // Killed the moment its compile starts: it holds the lease then, and publishes nothing for
  // kFakeCompile.
  const std::vector<CompileStart> first = watch_compiles(
      fleet, std::nullopt, [](const std::vector<CompileStart> &starts) { return !starts.empty(); });
  ASSERT_EQ(first.size(), 1u) << "no node started compiling";
  const std::size_t holder = first.front().node;
  Child &holding = fleet.storm.children[holder];
  ::kill(holding.pid(), SIGKILL);
  EXPECT_TRUE(holding.wait().killed());
  ASSERT_TRUE(redis.keys("kjit/entry/*").empty()) << "the holder published before it was killed";
  const std::vector<std::string> leases = redis.keys("kjit/lease/*");
  ASSERT_EQ(leases.size(), 1u);
  const long long left = redis.pttl(leases.front());
  ASSERT_GT(left, 0) << "the dead holder's lease still stands";
  const auto expires = Clock::now() + std::chrono::milliseconds(left);

  const std::vector<CompileStart> after =
      watch_compiles(fleet, holder, [](const auto &) { return false; });
  const std::vector<ChildOutcome> outcomes = wait_all(fleet);
  ASSERT_EQ(outcomes.size(), std::size_t{kNodes - 1});

  ASSERT_EQ(after.size(), 1u) << "compiles after the holder died";
  // The lease's remaining time was read a round trip after the kill: a node that did not wait for
  // the expiry would start at once, kLeaseTtl early, not within this.
  EXPECT_GE(after.front().seen, expires - std::chrono::milliseconds(10))
      << "a node compiled while the dead holder's lease stood";
  const Tally result = tally(outcomes);
  EXPECT_EQ(result.compiled, 1u);
  EXPECT_EQ(result.remote_hits, kNodes - 2u);
  EXPECT_EQ(result.valid, std::uint64_t{(kNodes - 1) * kThreads});
  EXPECT_EQ(result.codes.size(), 1u);
  EXPECT_EQ(counted(holder), std::make_pair(std::uint64_t{1}, std::uint64_t{kNodes - 2}));
  EXPECT_EQ(redis.keys("kjit/entry/*").size(), 1u);
  EXPECT_TRUE(redis.keys("kjit/lease/*").empty()) << "the new holder released its lease";
}

INSTANTIATE_TEST_SUITE_P(Compilers, Fleet, ::testing::Values(kFakeNvrtc, kHiprtc),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
} // namespace kjit::testing
