// A process killed (SIGKILL) at random points of its compile and of the entry's publication, 100
// times: no torn entry is ever visible, the lock is free the moment the process is gone, and the
// next process asking for the variant gets it. The children compile with the fake NVRTC (2 ms,
// a 4 MiB code object, so that writing the entry takes a while and kills land inside it). Each
// trial has a cache of its own.
#include "child.hpp"
#include "fake_nvrtc.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/cache/layout.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <iostream>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace kjit::testing {
namespace {

namespace fs = std::filesystem;
using Environment = std::vector<std::pair<std::string, std::string>>;

// A child whose progress through the fake compiler this process follows.
class WatchedChild {
public:
  WatchedChild(const std::vector<std::string> &arguments, const Environment &environment,
               const fs::path &scratch) {
    int progress[2];
    if (::pipe2(progress, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe failed");
    child_.emplace(arguments, environment, std::vector<int>{progress[1]}, scratch);
    ::close(progress[1]);
    progress_ = progress[0];
  }
  ~WatchedChild() { ::close(progress_); }
  // Waits until the fake compiler reports `step`; false when the child ended first.
  bool reached(char step) {
    char byte = 0;
    while (byte != step)
      if (::read(progress_, &byte, 1) != 1)
        return false;
    return true;
  }
  Child &child() { return *child_; }

private:
  std::optional<Child> child_;
  int progress_ = -1;
};

using Clock = std::chrono::steady_clock;
long us_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

// How long a child that is not killed takes from the start of its compile to its exit, and from
// handing over the code to the entry appearing under its name (encoding, writing, renaming),
// timed where the test runs: the spans the kill points are drawn from.
struct Spans {
  long compile_to_exit_us = 0;
  long publication_us = 0;
};

Spans measure_spans(const std::vector<std::string> &arguments, const Environment &environment,
                    const fs::path &cache, const fs::path &scratch) {
  WatchedChild watched(arguments, environment, scratch);
  Spans spans;
  if (!watched.reached(fake_nvrtc::compile_started))
    throw std::runtime_error("the calibration child did not compile");
  const auto compile_started = Clock::now();
  if (!watched.reached(fake_nvrtc::code_handed_over))
    throw std::runtime_error("the calibration child did not finish its compile");
  const auto handed_over = Clock::now();
  const cache::DiskStore store(cache, cache::Access::read_only);
  while (cache::scan(store).empty())
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  spans.publication_us = us_since(handed_over);
  if (!watched.child().wait().succeeded())
    throw std::runtime_error("the calibration child failed");
  spans.compile_to_exit_us = us_since(compile_started);
  return spans;
}

TEST(Crash, AProcessKilledWhileCompilingOrPublishingLeavesNoTornEntryAndNoHeldLock) {
  constexpr int trials = 100;
  constexpr unsigned seed = 20261123; // the kill points are drawn from it
  testing::TempDir scratch;
  const Environment environment = {
      {"LD_LIBRARY_PATH", KJIT_FAKE_NVRTC_DIR},
      {fake_nvrtc::compile_us_variable, "2000"},
      {fake_nvrtc::code_bytes_variable, std::to_string(4 << 20)},
      {fake_nvrtc::progress_fd_variable, std::to_string(child_fd_base)}};
  auto arguments_for = [&](const fs::path &cache) {
    return std::vector<std::string>{"--cache", cache.string(), "--target", "sm_90",    "-p",
                                    "T=float", "-p",           "N=64",     "--expect", "fake"};
  };
  const fs::path calibration = scratch.path() / "calibration";
  const Spans spans =
      measure_spans(arguments_for(calibration), environment, calibration, scratch.path());

  // Even trials are killed anywhere from the start of the compile to the exit, odd trials
  // during publication: it is short, and uniform kill points would rarely land in it.
  std::mt19937 random(seed);
  std::uniform_int_distribution<long> anywhere_us(0, spans.compile_to_exit_us);
  std::uniform_int_distribution<long> publishing_us(0, spans.publication_us);
  int killed = 0, finished = 0, published_before_kill = 0, temp_files_left = 0;
  std::uint64_t next_compiles = 0, next_hits = 0, failures = 0;
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const fs::path cache = scratch.path() / ("cache-" + std::to_string(trial));
    const cache::DiskStore store(cache, cache::Access::read_only);
    const std::vector<std::string> arguments = arguments_for(cache);

    WatchedChild victim(arguments, environment, scratch.path());
    const bool in_publication = trial % 2 == 1;
    ASSERT_TRUE(victim.reached(fake_nvrtc::compile_started));
    if (in_publication) {
      ASSERT_TRUE(victim.reached(fake_nvrtc::code_handed_over));
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(in_publication ? publishing_us(random) : anywhere_us(random)));
    ::kill(victim.child().pid(), SIGKILL);
    const ChildOutcome outcome = victim.child().wait();
    killed += outcome.killed();
    finished += outcome.succeeded();
    ASSERT_TRUE(outcome.killed() || outcome.succeeded()) << outcome.err;

    // The moment the process is gone, nobody holds the lock.
    EXPECT_FALSE(lock_file_is_held(cache::Layout(cache).lock_path()));
    // Whatever is under an entry's name is a whole, valid entry.
    const std::vector<cache::StoredEntry> entries = cache::scan(store);
    for (const cache::StoredEntry &entry : entries)
      EXPECT_EQ(cache::verify(store, entry), "") << entry.path;
    const bool published = !entries.empty();
    published_before_kill += published && outcome.killed();
    temp_files_left += !temp_files_under(cache).empty();

    // The next caller gets the variant: from the entry if it was published, else compiled.
    const ChildOutcome next =
        run_child(arguments, {environment.begin(), environment.end() - 1}, scratch.path());
    EXPECT_TRUE(next.succeeded()) << next.out << next.err;
    EXPECT_EQ(next.warnings(), 0) << "a rejected (torn) entry: " << next.err;
    EXPECT_EQ(next.number("compiled"), published ? 0u : 1u) << next.out;
    failures += !next.succeeded() || next.warnings() != 0;
    next_compiles += next.number("compiled");
    next_hits += next.number("user_hits");
    fs::remove_all(cache);
  }
  EXPECT_EQ(failures, 0u);
  // Where the kills landed, for BENCHMARKS.md; the checks above hold wherever they land.
  std::cout << "crash: " << trials << " trials (seed " << seed << "; compile to exit "
            << spans.compile_to_exit_us << " us, publication " << spans.publication_us
            << " us): " << killed << " killed (" << published_before_kill << " after publishing, "
            << temp_files_left << " while writing the entry, "
            << killed - published_before_kill - temp_files_left << " before writing), " << finished
            << " finished first; next callers: " << next_compiles << " compiles, " << next_hits
            << " hits, " << failures << " failures\n";
}

} // namespace
} // namespace kjit::testing
