// A fresh process with a warm cache, on the CPU: from process start to a code object in hand,
// against the same binary started and doing nothing, measured in the same run.
//
//   kjit_fresh_process [TARGET]   warm a private cache (one compile), then 20 fresh processes
//                                 that find the variant on disk and 20 that do nothing; prints
//                                 the medians. TARGET: gfx90a (default) or sm_90...
//
// The difference is what a program pays for its first cached variant: loading kjit's code,
// the Runtime, the key, the compiler identity (from the memo, without loading the compiler) and
// the verified read of the entry.
#include "bench/child_process.hpp"
#include "kjit/kjit.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using kjit::bench::median;
using kjit::bench::run_child;

// The built-in scale template: x[i] *= a for i < N.
const kjit::Template &scale = kjit::templates::find("scale");

// Prints the origin and the milliseconds from main to the code object.
int child(const std::string &target) {
  const auto start = std::chrono::steady_clock::now();
  kjit::Runtime rt;
  const kjit::CodeObject &code =
      rt.compile(scale, {{"T", "half"}, {"N", 4096}}, kjit::jit::Target::parse(target));
  const auto done = std::chrono::steady_clock::now();
  kjit::bench::report_child(kjit::to_string(code.origin()), start, done);
  return 0;
}

} // namespace

int main(int argc, char **argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--empty-child") {
    std::printf("ready\n");
    return 0;
  }
  if (mode.rfind("--child=", 0) == 0)
    return child(mode.substr(8));

  const std::string target = mode.empty() ? "gfx90a" : mode;
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("kjit-fresh-process-" + std::to_string(getpid()));
  setenv("KJIT_CACHE_DIR", cache.c_str(), 1);
  setenv("KJIT_PREBUILT_DIR", (cache / "none").c_str(), 1);
  const std::string child_flag = "--child=" + target;
  const std::string first = run_child(argv[0], child_flag.c_str()).line; // compiles
  std::vector<double> hit_wall, hit_inside, empty_wall;
  for (int i = 0; i < 20; ++i) {
    const auto hit = run_child(argv[0], child_flag.c_str());
    if (hit.line.rfind("user cache ", 0) != 0)
      throw std::runtime_error("not a disk hit: " + hit.line);
    hit_wall.push_back(hit.wall_ms);
    hit_inside.push_back(std::stod(hit.line.substr(11)));
    empty_wall.push_back(run_child(argv[0], "--empty-child").wall_ms);
  }
  std::filesystem::remove_all(cache);
  std::printf("fresh process, warm cache, %s, median of 20 (first process: %s):\n"
              "  spawn to code object in hand            %8.3f ms\n"
              "  spawn to exit of the same binary idle    %8.3f ms  (baseline)\n"
              "  difference                               %8.3f ms\n"
              "  inside main: Runtime + disk hit          %8.3f ms\n",
              target.c_str(), first.c_str(), median(hit_wall), median(empty_wall),
              median(hit_wall) - median(empty_wall), median(hit_inside));
  return 0;
} catch (const std::exception &error) {
  std::fprintf(stderr, "kjit_fresh_process: %s\n", error.what());
  return 1;
}
