// Launch costs on a real GPU (issue: device backends, "Measured"), each against the raw driver
// launch of the same function in the same run:
//   - a raw cuLaunchKernel / hipModuleLaunchKernel;
//   - Kernel::launch through a held Kernel (argument check + one launch call);
//   - rt.kernel(tmpl, params).launch(...) on every call (in-memory lookup + the above);
//   - an operator wrapper, kjit::ops::rms_norm, against the raw launch of its kernel.
// Each launches a tiny kernel in bursts onto an idle device: the host's cost of a launch.
#include "bench/median.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/ops.hpp"

#include <benchmark/benchmark.h>
#include <chrono>
#include <dlfcn.h>
#include <functional>
#include <string>
#include <vector>

namespace kjit::bench {
namespace {

// The built-in scale template: x[i] *= a for i < N.
const Template &scale = templates::find("scale");
const ParamValues params = {{"T", "float"}, {"N", 256}};

// cuLaunchKernel and hipModuleLaunchKernel share one signature.
using RawLaunch = int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          unsigned, void *, void **, void **);

RawLaunch raw_launch_for(const Device &device) {
  const bool hip = device.backend() == Backend::hip;
  void *library = dlopen(hip ? "libamdhip64.so" : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr)
    library = dlopen(hip ? "libamdhip64.so.5" : "libcuda.so", RTLD_NOW | RTLD_NOLOAD);
  return library == nullptr ? nullptr
                            : reinterpret_cast<RawLaunch>(
                                  dlsym(library, hip ? "hipModuleLaunchKernel" : "cuLaunchKernel"));
}

// What every launch benchmark needs: a device, a buffer, a Runtime holding the kernel, and the
// driver's own launch function to compare with.
struct Fixture {
  explicit Fixture(benchmark::State &state) {
    try {
      device = &devices().front();
      buffer.emplace(device->allocate(256 * sizeof(float)));
      runtime.emplace();
      kernel = &runtime->kernel(scale, params, *device);
      raw_launch = raw_launch_for(*device);
      if (raw_launch == nullptr)
        state.SkipWithError("driver launch symbol not found");
    } catch (const Error &error) {
      state.SkipWithError(error.summary().c_str());
    }
  }
  bool ready() const { return kernel != nullptr && raw_launch != nullptr; }
  const Device *device = nullptr;
  std::optional<DeviceBuffer> buffer;
  std::optional<Runtime> runtime;
  const Kernel *kernel = nullptr;
  RawLaunch raw_launch = nullptr;
};

// Times bursts of `burst` launches per way onto an idle device (shorter than the driver's queue,
// so the GPU's speed is not what is timed), the ways interleaved within each iteration so that
// drift on the machine affects all alike. Way 0 is the raw driver launch: the counters are each
// way's median per-launch time ("<name>_us") and the median of its paired difference from the raw
// launch in the same iteration ("<name>_minus_raw_us").
struct LaunchWay {
  std::string name;
  std::function<void()> launch;
};
void time_launch_ways(benchmark::State &state, const Device &device,
                      const std::vector<LaunchWay> &ways) {
  constexpr int burst = 128;
  auto time_burst = [&](const std::function<void()> &launch) {
    device.synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < burst; ++i)
      launch();
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count() / burst;
  };
  std::vector<std::vector<double>> times(ways.size()), extra(ways.size());
  for (auto _ : state) {
    double total = 0;
    for (std::size_t w = 0; w < ways.size(); ++w) {
      times[w].push_back(time_burst(ways[w].launch));
      extra[w].push_back(times[w].back() - times[0].back());
      total += times[w].back();
    }
    state.SetIterationTime(total * burst / 1e6);
  }
  device.synchronize();
  for (std::size_t w = 0; w < ways.size(); ++w) {
    state.counters[ways[w].name + "_us"] = median(times[w]);
    if (w > 0)
      state.counters[ways[w].name + "_minus_raw_us"] = median(extra[w]);
  }
}

// The host's cost of one launch three ways: raw, through a held Kernel, and through
// rt.kernel(tmpl, params) on every call.
void BM_LaunchCost(benchmark::State &state) {
  Fixture f(state);
  if (!f.ready())
    return;
  float *x = f.buffer->as<float>();
  float a = 1.0f;
  void *args[] = {&x, &a};
  void *function = f.kernel->native_handle();
  Runtime &rt = *f.runtime;
  int raw_failures = 0;
  // kjit left the device's context current on this thread (it restores only a different one).
  time_launch_ways(
      state, *f.device,
      {{"raw",
        [&] {
          raw_failures +=
              f.raw_launch(function, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr) != 0;
        }},
       {"held", [&] { f.kernel->launch({.grid = 1, .block = 256}, x, 1.0f); }},
       {"lookup", [&] { rt.kernel(scale, params).launch({.grid = 1, .block = 256}, x, 1.0f); }}});
  if (raw_failures != 0)
    state.SkipWithError("the raw driver launch failed");
}

// An operator wrapper's host cost: kjit::ops::rms_norm on one row of 128 halves (its checks, the
// variant's choice, the runtime's lookup and the launch) against the raw launch of the same
// kernel with the same shape.
void BM_OpsLaunchCost(benchmark::State &state) {
  Fixture f(state);
  if (!f.ready())
    return;
  using ops::Half;
  DeviceBuffer out = f.device->allocate(128 * sizeof(Half));
  Half *y = out.as<Half>();
  Half *x = f.buffer->as<Half>(); // 1 KiB: 128 halves of input and 128 of weight
  const Half *weight = x + 128;
  Runtime &rt = *f.runtime;
  ops::rms_norm(rt, y, x, weight, 1e-6f, 1, 128); // compiles the variant
  // The variant the wrapper picked for 128 halves at 16-byte aligned pointers: 32 threads of 8
  // halves a row, 8 rows a block (ops/src/launch.hpp's row_shape).
  const Kernel &kernel = rt.kernel(templates::find("rms_norm"),
                                   {{"T", "half"}, {"HIDDEN", 128}, {"VEC", 8}, {"THREADS", 32}});
  float eps = 1e-6f;
  int rows = 1;
  void *args[] = {&y, &x, const_cast<Half **>(&weight), &eps, &rows};
  void *function = kernel.native_handle();
  int raw_failures = 0;
  time_launch_ways(state, *f.device,
                   {{"raw",
                     [&] {
                       raw_failures += f.raw_launch(function, 1, 1, 1, 32, 8, 1, 0, nullptr, args,
                                                    nullptr) != 0;
                     }},
                    {"rms_norm", [&] { ops::rms_norm(rt, y, x, weight, 1e-6f, 1, 128); }}});
  if (raw_failures != 0)
    state.SkipWithError("the raw driver launch failed");
}

BENCHMARK(BM_LaunchCost)->Iterations(2000)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OpsLaunchCost)->Iterations(2000)->UseManualTime()->Unit(benchmark::kMicrosecond);

} // namespace
} // namespace kjit::bench

BENCHMARK_MAIN();
