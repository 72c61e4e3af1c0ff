// The worker pool (kjit/runtime/worker_pool.hpp) with shell scripts for workers: every job
// answered or lost exactly once, a dead worker replaced, and nothing left running.
#include "kjit/error.hpp"
#include "kjit/runtime/worker_pool.hpp"

#include <cerrno>
#include <gtest/gtest.h>
#include <map>
#include <numeric>
#include <stdexcept>
#include <sys/wait.h>

namespace kjit {
namespace {

// A worker that answers each job number N with "answer N", running `before` first (with $n set).
WorkerCommand shell_worker(const std::string &before = "") {
  return {"/bin/sh", {"sh", "-c", "while read n; do " + before + " echo \"answer $n\"; done"}};
}

std::vector<std::size_t> jobs(std::size_t count) {
  std::vector<std::size_t> numbers(count);
  std::iota(numbers.begin(), numbers.end(), 0);
  return numbers;
}

struct Recorded {
  std::map<std::size_t, int> answers;      // job -> times answered
  std::map<std::size_t, std::string> lost; // job -> how its worker ended
  WorkerEvents events() {
    return {[this](std::size_t job, const std::string &line) {
              if (line != "answer " + std::to_string(job))
                return false;
              ++answers[job];
              return true;
            },
            [this](std::size_t job, const std::string &how) { lost[job] = how; }};
  }
};

// No child of this process is left, running or unreaped.
bool no_children() { return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

TEST(WorkerPoolTest, EveryJobIsAnsweredOnceAndOtherLinesAreSkipped) {
  Recorded recorded;
  run_worker_pool(shell_worker("echo noise;"), jobs(40), 3, recorded.events());
  ASSERT_EQ(recorded.answers.size(), 40u);
  for (const auto &[job, times] : recorded.answers)
    EXPECT_EQ(times, 1) << "job " << job;
  EXPECT_TRUE(recorded.lost.empty());
  EXPECT_TRUE(no_children());
}

TEST(WorkerPoolTest, AWorkerThatEndsLosesItsJobAndAnotherTakesItsPlace) {
  Recorded recorded;
  run_worker_pool(shell_worker("[ \"$n\" = 3 ] && exit 7; [ \"$n\" = 6 ] && kill -9 $$;"), jobs(12),
                  2, recorded.events());
  EXPECT_EQ(recorded.lost.size(), 2u);
  EXPECT_EQ(recorded.lost[3], "exit status 7");
  EXPECT_EQ(recorded.lost[6].rfind("signal 9 (", 0), 0u) << recorded.lost[6];
  EXPECT_EQ(recorded.answers.size(), 10u) << "every other job, by the workers started after";
  EXPECT_EQ(recorded.answers.count(3) + recorded.answers.count(6), 0u);
  EXPECT_TRUE(no_children());
}

TEST(WorkerPoolTest, AProgramThatCannotStartIsAProcessErrorNamingIt) {
  Recorded recorded;
  try {
    run_worker_pool({"/nonexistent/worker", {"worker"}}, jobs(2), 2, recorded.events());
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::process_error);
    EXPECT_NE(error.summary().find("/nonexistent/worker"), std::string::npos) << error.summary();
  }
  EXPECT_TRUE(no_children());
}

TEST(WorkerPoolTest, NoJobsStartNoWorker) {
  Recorded recorded;
  run_worker_pool({"/nonexistent/worker", {"worker"}}, {}, 4, recorded.events());
  EXPECT_TRUE(recorded.answers.empty());
}

// An event that throws ends the run: the workers still waiting for jobs are stopped and reaped.
TEST(WorkerPoolTest, AnEventThatThrowsLeavesNoWorkerBehind) {
  WorkerEvents events{[](std::size_t, const std::string &) -> bool {
                        throw std::runtime_error("the caller gave up");
                      },
                      [](std::size_t, const std::string &) {}};
  EXPECT_THROW(run_worker_pool(shell_worker(), jobs(8), 3, events), std::runtime_error);
  EXPECT_TRUE(no_children());
}

} // namespace
} // namespace kjit
