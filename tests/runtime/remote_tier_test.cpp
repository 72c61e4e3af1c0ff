// The remote tier wired into the Runtime, against an in-process fake remote and a fake compiler:
// a remote hit is verified and kept in the user tier, a compile publishes without overwriting,
// faults are misses with one warning, and a fleet of Runtimes compiles a missing variant once.
#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/kjit.hpp"
#include "tests/runtime/fake_compiler.hpp"
#include "tests/support/fake_remote.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <barrier>
#include <gtest/gtest.h>
#include <thread>

namespace kjit {
namespace {

using testing::FakeRemote;
using testing::LogCapture;
using testing::TempDir;

const Template scale("scale", R"(template <typename T, int N> __global__ void scale(T *x) {})",
                     {{"T", ParamSchema::type({"float", "half"})},
                      {"N", ParamSchema::integer(1, 1 << 20)}});
const ParamValues half_4096 = {{"T", "half"}, {"N", 4096}};

class RemoteTierTest : public ::testing::Test {
protected:
  // A node: its own user tier, the shared remote, the shared fake compiler.
  Config node(const TempDir &home) {
    Config config = testing::private_config(home);
    config.compilers = [this](Vendor) -> const jit::Compiler & { return compiler; };
    config.remote_urls = {testing::fake_remote_url(remote)};
    config.fleet = {.lease_ttl = std::chrono::milliseconds(300),
                    .wait = std::chrono::milliseconds(5000),
                    .poll = std::chrono::milliseconds(2)};
    return config;
  }
  cache::RecordKey record_of(const CodeObject &object) const {
    return {cache::kEntryRecord, object.target().id(), object.key()};
  }

