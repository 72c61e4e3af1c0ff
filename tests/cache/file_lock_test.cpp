#include "tests/support/temp_dir.hpp"

#include "kjit/cache/file_lock.hpp"
#include "kjit/error.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <optional>
#include <stdexcept>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace kjit::cache {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

// How long a blocked lock must stay blocked to count as excluded, and how long a free one may take.
constexpr auto kBlockedFor = 300ms;
constexpr auto kAcquiredWithin = 10s;

// Takes the lock on a thread of its own and holds it until destroyed. Destroy it only once the
// lock can be had: its destructor waits for the thread.
class LockAttempt {
public:
  LockAttempt(const std::filesystem::path &lock_file, const Key &key)
      : thread_([this, lock_file, key] {
          try {
            FileLock lock(lock_file, key);
            acquired_ = true;
            while (!release_)
              std::this_thread::sleep_for(1ms);
          } catch (const Error &) {
            // acquired_ stays false: the test fails on it
          }
        }) {}
  ~LockAttempt() {
    release_ = true;
    thread_.join();
  }

  bool acquired_within(std::chrono::milliseconds limit) const {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!acquired_ && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    return acquired_;
  }

private:
  std::atomic<bool> acquired_{false};
  std::atomic<bool> release_{false};
  std::thread thread_;
};

// A child process that holds the lock until release_fd is closed or it is killed. The
// constructor returns once the child holds the lock.
struct LockHolderProcess {
  pid_t pid = -1;
  int release_fd = -1; // closing it lets the child exit

  LockHolderProcess(const std::filesystem::path &lock_file, const Key &key) {
    int held[2], release[2];
    if (::pipe(held) != 0 || ::pipe(release) != 0)
      throw std::runtime_error("pipe failed");
    pid = ::fork();
    if (pid == 0) {
      ::close(held[0]);
      ::close(release[1]);
      hold_until_released(lock_file, key, held[1], release[0]);
    }
    ::close(held[1]);
    ::close(release[0]);
    release_fd = release[1];
    char byte;
    if (pid < 0 || ::read(held[0], &byte, 1) != 1)
      throw std::runtime_error("lock holder process failed");
    ::close(held[0]);
  }
  ~LockHolderProcess() {
    ::close(release_fd);
    if (pid > 0)
      wait();
  }

  [[noreturn]] static void hold_until_released(const std::filesystem::path &lock_file,
                                               const Key &key, int held_fd, int release_fd) {
    try {
      FileLock lock(lock_file, key);
      char byte = 'h';
      (void)!::write(held_fd, &byte, 1);
      (void)!::read(release_fd, &byte, 1); // returns when the parent closes its end
      ::_exit(0);                          // the lock goes with the process: no destructor runs
    } catch (...) {
      ::_exit(1); // the parent reads no byte and fails the test
    }
  }

  int wait() {
    int status = 0;
    ::waitpid(std::exchange(pid, -1), &status, 0);
    return status;
  }
};

class FileLockTest : public ::testing::Test {
protected:
  TempDir scratch;
  std::filesystem::path lock_file = scratch.path() / "lock";
  Key key = key_of({{"lock", "one"}});
  Key other_key = key_of({{"lock", "two"}});
};

TEST_F(FileLockTest, CreatesAPrivateLockFile) {
  FileLock lock(lock_file, key);
  struct stat status {};
  ASSERT_EQ(::stat(lock_file.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0600u);
}

TEST_F(FileLockTest, ExcludesBetweenThreads) {
  std::optional<FileLock> held(std::in_place, lock_file, key);
  LockAttempt attempt(lock_file, key);
  EXPECT_FALSE(attempt.acquired_within(kBlockedFor));
  held.reset();
  EXPECT_TRUE(attempt.acquired_within(kAcquiredWithin));
}

TEST_F(FileLockTest, DifferentKeysDoNotExclude) {
  FileLock held(lock_file, key);
  LockAttempt attempt(lock_file, other_key);
  EXPECT_TRUE(attempt.acquired_within(kAcquiredWithin));
}

TEST_F(FileLockTest, MovingKeepsTheLockAndAssigningReleasesTheOldOne) {
  std::optional<FileLock> held(std::in_place, lock_file, key);
  FileLock moved = std::move(*held);
  held.reset(); // the moved-from lock owns nothing: destroying it releases nothing
  LockAttempt attempt(lock_file, key);
  EXPECT_FALSE(attempt.acquired_within(kBlockedFor));

  moved = FileLock(lock_file, other_key); // drops the lock on `key`
  EXPECT_TRUE(attempt.acquired_within(kAcquiredWithin));
}

TEST_F(FileLockTest, ExcludesBetweenProcessesUntilTheHolderExits) {
  LockHolderProcess holder(lock_file, key);
  LockAttempt attempt(lock_file, key);
  EXPECT_FALSE(attempt.acquired_within(kBlockedFor));
  ::close(std::exchange(holder.release_fd, -1));
  EXPECT_EQ(holder.wait(), 0);
  EXPECT_TRUE(attempt.acquired_within(kAcquiredWithin));
}

TEST_F(FileLockTest, AKilledHolderReleasesTheLock) {
  LockHolderProcess holder(lock_file, key);
  LockAttempt attempt(lock_file, key);
  EXPECT_FALSE(attempt.acquired_within(kBlockedFor));
  ::kill(holder.pid, SIGKILL);
  int status = holder.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(attempt.acquired_within(kAcquiredWithin));
}

TEST_F(FileLockTest, TryingForAWhileGivesUpOnAHeldLockAndTakesAFreeOne) {
  std::optional<FileLock> held(std::in_place, lock_file, key);
  EXPECT_FALSE(FileLock::try_for(lock_file, key, 50ms, 5ms));
  EXPECT_TRUE(FileLock::try_for(lock_file, other_key, 50ms, 5ms));
  held.reset();
  std::optional<FileLock> taken = FileLock::try_for(lock_file, key, 0ms, 5ms);
  ASSERT_TRUE(taken);
  LockAttempt attempt(lock_file, key);
  EXPECT_FALSE(attempt.acquired_within(kBlockedFor)) << "try_for's lock does not exclude";
  taken.reset();
  EXPECT_TRUE(attempt.acquired_within(kAcquiredWithin));
  EXPECT_THROW(FileLock::try_for(scratch.path() / "missing" / "lock", key, 0ms, 5ms), Error);
}

TEST_F(FileLockTest, UnopenableLockFileThrowsCacheIo) {
  try {
    FileLock lock(scratch.path() / "missing" / "lock", key);
    FAIL() << "locked a file in a missing directory";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::cache_io);
    EXPECT_NE(error.summary().find("No such file or directory"), std::string::npos)
        << error.summary();
  }
}

} // namespace
} // namespace kjit::cache
