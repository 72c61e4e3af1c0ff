// Is hiprtc / NVRTC safe, and faster, when several threads of one process compile at once? Each
// round, in a child process of its own (a crash ends the round, not the experiment), compiles
// `threads` distinct programs one after another and then all at once from `threads` threads, and
// compares the code objects byte for byte. The answer decides how `kjit prebuild` runs its jobs
// (tools/kjit/prebuild_command.cpp): worker processes.
//
//   kjit_rtc_threads [hiprtc|nvrtc] [THREADS (8)] [ROUNDS (5)]   default: every compiler found
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

struct Api {
  const char *name;
  const char *option;
  int (*create)(void **, const char *, const char *, int, const char **, const char **);
  int (*compile)(void *, int, const char **);
  int (*code_size)(void *, std::size_t *);
  int (*code)(void *, char *);
  int (*destroy)(void **);
};

bool load(const std::string &name, Api &api) {
  const bool amd = name == "hiprtc";
  void *library = dlopen(amd ? "libamdhip64.so.5" : "libnvrtc.so.13", RTLD_NOW);
  if (library == nullptr)
    return false;
  auto symbol = [&](const char *suffix) { return dlsym(library, (name + suffix).c_str()); };
  api = {name == "hiprtc" ? "hiprtc" : "nvrtc",
         amd ? "--offload-arch=gfx90a" : "-arch=sm_90",
         reinterpret_cast<decltype(api.create)>(symbol("CreateProgram")),
         reinterpret_cast<decltype(api.compile)>(symbol("CompileProgram")),
         reinterpret_cast<decltype(api.code_size)>(symbol(amd ? "GetCodeSize" : "GetCUBINSize")),
         reinterpret_cast<decltype(api.code)>(symbol(amd ? "GetCode" : "GetCUBIN")),
         reinterpret_cast<decltype(api.destroy)>(symbol("DestroyProgram"))};
  return true;
}

std::string build(const Api &api, int i) {
  const std::string source = "template <int N> __global__ void k(float *x) { for (int j = 0; j < "
                             "N; ++j) x[j] = x[j] * " +
                             std::to_string(i) + ".0f + 1.0f; }\ntemplate __global__ void k<" +
                             std::to_string(100 + i) + ">(float *);\n";
  void *program = nullptr;
  if (api.create(&program, source.c_str(), "k.cu", 0, nullptr, nullptr) != 0)
    return "create failed";
  const char *options[] = {api.option};
  std::string code = "compile failed";
  if (api.compile(program, 1, options) == 0) {
    std::size_t size = 0;
    api.code_size(program, &size);
    code.assign(size, '\0');
    api.code(program, code.data());
  }
  api.destroy(&program);
  return code;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// One round; exit status 0 when every threaded result matched its sequential one.
int round(const Api &api, int threads) {
  build(api, -1); // the library's one-time set-up, out of the timings
  std::vector<std::string> alone(threads), together(threads);
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < threads; ++i)
    alone[i] = build(api, i);
  const double sequential_ms = ms_since(started);
  started = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] { together[i] = build(api, i); });
  for (auto &thread : pool)
    thread.join();
  const double threaded_ms = ms_since(started);
  int differ = 0;
  for (int i = 0; i < threads; ++i)
    differ += alone[i] != together[i];
  std::printf("  %s: %d programs in a row %.0f ms, from %d threads %.0f ms; %d differ\n", api.name,
              threads, sequential_ms, threads, threaded_ms, differ);
  std::fflush(stdout);
  return differ == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> names = {"hiprtc", "nvrtc"};
  if (argc > 1)
    names = {argv[1]};
  const int threads = argc > 2 ? std::atoi(argv[2]) : 8;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  for (const std::string &name : names) {
    Api api;
    if (!load(name, api)) {
      std::printf("%s: not found\n", name.c_str());
      continue;
    }
    int crashed = 0, wrong = 0;
    for (int r = 0; r < rounds; ++r) {
      std::fflush(stdout);
      const pid_t child = fork();
      if (child == 0)
        _exit(round(api, threads));
      int status = 0;
      waitpid(child, &status, 0);
      crashed += WIFSIGNALED(status);
      wrong += WIFEXITED(status) && WEXITSTATUS(status) != 0;
      if (WIFSIGNALED(status))
        std::printf("  %s: round %d crashed: %s\n", api.name, r, strsignal(WTERMSIG(status)));
    }
    std::printf("%s, %d threads: %d of %d rounds crashed, %d returned other code\n", api.name,
                threads, crashed, rounds, wrong);
  }
  return 0;
}
