#include "child_process.hpp"

#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace kjit::bench {

ChildRun run_child(const char *self, const char *flag) {
  int out[2];
  if (pipe(out) != 0)
    throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string flag_text = flag;
  char *argv[] = {const_cast<char *>(self), flag_text.data(), nullptr};
  const auto spawned = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, self, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawn_error != 0) {
    close(out[0]);
    throw std::runtime_error("spawn failed");
  }
  char buffer[256] = {};
  const ssize_t n = read(out[0], buffer, sizeof buffer - 1); // arrives when the work is done
  const auto reported = std::chrono::steady_clock::now();
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n <= 0)
    throw std::runtime_error("the child reported nothing (exit status " + std::to_string(status) +
                             ")");
  std::string line(buffer, static_cast<std::size_t>(n));
  while (!line.empty() && line.back() == '\n')
    line.pop_back();
  return {ms_between(spawned, reported), line};
}

} // namespace kjit::bench
