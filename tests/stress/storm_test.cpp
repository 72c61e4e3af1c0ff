// The storm: 16 processes of 8 threads each ask a fresh cache for the same missing variant at the
// same moment, with the real NVRTC. Exactly one compile among them all, a valid cubin for every
// caller, no temp file left.
#include "child.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "tests/cache/support.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <set>
#include <unistd.h>

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
  cache::testing::ScratchDir scratch;
  const fs::path cache = scratch.path() / "cache";

  // Every child writes a byte to `ready` once its threads wait, and they all start when `go`
  // reads end of file: when this process closes its end.
  int ready[2], go[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  std::vector<Child> children;
  for (int i = 0; i < processes; ++i)
    children.emplace_back(std::vector<std::string>{"--cache", cache.string(), "--target", "sm_90",
                                                   "-p", "T=half", "-p", "N=4096", "--threads",
                                                   std::to_string(threads), "--ready-fd",
                                                   std::to_string(child_fd_base), "--go-fd",
                                                   std::to_string(child_fd_base + 1)},
                          std::vector<std::pair<std::string, std::string>>{},
                          std::vector<int>{ready[1], go[0]}, scratch.path());
  ::close(ready[1]);
  ::close(go[0]);
  for (int i = 0; i < processes; ++i) {
    char byte;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "a child died before its threads were ready";
  }
  ::close(go[1]);
  ::close(ready[0]);

  std::uint64_t compiled = 0, valid = 0, hits = 0;
  std::set<std::string> codes;
  for (Child &child : children) {
    const ChildOutcome outcome = child.wait();
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

  const cache::CacheCounters stats = cache::StatsFiles(cache / "v1" / "stats").total();
  EXPECT_EQ(stats.compiles, 1u) << "the cache statistics agree";
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_TRUE(temp_files_under(cache).empty());
  EXPECT_FALSE(lock_file_is_held(cache / "v1" / "lock"));
}

} // namespace
} // namespace kjit::testing
