// Statistics kept across processes: what concurrent processes add is summed, nothing is lost,
// and a damaged shard costs only its own counts.
#include "kjit/cache/stats.hpp"
#include "tests/support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kjit::cache {
namespace {

namespace fs = std::filesystem;

CacheCounters one_compile_and_one_hit() {
  CacheCounters c;
  c.user_hits = 1;
  c.misses = 1;
  c.compiles = 1;
  c.compile_ms = 2.5;
  c.saved_ms = 4.0;
  return c;
}

TEST(StatsFiles, ConcurrentProcessesLoseNoCounts) {
  testing::TempDir dir;
  const StatsFiles stats(dir.path() / "stats");
  constexpr int processes = 8, adds = 50;
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      for (int i = 0; i < adds; ++i)
        stats.add(one_compile_and_one_hit());
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const CacheCounters total = stats.total();
  EXPECT_EQ(total.user_hits, std::uint64_t{processes * adds});
  EXPECT_EQ(total.misses, std::uint64_t{processes * adds});
  EXPECT_EQ(total.compiles, std::uint64_t{processes * adds});
  EXPECT_DOUBLE_EQ(total.compile_ms, 2.5 * processes * adds);
  EXPECT_DOUBLE_EQ(total.saved_ms, 4.0 * processes * adds);
  EXPECT_EQ(fs::status(dir.path() / "stats").permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST(StatsFiles, ADamagedShardCountsAsZeroAndClearZeroesAll) {
  testing::TempDir dir;
  const StatsFiles stats(dir.path() / "stats");
  stats.add(one_compile_and_one_hit());
  // Another process's shard (this one writes shard pid % 16).
  const std::string other_shard = std::to_string((::getpid() + 1) % 16) + ".json";
  std::ofstream(dir.path() / "stats" / other_shard) << "{\"compiles\": \"many\", \"misses\": 3";
  EXPECT_EQ(stats.total(), one_compile_and_one_hit());
  stats.clear();
  EXPECT_TRUE(stats.total().empty());
}

TEST(StatsFiles, AnUnwritableDirectoryIsNotAnError) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "stats") << "a file where the directory should be";
  const StatsFiles stats(dir.path() / "stats");
  EXPECT_NO_THROW(stats.add(one_compile_and_one_hit()));
  EXPECT_TRUE(stats.total().empty());
}

} // namespace
} // namespace kjit::cache
