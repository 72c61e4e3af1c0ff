// A fresh process with a warm cache: from process start to its first kernel finished, minus
// the driver's own initialisation (cuInit / hipInit and the context), which any GPU program pays.
//
//   kjit_first_kernel            measure: run itself once to warm the cache, then 10 times, and
//                                print the median of each phase
//   kjit_first_kernel --child    one fresh process: prints "driver_ms kjit_ms" when its kernel
//                                has finished
//
// The parent times from spawn to that line (so the program's loading counts) and subtracts the
// driver's part the child measured.
#include "bench/child_process.hpp"
#include "kjit/kjit.hpp"

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using kjit::bench::median;
using kjit::bench::ms_between;

// The built-in scale template: x[i] *= a for i < N.
const kjit::Template &scale = kjit::templates::find("scale");

int child() {
  const auto start = Clock::now();
  const kjit::Device &device = kjit::devices().front();        // cuInit, device query
  kjit::DeviceBuffer x = device.allocate(256 * sizeof(float)); // the context
  const auto driver_ready = Clock::now();
  kjit::Runtime rt;
  const kjit::Kernel &kernel = rt.kernel(scale, {{"T", "float"}, {"N", 256}}, device);
  kernel.launch({.grid = 1, .block = 256}, x.as<float>(), 2.0f);
  device.synchronize();
  const auto done = Clock::now();
  std::printf("%.3f %.3f\n", ms_between(start, driver_ready), ms_between(driver_ready, done));
  std::fflush(stdout);
  return 0;
}

struct PhaseRun {
  double wall_ms, driver_ms, kjit_ms;
};

PhaseRun run_phases(const char *self) {
  const kjit::bench::ChildRun child = kjit::bench::run_child(self, "--child");
  PhaseRun run{child.wall_ms, 0, 0};
  if (std::sscanf(child.line.c_str(), "%lf %lf", &run.driver_ms, &run.kjit_ms) != 2)
    throw std::runtime_error("unexpected child output: " + child.line);
  return run;
}

} // namespace

int main(int argc, char **argv) try {
  if (argc > 1 && std::string(argv[1]) == "--child")
    return child();
  run_phases(argv[0]); // warms the cache: this one compiles
  std::vector<double> wall, driver, start_to_kernel_minus_driver, kjit_part;
  for (int i = 0; i < 10; ++i) {
    const PhaseRun run = run_phases(argv[0]);
    wall.push_back(run.wall_ms);
    driver.push_back(run.driver_ms);
    start_to_kernel_minus_driver.push_back(run.wall_ms - run.driver_ms);
    kjit_part.push_back(run.kjit_ms);
  }
  std::printf("fresh process, warm cache, median of 10:\n"
              "  process start to first kernel finished  %8.2f ms\n"
              "  of which driver init (cuInit + context)  %8.2f ms\n"
              "  start to kernel done, minus driver init  %8.2f ms\n"
              "  of which kjit (Runtime, disk hit, module load, launch, sync) %8.2f ms\n",
              median(wall), median(driver), median(start_to_kernel_minus_driver),
              median(kjit_part));
  return 0;
} catch (const std::exception &error) {
  std::fprintf(stderr, "kjit_first_kernel: %s\n", error.what());
  return 1;
}
