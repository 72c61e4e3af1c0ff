#pragma once
// Runs this program again as a child and times it from spawn to the line the child prints when
// its work is done, so that the program's loading and start-up count. Used by the benchmarks that
// measure a fresh process.
#include "bench/median.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::bench {

struct ChildRun {
  double wall_ms;   // spawn to the child's line
  std::string line; // what the child printed, without the newline
};

// Spawns `self` with the one argument `flag` and the current environment. Throws
// std::runtime_error when the child cannot be started or prints nothing.
ChildRun run_child(const char *self, const char *flag);

inline double ms_between(std::chrono::steady_clock::time_point a,
                         std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// What a child prints when its work is done: "<origin> <milliseconds from start to done>".
inline void report_child(std::string_view origin, std::chrono::steady_clock::time_point start,
                         std::chrono::steady_clock::time_point done) {
  std::printf("%.*s %.3f\n", static_cast<int>(origin.size()), origin.data(),
              ms_between(start, done));
  std::fflush(stdout);
}

} // namespace kjit::bench
