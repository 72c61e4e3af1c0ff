// The remote tier per lookup (issue 15, "Measured"), each figure with its baseline in the same run:
//   - the remote's part of a lookup that misses every tier (find, then claim_or_wait: what a
//     Runtime asks of the remote before it compiles) with no remote configured, and with the
//     remote down and its circuit breaker open; the user tier's miss, which that lookup has
//     paid already, as the scale;
//   - a remote hit (get and verification, Redis on loopback, connection open) against a disk hit
//     of the same entry (read and verification).
// The remote is a redis-server this program starts on a free loopback port (and stops); the
// entry is scale<half, 4096> compiled for gfx90a by hiprtc (the hit benchmarks skip without it).
#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/redis_remote.hpp"
#include "kjit/cache/remote_url.hpp"
#include "kjit/kjit.hpp"
#include "kjit/log.hpp"
#include "runtime/src/remote_tier.hpp"
#include "tests/support/redis_server.hpp"

#include <benchmark/benchmark.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>

namespace kjit::bench {
namespace {

namespace fs = std::filesystem;

std::string scratch_path() {
  std::random_device random;
  return (fs::temp_directory_path() / ("kjit-remote-bench-" + std::to_string(random()))).string();
}

// One compiled entry in a user tier of its own, and a redis-server holding it.
struct Fixture {
  fs::path dir = scratch_path();
  std::optional<cache::DiskStore> store;
  std::optional<cache::Entry> entry; // nullopt without hiprtc
  std::string skip_reason;
  testing::RedisServer redis;

  Fixture() {
    Config config;
    config.cache_dir = dir;
    config.prebuilt_dir = dir / "none";
    store.emplace(dir, cache::Access::read_only);
    try {
      Runtime rt(config);
      const CodeObject &code = rt.compile(templates::find("scale"), {{"T", "half"}, {"N", 4096}},
                                          jit::Target::parse("gfx90a"));
      entry = store->read(code.key(), code.target().id()).entry;
    } catch (const Error &error) {
      skip_reason = error.summary();
    }
    if (entry) {
      RemoteTier tier(remotes(redis.url()), FleetWait{});
      tier.publish(*entry);
    }
  }
  ~Fixture() { fs::remove_all(dir); }

  static std::vector<cache::RemoteStorage> remotes(const std::string &url) {
    std::vector<cache::RemoteStorage> storages;
    for (const cache::RemoteUrl &parsed : cache::parse_remote_storage(url))
      storages.push_back(cache::open_redis_remote(parsed));
    return storages;
  }
};

Fixture &fixture() {
  static Fixture instance;
  return instance;
}

// A key no tier holds.
const cache::Key &missing_key() {
  static const cache::Key key = *cache::Key::from_hex(std::string(64, 'e'));
  return key;
}

// 0: no remote configured; 1: the remote down (nothing listens on its port), breaker open.
void BM_RemotePartOfAMiss(benchmark::State &state) {
  log().set_level(spdlog::level::off); // the down remote's one warning would cut the table
  const bool down = state.range(0) == 1;
  std::vector<cache::RemoteStorage> remotes;
  if (down) {
    // A port nothing listens on: a server that is gone (connection refused at once).
    testing::RedisServer gone;
    const std::string url = gone.url();
    gone.kill();
    remotes = Fixture::remotes(url);
    const cache::RecordKey probe{cache::kEntryRecord, "gfx90a", missing_key()};
    for (int i = 0; i < cache::kBreakerFailures; ++i)
      (void)remotes.front().backend->get(probe);
    auto skipped = remotes.front().backend->get(probe);
    if (skipped.ok() || skipped.fault().message.find("skipped") == std::string::npos) {
      state.SkipWithError("the breaker did not open");
      return;
    }
  }
  RemoteTier tier(std::move(remotes), FleetWait{});
  for (auto _ : state) {
    std::optional<cache::Entry> found = tier.find(missing_key(), "gfx90a");
    std::unique_ptr<RemoteTier::Claim> claim;
    if (!found)
      found = tier.claim_or_wait(missing_key(), "gfx90a", claim);
    benchmark::DoNotOptimize(found);
  }
  // The breaker reopens after kBreakerCooldown: a run longer than that would time reconnections.
  state.counters["errors"] = static_cast<double>(tier.counters().remote_errors);
}

void BM_UserTierMiss(benchmark::State &state) {
  const cache::DiskStore &store = *fixture().store;
  for (auto _ : state)
    benchmark::DoNotOptimize(store.read(missing_key(), "gfx90a"));
}

// 0: the disk hit (baseline); 1: the remote hit on loopback.
void BM_Hit(benchmark::State &state) {
  Fixture &fx = fixture();
  if (!fx.entry) {
    state.SkipWithError(("no entry to read (" + fx.skip_reason + ")").c_str());
    return;
  }
  const cache::Key key = fx.entry->header.key;
  const std::string target = fx.entry->header.target;
  if (state.range(0) == 0) {
    for (auto _ : state) {
      cache::Lookup found = fx.store->read(key, target);
      if (found.status != cache::Lookup::Status::hit)
        state.SkipWithError("the disk hit missed");
      benchmark::DoNotOptimize(found);
    }
    return;
  }
  RemoteTier tier(Fixture::remotes(fx.redis.url()), FleetWait{});
  for (auto _ : state) {
    std::optional<cache::Entry> found = tier.find(key, target);
    if (!found)
      state.SkipWithError("the remote hit missed");
    benchmark::DoNotOptimize(found);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(fx.entry->code.size()));
}

BENCHMARK(BM_RemotePartOfAMiss)->ArgName("down")->Arg(0)->Arg(1)->MinTime(1.0);
BENCHMARK(BM_UserTierMiss)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Hit)->ArgName("remote")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

} // namespace
} // namespace kjit::bench

BENCHMARK_MAIN();
