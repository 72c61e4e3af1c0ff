// The storm: 16 processes of 8 threads each ask a fresh cache for the same missing variant at the
// same moment, with the real NVRTC. Exactly one compile among them all, a valid cubin for every
// caller, no temp file left.
#include "child.hpp"
#include "kjit/cache/layout.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <set>

namespace kjit::testing {
namespace {

namespace fs = std::filesystem;

TEST(Storm, SixteenProcessesOfEightThreadsCompileOneMissingVariantOnce) {
  try {
    jit::load_compiler(Vendor::nvidia);
  } catch (const Error &error) {
    GTEST_SKIP() << "NVRTC is not available: " << error.summary();
  }
  constexpr int processes = 16, threads = 8;
  testing::TempDir scratch;
  const fs::path cache = scratch.path() / "cache";
  const Storm storm =
      run_storm(processes, threads,
                {"--cache", cache.string(), "--target", "sm_90", "-p", "T=half", "-p", "N=4096"},
                scratch.path());

  std::uint64_t compiled = 0, valid = 0, hits = 0;
  std::set<std::string> codes;
  for (const ChildOutcome &outcome : storm.children) {
    EXPECT_TRUE(outcome.succeeded()) << outcome.out << outcome.err;
    EXPECT_EQ(outcome.warnings(), 0) << outcome.err;
    compiled += outcome.number("compiled");
    hits += outcome.number("user_hits");
    valid += outcome.number("valid");
    codes.insert(outcome.fields.count("code") ? outcome.fields.at("code") : "none");
  }
  EXPECT_EQ(compiled, 1u) << "compiles summed over the processes";
  EXPECT_EQ(hits, processes - 1u) << "every other process found the entry on disk";
  EXPECT_EQ(valid, std::uint64_t{processes * threads}) << "callers that got a valid cubin";
  EXPECT_EQ(codes.size(), 1u) << "every process got the same code object";

  const cache::CacheCounters stats =
      cache::StatsFiles(cache::Layout(cache).stats_directory()).total();
  EXPECT_EQ(stats.compiles, 1u) << "the cache statistics agree";
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_TRUE(temp_files_under(cache).empty());
  EXPECT_FALSE(lock_file_is_held(cache::Layout(cache).lock_path()));
}

} // namespace
} // namespace kjit::testing