  testing::FakeCompiler compiler;
  std::shared_ptr<FakeRemote> remote = std::make_shared<FakeRemote>();
  TempDir first, second;
  const jit::Target gfx90a = jit::Target::parse("gfx90a");
};

// Config names remotes by URL: one its backend cannot take is refused when the Runtime is made,
// and a signed one never hands an unsigned value to the Runtime.
TEST_F(RemoteTierTest, TheRuntimeOpensItsConfigsRemoteURLs) {
  Config config = node(first);
  config.remote_urls = {"memcached://h"};
  try {
    Runtime rt(config);
    FAIL() << "memcached:// was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_NE(error.summary().find("unknown scheme"), std::string::npos) << error.summary();
  }
  {
    Runtime rt(node(first));
    rt.compile(scale, half_4096, gfx90a); // published unsigned
  }
  Config signed_node = node(second);
  signed_node.remote_secret = "fleet secret";
  Runtime rt(signed_node);
  EXPECT_EQ(rt.compile(scale, half_4096, gfx90a).origin(), Origin::compiled)
      << "an unsigned value is a miss for a node with the fleet secret";
}

TEST_F(RemoteTierTest, ACompilePublishesAndAnotherNodeHitsTheRemoteThenItsDisk) {
  std::vector<std::byte> compiled;
  {
    Runtime rt(node(first));
    const CodeObject &object = rt.compile(scale, half_4096, gfx90a);
    EXPECT_EQ(object.origin(), Origin::compiled);
    compiled.assign(object.code().begin(), object.code().end());
    EXPECT_TRUE(remote->raw(record_of(object)));
  }
  {
    Runtime rt(node(second));
    const CodeObject &object = rt.compile(scale, half_4096, gfx90a);
    EXPECT_EQ(object.origin(), Origin::remote);
    EXPECT_EQ(to_string(object.origin()), "remote");
    EXPECT_TRUE(
        std::equal(object.code().begin(), object.code().end(), compiled.begin(), compiled.end()));
    EXPECT_TRUE(std::filesystem::is_regular_file(object.entry_path())) << "kept in the user tier";
    EXPECT_EQ(rt.counters().remote_hits, 1u);
  }
  EXPECT_EQ(compiler.compiles, 1);
  const int gets = remote->gets();
  Runtime rt(node(second));
  EXPECT_EQ(rt.compile(scale, half_4096, gfx90a).origin(), Origin::user_cache);
  EXPECT_EQ(remote->gets(), gets) << "a disk hit asks no remote";
  EXPECT_EQ(
      cache::StatsFiles(
          cache::DiskStore(second / "cache", cache::Access::read_only).layout().stats_directory())
          .total()
          .remote_hits,
      1u);
}

TEST_F(RemoteTierTest, ACompileNeverOverwritesAPublishedValue) {
  std::vector<std::byte> published;
  {
    Runtime rt(node(first));
    published = *remote->raw(record_of(rt.compile(scale, half_4096, gfx90a)));
  }
  Config rebuild = node(second);
  rebuild.rebuild = true;
  compiler.compile_delay = std::chrono::milliseconds(1100); // another created_unix in the header
  Runtime rt(rebuild);
  const CodeObject &object = rt.compile(scale, half_4096, gfx90a);
  EXPECT_EQ(object.origin(), Origin::compiled);
  EXPECT_EQ(*remote->raw(record_of(object)), published);
}

// Each value is a miss with one warning, and the node compiles; none is ever loaded.
TEST_F(RemoteTierTest, BadValuesAreMissesAndNeverLoaded) {
  cache::RecordKey record;
  std::vector<std::byte> good;
  {
    Runtime rt(node(first));
    record = record_of(rt.compile(scale, half_4096, gfx90a));
    good = *remote->raw(record);
  }
  std::vector<std::byte> flipped = good;
  flipped[flipped.size() / 2] ^= std::byte{1};
  std::vector<std::byte> cut(good.begin(), good.begin() + good.size() / 2);
  std::vector<std::byte> other_key;
  {
    Runtime rt(node(first));
    other_key = *remote->raw(record_of(rt.compile(scale, {{"T", "float"}, {"N", 4096}}, gfx90a)));
  }
  const std::vector<std::byte> good_code = cache::decode_entry(good).entry->code;
  int compiles = compiler.compiles;
  for (const auto &bad : {flipped, cut, other_key, std::vector<std::byte>{}}) {
    TempDir home;
    remote->set_raw(record, bad);
    LogCapture captured;
    Runtime rt(node(home));
    const CodeObject &object = rt.compile(scale, half_4096, gfx90a);
    EXPECT_EQ(object.origin(), Origin::compiled);
    EXPECT_EQ(++compiles, compiler.compiles);
    EXPECT_TRUE(
        std::equal(object.code().begin(), object.code().end(), good_code.begin(), good_code.end()));
    EXPECT_LE(captured.warnings(), 1) << captured.text(); // once per process and remote
  }
}

TEST_F(RemoteTierTest, ADownOrStalledRemoteIsAMissAndTheNodeCarriesOn) {
  for (bool stalled : {false, true}) {
    TempDir home;
    if (stalled)
      remote->delay(std::chrono::milliseconds(200), {.operation = std::chrono::milliseconds(20)});
    else
      remote->fail_with(cache::RemoteFault{cache::RemoteFailure::error, "connection refused"});
    Runtime rt(node(home));
    EXPECT_EQ(rt.compile(scale, {{"T", "half"}, {"N", stalled ? 1 : 2}}, gfx90a).origin(),
              Origin::compiled);
    remote->fail_with(std::nullopt);
    remote->delay(std::chrono::milliseconds(0));
  }
  // Counted in the statistics of each node, by kind.
  TempDir counted;
  remote->fail_with(cache::RemoteFault{cache::RemoteFailure::error, "denied by ACL"});
  { Runtime(node(counted)).compile(scale, {{"T", "half"}, {"N", 3}}, gfx90a); }
  remote->fail_with(std::nullopt);
  const cache::CacheCounters total =
      cache::StatsFiles(
          cache::DiskStore(counted / "cache", cache::Access::read_only).layout().stats_directory())
          .total();
  EXPECT_GE(total.remote_errors, 2u) << "the get and the lease";
  EXPECT_EQ(total.remote_timeouts, 0u);
}

// Eight nodes of four threads, each node with its own user tier, ask for one missing variant at
// once: one compile in the fleet, and every caller gets the same code.
TEST_F(RemoteTierTest, AFleetStormCompilesOnce) {
  compiler.compile_delay = std::chrono::milliseconds(200);
  constexpr int nodes = 8, threads = 4;
  std::vector<std::unique_ptr<TempDir>> homes;
  std::vector<std::unique_ptr<Runtime>> runtimes;
  for (int n = 0; n < nodes; ++n) {
    homes.push_back(std::make_unique<TempDir>());
    runtimes.push_back(std::make_unique<Runtime>(node(*homes.back())));
  }
  std::barrier start(nodes * threads);
  std::vector<std::vector<std::byte>> got(nodes * threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < nodes * threads; ++t)
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      const CodeObject &object = runtimes[t / threads]->compile(scale, half_4096, gfx90a);
      got[t].assign(object.code().begin(), object.code().end());
    });
  for (auto &worker : workers)
    worker.join();
  EXPECT_EQ(compiler.compiles, 1);
  for (const auto &code : got) {
    EXPECT_FALSE(code.empty());
    EXPECT_EQ(code, got[0]);
  }
}

// The lease holder dies mid-compile (its lease is never renewed nor released): the others wait
// until it expires, then one of them compiles.
TEST_F(RemoteTierTest, AnExpiredLeaseLetsAnotherNodeCompile) {
  Config config = node(first);
  const CodeObject *object = nullptr;
  {
    // Find the record's name without publishing: compile on a node with no remote.
    Config alone = testing::private_config(second);
    alone.compilers = config.compilers;
    Runtime probe(alone);
    object = &probe.compile(scale, half_4096, gfx90a);
    ASSERT_TRUE(remote->try_acquire(record_of(*object), config.fleet.lease_ttl).value());
  }
  {
    Runtime rt(config);
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(rt.compile(scale, half_4096, gfx90a).origin(), Origin::compiled);
    EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(200))
        << "waited for the dead holder's lease";
  }
  EXPECT_EQ(compiler.compiles, 2);
  // The wait polled the remote about a hundred times: still one lookup, one miss.
  const cache::CacheCounters total =
      cache::StatsFiles(
          cache::DiskStore(config.cache_dir, cache::Access::read_only).layout().stats_directory())
          .total();
  EXPECT_EQ(total.remote_misses, 1u);
  EXPECT_EQ(total.remote_hits, 0u);
}

} // namespace
} // namespace kjit
