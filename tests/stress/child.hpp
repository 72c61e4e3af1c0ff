#pragma once
// Starting kjit_stress_child processes from a test: arguments, extra environment, descriptors
// handed over at fixed numbers, and what each child printed and how it ended.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace kjit::testing {

// The descriptor numbers a child finds what its parent handed it under (--ready-fd, --go-fd,
// the fake compiler's started-fd): high, so that nothing the child opens collides with them.
inline constexpr int child_fd_base = 20;

struct ChildOutcome {
  int status = 0; // waitpid's
  std::string out;
  std::string err;
  std::map<std::string, std::string> fields;   // "compiled=1 ..." from its output line
  std::chrono::steady_clock::time_point ended; // when the parent saw it end

  bool succeeded() const;
  bool killed() const;
  std::uint64_t number(const std::string &field) const; // 0 when absent
  int warnings() const;                                 // lines of stderr that are kjit warnings
};

class Child {
public:
  // Starts `program` (default: kjit_stress_child) with `arguments`, the test's environment plus
  // `environment`, and `handed[i]` dup'ed to child_fd_base + i. Its stdout and stderr go to files
  // in `scratch`.
  Child(const std::vector<std::string> &arguments,
        const std::vector<std::pair<std::string, std::string>> &environment,
        const std::vector<int> &handed, const std::filesystem::path &scratch,
        const std::string &program = KJIT_STRESS_CHILD);
  Child(const Child &) = delete;
  Child &operator=(const Child &) = delete;
  Child(Child &&other) noexcept;
  ~Child(); // kills and reaps a child not yet waited for

  pid_t pid() const { return pid_; }
  ChildOutcome wait();
  // Its outcome if it ends by `deadline`; nullopt (still running, killed by the destructor) if not.
  std::optional<ChildOutcome> wait_until(std::chrono::steady_clock::time_point deadline);

private:
  ChildOutcome ended(int status);
  pid_t pid_ = -1;
  std::filesystem::path out_, err_;
};

// Runs one kjit_stress_child to its end.
ChildOutcome run_child(const std::vector<std::string> &arguments,
                       const std::vector<std::pair<std::string, std::string>> &environment,
                       const std::filesystem::path &scratch);

// Runs `kjit <arguments>` with KJIT_CACHE_DIR set to `cache`, to its end.
ChildOutcome run_kjit(const std::vector<std::string> &arguments, const std::filesystem::path &cache,
                      const std::filesystem::path &scratch);

// One process of a storm: its kjit_stress_child arguments (which variant, where its cache is),
// its extra environment, and descriptors handed to it at child_fd_base + 2 + i (after the storm's
// own two).
struct StormNode {
  std::vector<std::string> arguments;
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<int> handed;
};

// A storm's processes, started with `threads` threads each, every thread waiting until they are
// all released at the same moment; they are running when this returns.
struct StartedStorm {
  std::vector<Child> children;
  std::chrono::steady_clock::time_point released;
};
StartedStorm start_storm(const std::vector<StormNode> &nodes, int threads,
                         const std::filesystem::path &scratch);

// A storm: `processes` kjit_stress_child processes of `threads` threads each, released at the
// same moment to ask for one variant (`arguments` say which, and where the cache is), waited for.
struct Storm {
  std::vector<ChildOutcome> children;
  double milliseconds = 0; // from the release to the last child's exit
};
Storm run_storm(int processes, int threads, const std::vector<std::string> &arguments,
                const std::filesystem::path &scratch);

// Every temp file (".<stem>.tmp.<...>") under `root`.
std::vector<std::filesystem::path> temp_files_under(const std::filesystem::path &root);

// Whether any process holds a lock on any byte of the lock file (F_OFD_GETLK).
bool lock_file_is_held(const std::filesystem::path &lock_file);

} // namespace kjit::testing
