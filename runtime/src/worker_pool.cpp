#include "kjit/runtime/worker_pool.hpp"

#include "kjit/error.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <optional>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace kjit {
namespace {

struct Worker {
  pid_t pid = -1;
  int to = -1;   // its stdin
  int from = -1; // its stdout
  std::optional<std::size_t> job;
  std::string buffer; // what it printed after its last whole line
};

[[noreturn]] void cannot_start(const std::string &executable, int error) {
  throw Error(Errc::process_error,
              "cannot start a worker process " + executable + ": " + std::strerror(error));
}

Worker spawn(const WorkerCommand &command) {
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0)
    cannot_start(command.executable, errno);
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    cannot_start(command.executable, error);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  std::vector<char *> raw;
  for (const std::string &arg : command.argv)
    raw.push_back(const_cast<char *>(arg.c_str()));
  raw.push_back(nullptr);
  Worker worker;
  const int failed = ::posix_spawn(&worker.pid, command.executable.c_str(), &actions, nullptr,
                                   raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (failed != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    cannot_start(command.executable, failed);
  }
  worker.to = in_pipe[1];
  worker.from = out_pipe[0];
  return worker;
}

std::string exit_text(int status) {
  if (WIFSIGNALED(status))
    return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

void close_fd(int &fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

// The workers of one run. A deque: starting a replacement must not move the workers that a poll
// round points to. When the run ends early (an error, or an event that throws), the workers still
// running are killed and reaped: none is left behind in a long-lived caller (the C ABI's).
class Pool {
public:
  Pool(const WorkerCommand &command, const std::vector<std::size_t> &jobs,
       const WorkerEvents &events)
      : command_(command), jobs_(jobs), events_(events) {}
  Pool(const Pool &) = delete;
  Pool &operator=(const Pool &) = delete;

  ~Pool() {
    for (Worker &worker : workers_) {
      close_fd(worker.to);
      close_fd(worker.from);
      if (worker.pid > 0) {
        ::kill(worker.pid, SIGKILL);
        ::waitpid(worker.pid, nullptr, 0);
      }
    }
  }

  void start(int count) {
    for (int j = 0; j < count; ++j) {
      workers_.push_back(spawn(command_));
      feed(workers_.back());
    }
  }

  // Until every worker has ended.
  void run() {
    for (;;) {
      std::vector<pollfd> polled;
      std::vector<Worker *> owners;
      for (Worker &worker : workers_)
        if (worker.from >= 0) {
          polled.push_back({worker.from, POLLIN, 0});
          owners.push_back(&worker);
        }
      if (polled.empty())
        return;
      if (::poll(polled.data(), polled.size(), -1) < 0 && errno != EINTR)
        throw Error(Errc::process_error, std::string("poll: ") + std::strerror(errno));
      for (std::size_t p = 0; p < polled.size(); ++p)
        if (polled[p].revents != 0)
          read_from(*owners[p]);
    }
  }

private:
  // Gives `worker` the next job, or closes its stdin (it then exits) when none is left.
  void feed(Worker &worker) {
    worker.job.reset();
    if (next_ == jobs_.size()) {
      close_fd(worker.to);
      return;
    }
    worker.job = jobs_[next_++];
    const std::string line = std::to_string(*worker.job) + '\n';
    [[maybe_unused]] const ssize_t written = ::write(worker.to, line.data(), line.size());
  }

  void read_from(Worker &worker) {
    char chunk[4096];
    const ssize_t n = ::read(worker.from, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      return;
    if (n > 0) {
      worker.buffer.append(chunk, static_cast<std::size_t>(n));
      for (std::size_t end; (end = worker.buffer.find('\n')) != std::string::npos;) {
        const std::string line = worker.buffer.substr(0, end);
        worker.buffer.erase(0, end + 1);
        if (worker.job && events_.answered(*worker.job, line))
          feed(worker);
      }
      return;
    }
    // End of file (or a read error): the worker is done, or died.
    close_fd(worker.from);
    close_fd(worker.to);
    int status = 0;
    ::waitpid(worker.pid, &status, 0);
    worker.pid = -1;
    if (!worker.job)
      return;
    const std::size_t lost = *worker.job;
    worker.job.reset();
    events_.lost(lost, exit_text(status));
    if (next_ < jobs_.size()) {
      workers_.push_back(spawn(command_));
      feed(workers_.back());
    }
  }

  const WorkerCommand &command_;
  const std::vector<std::size_t> &jobs_;
  const WorkerEvents &events_;
  std::deque<Worker> workers_;
  std::size_t next_ = 0; // the next job to hand out
};

} // namespace

void run_worker_pool(const WorkerCommand &command, const std::vector<std::size_t> &jobs,
                     int workers, const WorkerEvents &events) {
  if (jobs.empty())
    return;
  ::signal(SIGPIPE, SIG_IGN);
  Pool pool(command, jobs, events);
  pool.start(std::max(1, std::min<int>(workers, static_cast<int>(jobs.size()))));
  pool.run();
}

} // namespace kjit
