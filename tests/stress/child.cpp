#include "child.hpp"

#include "kjit/cache/layout.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <spawn.h>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

namespace kjit::testing {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path &path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::map<std::string, std::string> fields_of(const std::string &out) {
  std::map<std::string, std::string> fields;
  std::istringstream words(out);
  for (std::string word; words >> word;)
    if (const auto equals = word.find('='); equals != std::string::npos)
      fields[word.substr(0, equals)] = word.substr(equals + 1);
  return fields;
}

} // namespace

bool ChildOutcome::succeeded() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
bool ChildOutcome::killed() const { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }

std::uint64_t ChildOutcome::number(const std::string &field) const {
  const auto found = fields.find(field);
  return found == fields.end() ? 0 : std::stoull(found->second);
}

int ChildOutcome::warnings() const {
  int count = 0;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);)
    count += line.find("kjit warning: ") != std::string::npos;
  return count;
}

Child::Child(const std::vector<std::string> &arguments,
             const std::vector<std::pair<std::string, std::string>> &environment,
             const std::vector<int> &handed, const fs::path &scratch, const std::string &program) {
  static std::atomic<int> serial{0};
  const std::string name = "child-" + std::to_string(serial++);
  out_ = scratch / (name + ".out");
  err_ = scratch / (name + ".err");

  std::vector<std::string> texts = {program};
  texts.insert(texts.end(), arguments.begin(), arguments.end());
  std::vector<std::string> variables;
  for (char **variable = environ; *variable != nullptr; ++variable) {
    const std::string text = *variable;
    bool replaced = false;
    for (const auto &[key, value] : environment)
      replaced = replaced || text.rfind(key + "=", 0) == 0;
    if (!replaced)
      variables.push_back(text);
  }
  for (const auto &[key, value] : environment)
    variables.push_back(key + "=" + value);
  auto pointers = [](std::vector<std::string> &strings) {
    std::vector<char *> result;
    for (std::string &text : strings)
      result.push_back(text.data());
    result.push_back(nullptr);
    return result;
  };
  std::vector<char *> argv = pointers(texts), envp = pointers(variables);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // The dup2s run in order in the child, so a handed descriptor whose number is the target of an
  // earlier one (a parent with many pipes open has descriptors 20, 21...) would be overwritten
  // before it is copied: each is handed from a copy numbered above every target.
  std::vector<int> sources;
  for (std::size_t i = 0; i < handed.size(); ++i) {
    sources.push_back(
        ::fcntl(handed[i], F_DUPFD_CLOEXEC, child_fd_base + static_cast<int>(handed.size())));
    if (sources.back() < 0)
      throw std::runtime_error("cannot copy a descriptor to hand over");
    posix_spawn_file_actions_adddup2(&actions, sources[i], child_fd_base + static_cast<int>(i));
  }
  const int error = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  for (int source : sources)
    ::close(source);
  if (error != 0)
    throw std::runtime_error("cannot start " + texts[0]);
}

Child::Child(Child &&other) noexcept
    : pid_(std::exchange(other.pid_, -1)), out_(std::move(other.out_)),
      err_(std::move(other.err_)) {}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

ChildOutcome Child::ended(int status) {
  ChildOutcome outcome;
  outcome.ended = std::chrono::steady_clock::now();
  outcome.status = status;
  pid_ = -1;
  outcome.out = read_text(out_);
  outcome.err = read_text(err_);
  outcome.fields = fields_of(outcome.out);
  return outcome;
}

ChildOutcome Child::wait() {
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  return ended(status);
}

std::optional<ChildOutcome> Child::wait_until(std::chrono::steady_clock::time_point deadline) {
  // Polled: waitpid has no timeout, and a few milliseconds are fine against process lifetimes.
  while (true) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_)
      return ended(status);
    if (std::chrono::steady_clock::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

ChildOutcome run_child(const std::vector<std::string> &arguments,
                       const std::vector<std::pair<std::string, std::string>> &environment,
                       const fs::path &scratch) {
  return Child(arguments, environment, {}, scratch).wait();
}

ChildOutcome run_kjit(const std::vector<std::string> &arguments, const fs::path &cache,
                      const fs::path &scratch) {
  return Child(arguments, {{"KJIT_CACHE_DIR", cache.string()}}, {}, scratch, KJIT_CLI).wait();
}

StartedStorm start_storm(const std::vector<StormNode> &nodes, int threads,
                         const fs::path &scratch) {
  // Every child writes a byte to `ready` once its threads wait; they all start when `go` reads
  // end of file, when this process closes its end.
  int ready[2], go[2];
  if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  StartedStorm storm;
  for (const StormNode &node : nodes) {
    std::vector<std::string> arguments = node.arguments;
    arguments.insert(arguments.end(),
                     {"--threads", std::to_string(threads), "--ready-fd",
                      std::to_string(child_fd_base), "--go-fd", std::to_string(child_fd_base + 1)});
    std::vector<int> handed = {ready[1], go[0]};
    handed.insert(handed.end(), node.handed.begin(), node.handed.end());
    storm.children.emplace_back(arguments, node.environment, handed, scratch);
  }
  ::close(ready[1]);
  ::close(go[0]);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    char byte;
    if (::read(ready[0], &byte, 1) != 1)
      break; // a child died before its threads were ready: its outcome says why
  }
  ::close(ready[0]);
  storm.released = std::chrono::steady_clock::now();
  ::close(go[1]);
  return storm;
}

Storm run_storm(int processes, int threads, const std::vector<std::string> &arguments,
                const fs::path &scratch) {
  StartedStorm started =
      start_storm(std::vector<StormNode>(static_cast<std::size_t>(processes), {arguments, {}, {}}),
                  threads, scratch);
  Storm storm;
  for (Child &child : started.children)
    storm.children.push_back(child.wait());
  storm.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started.released)
          .count();
  return storm;
}

std::vector<fs::path> temp_files_under(const fs::path &root) {
  std::vector<fs::path> found;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(root, error);
       it != fs::recursive_directory_iterator(); it.increment(error))
    if (cache::Layout::is_temp_name(it->path().filename().string()))
      found.push_back(it->path());
  return found;
}

bool lock_file_is_held(const fs::path &lock_file) {
  const int fd = ::open(lock_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false; // no lock file: nobody holds anything
  struct flock query {};
  query.l_type = F_WRLCK; // conflicts with any lock
  query.l_whence = SEEK_SET;
  query.l_start = 0;
  query.l_len = 0; // to the end of every possible offset
  const bool held = ::fcntl(fd, F_OFD_GETLK, &query) != 0 || query.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

} // namespace kjit::testing
