// The storm of tests/stress against one process doing the same work: 16 processes of 8 threads
// each ask a fresh cache for one missing variant (sm_90 through NVRTC) at the same moment, and one
// process of one thread asks for it alone. Timed from the release to the last exit (each
// process loads NVRTC, one compiles, the others wait on the lock and read the entry). Counters:
// compiles summed over the processes (1 is right) and failures (processes that did not give every
// thread a valid cubin: 0 is right).
#include "tests/stress/child.hpp"
#include "tests/support/temp_dir.hpp"

#include <benchmark/benchmark.h>

namespace {

void BM_Storm(benchmark::State &state) {
  const int processes = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  std::uint64_t compiles = 0, failures = 0;
  for (auto _ : state) {
    kjit::testing::TempDir scratch;
    const kjit::testing::Storm storm =
        kjit::testing::run_storm(processes, threads,
                                 {"--cache", (scratch.path() / "cache").string(), "--target",
                                  "sm_90", "-p", "T=half", "-p", "N=4096"},
                                 scratch.path());
    state.SetIterationTime(storm.milliseconds / 1000);
    for (const kjit::testing::ChildOutcome &child : storm.children) {
      compiles += child.number("compiled");
      failures += !child.succeeded() || child.number("valid") != std::uint64_t(threads);
    }
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["compiles_per_storm"] = static_cast<double>(compiles) / iterations;
  state.counters["failures"] = static_cast<double>(failures);
}
BENCHMARK(BM_Storm)
    ->ArgNames({"processes", "threads"})
    ->Args({1, 1})
    ->Args({16, 8})
    ->Iterations(10)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
