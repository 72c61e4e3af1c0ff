// Tuning records shared through a real Redis (the remote tier's code, a kind of its own), and
// concurrent tuners of one problem in several processes and threads doing the work once, counted
// by an instrumented tuning callback, never by timing.
#include "kjit/cache/redis_remote.hpp"
#include "kjit/cache/remote_url.hpp"
#include "kjit/cache/signed_remote.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "tests/runtime/tuning_records.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/redis_server.hpp"
#include "tests/support/temp_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <thread>

namespace kjit {
namespace {

using namespace std::chrono_literals;
using testing::h100;
using testing::LogCapture;
using testing::record_for;
using testing::RedisServer;
using testing::rms_key;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

// Short, so that a waiter takes over from a dead tuner quickly; long waits, so that a live tuner's
// record is always waited for.
const FleetWait fleet{.lease_ttl = 300ms, .wait = 20s, .poll = 5ms};

// `name`, numbered so that no two remotes of this process share it: warnings come once per
// process and remote description, and each test case (each repetition too) expects its own.
std::string unique_description(const std::string &name) {
  static std::atomic<int> made = 0;
  return name + " #" + std::to_string(++made);
}

// The remote at `url`, signed with `secret` when it is not empty, named `description` in
// warnings when that is not empty.
std::vector<cache::RemoteStorage> remote_at(const std::string &url, const std::string &secret = {},
                                            const std::string &description = {}) {
  cache::RemoteStorage storage = cache::open_redis_remote(cache::parse_remote_storage(url).at(0));
  if (!secret.empty())
    storage.backend = cache::signed_backend(storage.backend, secret);
  if (!description.empty())
    storage.description = description;
  return {storage};
}

// What a tuning record is stored under in a remote.
cache::RecordKey remote_name_of(const TuningKey &key) {
  return {{"tuning", 1}, key.device.target, key.key()};
}

// ---- files the processes of a test count through ----------------------------------------------

void append_line(const std::filesystem::path &file, const std::string &line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  const std::string text = line + '\n';
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot append to " + file.string());
  ::close(fd);
}

std::vector<std::string> lines_of(const std::filesystem::path &file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// Waits until `file` has `count` lines; false when `bound` passes first.
bool await_lines(const std::filesystem::path &file, std::size_t count,
                 Clock::duration bound = 20s) {
  for (const auto deadline = Clock::now() + bound; Clock::now() < deadline;) {
    if (lines_of(file).size() >= count)
      return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// Runs `body` in a child process, which exits 0 when it returns and 1 when it throws.
pid_t in_child(const std::function<void()> &body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int status = 0;
    try {
      body();
    } catch (const std::exception &error) {
      std::fprintf(stderr, "child %d: %s\n", ::getpid(), error.what());
      status = 1;
    }
    ::_exit(status);
  }
  return pid;
}

// The child's exit status; -1 (and the child killed) when it runs past `bound`.
int exit_status(pid_t pid, Clock::duration bound = 60s) {
  int status = 0;
  for (const auto deadline = Clock::now() + bound; Clock::now() < deadline;) {
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(5ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

// ---- sharing through the remote ----------------------------------------------------------------

TEST(RemoteTuning, ARecordTunedOnOneNodeIsFoundOnAnotherAndKeptOnItsDisk) {
  RedisServer redis;
  TempDir first, second;
  int tunings = 0;
  const TuningRecord tuned =
      TuningTable(first.path(), {}, remote_at(redis.url()), fleet).find_or_tune(rms_key(4096), [&] {
        ++tunings;
        return record_for(rms_key(4096));
      });
  EXPECT_EQ(redis.keys("kjit/tuning/*"),
            std::vector<std::string>{"kjit/tuning/v1/sm_90a/" + rms_key(4096).key().hex()});

  const TuningTable other(second.path(), {}, remote_at(redis.url()), fleet);
  EXPECT_EQ(other.find(rms_key(4096)), tuned);
  EXPECT_FALSE(other.find(rms_key(1024)));
  other.find_or_tune(rms_key(4096), [&] {
    ++tunings;
    return record_for(rms_key(4096));
  });
  EXPECT_EQ(tunings, 1) << "the second node tuned what the first had published";

  redis.kill();
  EXPECT_EQ(TuningTable(second.path()).find(rms_key(4096)), tuned) << "kept in its user tier";
}

TEST(RemoteTuning, ABadValueIsRefusedWithAWarningAndTheTableFallsBack) {
  RedisServer redis;
  const TuningKey key = rms_key(4096);
  const std::string good = record_for(key).to_json();
  auto replaced = [](std::string text, const std::string &from, const std::string &to) {
    return text.replace(text.find(from), from.size(), to);
  };
  // Signed with the fleet secret, then changed behind kjit's back.
  auto signed_then_rewritten = [&] {
    remote_at(redis.url(), "fleet secret")
        .front()
        .backend->put(remote_name_of(key), std::as_bytes(std::span(good)),
                      cache::PutMode::overwrite);
    auto stored = remote_at(redis.url()).front().backend->get(remote_name_of(key));
    std::string text(reinterpret_cast<const char *>(stored.value()->data()),
                     stored.value()->size());
    return replaced(text, "3.25", "0.25");
  };
  struct Case {
    std::string name;
    std::string value;         // stored unsigned under the key's name, unless `presigned`
    std::string reader_secret; // the fleet secret of the node that reads it
    std::string expected;      // in the warning
  };
  const std::vector<Case> cases = {
      {"garbage", "not a tuning record", "", "not valid JSON"},
      {"another format", replaced(good, "\"format\": 1", "\"format\": 2"), "",
       "tuning record format 2"},
      {"a rewritten problem", replaced(good, "\"HIDDEN\": 4096", "\"HIDDEN\": 2048"), "",
       "is not the key of its content"},
      {"another GPU model",
       record_for(rms_key(4096, {"sm_90a", 114, "NVIDIA H100 PCIe"})).to_json(), "",
       "with 114 compute units"},
      {"another compiler", record_for(rms_key(4096, h100, "nvrtc 12.4")).to_json(), "",
       "compiled by nvrtc 12.4"},
      {"unsigned, read with a secret", good, "fleet secret", "unsigned"},
      {"signed with another secret", "", "fleet secret", "wrongly signed"},
      {"rewritten after signing", signed_then_rewritten(), "fleet secret", "wrongly signed"},
  };
  for (const Case &bad : cases) {
    SCOPED_TRACE(bad.name);
    TempDir dir;
    if (bad.name == "signed with another secret")
      remote_at(redis.url(), "another secret")
          .front()
          .backend->put(remote_name_of(key), std::as_bytes(std::span(good)),
                        cache::PutMode::overwrite);
    else
      remote_at(redis.url())
          .front()
          .backend->put(remote_name_of(key), std::as_bytes(std::span(bad.value)),
                        cache::PutMode::overwrite);
    LogCapture log;
    const TuningTable table(
        dir.path(), {},
        remote_at(redis.url(), bad.reader_secret, unique_description("remote for " + bad.name)),
        fleet);
    EXPECT_FALSE(table.find(key));
    const int warnings = log.warnings();
    EXPECT_GE(warnings, 1);
    EXPECT_NE(log.text().find(bad.expected), std::string::npos) << log.text();
    EXPECT_FALSE(table.find(key));
    EXPECT_EQ(log.warnings(), warnings) << "warned about again:\n" << log.text();
    // The caller's fallback: no record, so it tunes (a wrapper would take its heuristic).
    int tunings = 0;
    table.find_or_tune(key, [&] {
      ++tunings;
      return record_for(key);
    });
    EXPECT_EQ(tunings, 1);
  }
  // The control: the same record, rightly signed, is used.
  TempDir dir;
  remote_at(redis.url(), "fleet secret")
      .front()
      .backend->put(remote_name_of(key), std::as_bytes(std::span(good)), cache::PutMode::overwrite);
  EXPECT_EQ(TuningTable(dir.path(), {}, remote_at(redis.url(), "fleet secret"), fleet).find(key),
            record_for(key));
}

TEST(RemoteTuning, WithTheRemoteDownATunerKeepsItsRecordLocally) {
  RedisServer redis;
  const std::string url = redis.url();
  redis.kill();
  TempDir dir;
  LogCapture log;
  const TuningTable table(dir.path(), {},
                          remote_at(url, "", unique_description("the remote that is down")), fleet);
  int tunings = 0;
  auto tune = [&] {
    ++tunings;
    return record_for(rms_key(4096));
  };
  EXPECT_EQ(table.find_or_tune(rms_key(4096), tune), record_for(rms_key(4096)));
  const int warnings = log.warnings();
  EXPECT_GE(warnings, 1);
  EXPECT_EQ(table.find_or_tune(rms_key(4096), tune), record_for(rms_key(4096)));
  EXPECT_FALSE(table.find(rms_key(1024)));
  EXPECT_EQ(tunings, 1);
  EXPECT_EQ(log.warnings(), warnings) << log.text();
  EXPECT_EQ(TuningTable(dir.path()).find(rms_key(4096)), record_for(rms_key(4096)));
}

// ---- concurrent tuners of one problem ----------------------------------------------------------

// One machine (every process shares one user tier, with no remote) or a fleet (each process its
// own user tier, joined by the remote only).
enum class Sharing { one_machine, fleet };

class ConcurrentTuners : public ::testing::TestWithParam<Sharing> {
protected:
  // The table of process `process`, waiting for another tuner as `wait` says.
  TuningTable table_of(int process, const FleetWait &wait = fleet) const {
    if (GetParam() == Sharing::one_machine)
      return TuningTable(scratch.path() / "shared", {}, {}, wait);
    return TuningTable(scratch.path() / ("node-" + std::to_string(process)), {},
                       remote_at(redis.url()), wait);
  }
  // A record that names who tuned it.
  static TuningRecord tuned_by(int tuner) {
    TuningRecord record = record_for(rms_key(4096));
    record.created_unix = tuner;
    return record;
  }

  RedisServer redis;
  TempDir scratch;
  const std::filesystem::path started = scratch.path() / "started";
  const std::filesystem::path tunings = scratch.path() / "tunings";
  const std::filesystem::path results = scratch.path() / "results";
};

TEST_P(ConcurrentTuners, ManyProcessesAndThreadsTuneOneProblemOnce) {
  constexpr int kProcesses = 4, kThreads = 2, kTuners = kProcesses * kThreads;
  std::vector<pid_t> children;
  for (int process = 0; process < kProcesses; ++process)
    children.push_back(in_child([&, process] {
      std::vector<std::thread> threads;
      std::atomic<bool> failed = false;
      for (int thread = 0; thread < kThreads; ++thread)
        threads.emplace_back([&, thread] {
          try {
            const int tuner = process * kThreads + thread;
            append_line(started, std::to_string(tuner));
            const TuningRecord record = table_of(process).find_or_tune(rms_key(4096), [&] {
              append_line(tunings, std::to_string(tuner));
              // Every tuner is started, and the others are waiting for this one's record when
              // it ends: a second tuning would be counted.
              if (!await_lines(started, kTuners))
                throw std::runtime_error("not every tuner started");
              std::this_thread::sleep_for(200ms);
              return tuned_by(tuner);
            });
            append_line(results, std::to_string(record.created_unix));
          } catch (const std::exception &error) {
            std::fprintf(stderr, "%s\n", error.what());
            failed = true;
          }
        });
      for (std::thread &thread : threads)
        thread.join();
      if (failed)
        throw std::runtime_error("a tuner failed");
    }));
  for (pid_t child : children)
    EXPECT_EQ(exit_status(child), 0);
  ASSERT_EQ(lines_of(tunings).size(), 1u) << "tuned more than once";
  const std::vector<std::string> got = lines_of(results);
  EXPECT_EQ(got, std::vector<std::string>(kTuners, lines_of(tunings).front()))
      << "a tuner did not get the one record";
}

TEST_P(ConcurrentTuners, WhenTheTunerDiesAWaiterTakesOver) {
  const std::filesystem::path killing = scratch.path() / "killing";
  const pid_t doomed = in_child([&] {
    table_of(0).find_or_tune(rms_key(4096), [&]() -> TuningRecord {
      append_line(tunings, "doomed");
      std::this_thread::sleep_for(60s); // killed meanwhile
      return tuned_by(0);
    });
  });
  ASSERT_TRUE(await_lines(tunings, 1)) << "the first tuner never started";
  const pid_t waiter = in_child([&] {
    const TuningRecord record = table_of(1).find_or_tune(rms_key(4096), [&] {
      // Only once the first tuner is gone: had this one not waited, it would tune before the
      // marker is written.
      append_line(tunings, std::filesystem::exists(killing) ? "after the kill" : "did not wait");
      return tuned_by(1);
    });
    append_line(results, std::to_string(record.created_unix));
  });
  std::this_thread::sleep_for(300ms); // the waiter reaches the lock or the lease
  append_line(killing, "now");
  ::kill(doomed, SIGKILL);
  EXPECT_EQ(exit_status(doomed), -1);
  EXPECT_EQ(exit_status(waiter), 0);
  EXPECT_EQ(lines_of(tunings), (std::vector<std::string>{"doomed", "after the kill"}));
  EXPECT_EQ(lines_of(results), std::vector<std::string>{"1"});
}

// A waiter waits for a live tuner's record at most FleetWait::wait, then tunes itself: a tuner
// that hangs hangs no other.
TEST_P(ConcurrentTuners, AWaiterTunesItselfOnceTheStatedWaitRunsOut) {
  const std::filesystem::path release = scratch.path() / "release";
  const pid_t hung = in_child([&] {
    table_of(0).find_or_tune(rms_key(4096), [&] {
      append_line(tunings, "hung");
      if (!await_lines(release, 1))
        throw std::runtime_error("never released");
      return tuned_by(0);
    });
  });
  ASSERT_TRUE(await_lines(tunings, 1)) << "the first tuner never started";
  FleetWait short_wait = fleet;
  short_wait.wait = 200ms;
  const pid_t impatient = in_child([&] {
    const TuningRecord record = table_of(1, short_wait).find_or_tune(rms_key(4096), [&] {
      append_line(tunings, "impatient");
      return tuned_by(1);
    });
    append_line(results, std::to_string(record.created_unix));
  });
  // The impatient one ends while the first still tunes.
  EXPECT_EQ(exit_status(impatient, 20s), 0);
  EXPECT_EQ(lines_of(tunings), (std::vector<std::string>{"hung", "impatient"}));
  EXPECT_EQ(lines_of(results), std::vector<std::string>{"1"});
  append_line(release, "now");
  EXPECT_EQ(exit_status(hung), 0);
}

INSTANTIATE_TEST_SUITE_P(, ConcurrentTuners,
                         ::testing::Values(Sharing::one_machine, Sharing::fleet),
                         [](const auto &info) {
                           return info.param == Sharing::one_machine ? "OneMachine" : "Fleet";
                         });

} // namespace
} // namespace kjit
