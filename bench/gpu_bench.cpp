// Launch costs on a real GPU (issue: device backends, "Measured"), each against the raw driver
// launch of the same function in the same run:
//   - a raw cuLaunchKernel / hipModuleLaunchKernel;
//   - Kernel::launch through a held Kernel (argument check + one launch call);
//   - rt.kernel(tmpl, params).launch(...) on every call (in-memory lookup + the above).
// All three launch the same tiny kernel in bursts onto an idle device: the host's cost of a launch.
#include "kjit/kjit.hpp"

#include <algorithm>
#include <benchmark/benchmark.h>
#include <chrono>
#include <dlfcn.h>

namespace kjit::bench {
namespace {

// The built-in scale template: x[i] *= a for i < N.
const Template &scale = templates::find("scale");
const Params params = {{"T", "float"}, {"N", 256}};

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

// What every launch benchmark needs: a device, a buffer and a Runtime holding the kernel.
struct Fixture {
  explicit Fixture(benchmark::State &state) {
    try {
      device = &devices().front();
      buffer.emplace(device->allocate(256 * sizeof(float)));
      runtime.emplace();
      kernel = &runtime->kernel(scale, params, *device);
    } catch (const Error &error) {
      state.SkipWithError(error.summary().c_str());
    }
  }
  bool ready() const { return kernel != nullptr; }
  const Device *device = nullptr;
  std::optional<DeviceBuffer> buffer;
  std::optional<Runtime> runtime;
  const Kernel *kernel = nullptr;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The host's cost of one launch three ways, interleaved so that drift on the machine affects all
// alike: each iteration issues a burst of `burst` launches per way onto an idle device (shorter
// than the driver's queue, so the GPU's speed is not what is timed) and times the burst alone.
// Counters: the median per-launch time of each way, and the medians of the paired differences
// from the raw launch in the same iteration.
void BM_LaunchCost(benchmark::State &state) {
  Fixture f(state);
  if (!f.ready())
    return;
  const RawLaunch raw_launch = raw_launch_for(*f.device);
  if (raw_launch == nullptr) {
    state.SkipWithError("driver launch symbol not found");
    return;
  }
  constexpr int burst = 128;
  float *x = f.buffer->as<float>();
  float a = 1.0f;
  void *args[] = {&x, &a};
  void *function = f.kernel->native_handle();
  Runtime &rt = *f.runtime;
  int raw_failures = 0;
  auto time_burst = [&](auto launch) {
    f.device->synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < burst; ++i)
      launch();
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(stop - start).count() / burst;
  };
  std::vector<double> raw, held, lookup, held_extra, lookup_extra;
  for (auto _ : state) {
    // kjit left the device's context current on this thread (it restores only a different one).
    raw.push_back(time_burst([&] {
      raw_failures += raw_launch(function, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr) != 0;
    }));
    held.push_back(time_burst([&] { f.kernel->launch(1, 256, 0, nullptr, x, 1.0f); }));
    lookup.push_back(
        time_burst([&] { rt.kernel(scale, params).launch(1, 256, 0, nullptr, x, 1.0f); }));
    held_extra.push_back(held.back() - raw.back());
    lookup_extra.push_back(lookup.back() - raw.back());
    state.SetIterationTime((raw.back() + held.back() + lookup.back()) * burst / 1e6);
  }
  f.device->synchronize();
  if (raw_failures != 0) {
    state.SkipWithError("the raw driver launch failed");
    return;
  }
  state.counters["raw_us"] = median(raw);
  state.counters["held_us"] = median(held);
  state.counters["lookup_us"] = median(lookup);
  state.counters["held_minus_raw_us"] = median(held_extra);
  state.counters["lookup_minus_raw_us"] = median(lookup_extra);
}

BENCHMARK(BM_LaunchCost)->Iterations(2000)->UseManualTime()->Unit(benchmark::kMicrosecond);

} // namespace
} // namespace kjit::bench

BENCHMARK_MAIN();
