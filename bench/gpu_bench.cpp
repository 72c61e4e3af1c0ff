// Launch costs on a real GPU (issue: device backends, "Measured"), each against the raw driver
// launch of the same function in the same run:
//   - a raw cuLaunchKernel / hipModuleLaunchKernel;
//   - Kernel::launch through a held Kernel (argument check + one launch call);
//   - rt.kernel(tmpl, params).launch(...) on every call (in-memory lookup + the above).
// Every benchmark launches the same tiny kernel and synchronises once per 1024 launches, so
// the figure is the per-launch cost with the launch queue kept busy, as a training loop sees it.
#include "kjit/kjit.hpp"

#include <benchmark/benchmark.h>
#include <dlfcn.h>

namespace kjit::bench {
namespace {

const Template scale("scale", R"(template <typename T, int N>
__global__ void scale(T *x, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) x[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);
})",
                     {{"T", Param::type({"float", "half"})}, {"N", Param::integer(1, 1 << 20)}},
                     {.arguments = {"T*", "float"}});
const Params params = {{"T", "float"}, {"N", 256}};
constexpr int batch = 1024;

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

// Synchronises every `batch` launches; the last partial batch too.
template <typename Launch> void run_launches(benchmark::State &state, Fixture &f, Launch launch) {
  int pending = 0;
  for (auto _ : state) {
    launch();
    if (++pending == batch) {
      f.device->synchronize();
      pending = 0;
    }
  }
  f.device->synchronize();
  state.SetItemsProcessed(state.iterations());
}

void BM_LaunchRawDriver(benchmark::State &state) {
  Fixture f(state);
  if (!f.ready())
    return;
  const RawLaunch launch = raw_launch_for(*f.device);
  if (launch == nullptr) {
    state.SkipWithError("driver launch symbol not found");
    return;
  }
  float *x = f.buffer->as<float>();
  float a = 1.0f;
  void *args[] = {&x, &a};
  void *function = f.kernel->native_handle();
  // kjit left the device's context current on this thread (it restores only a different one).
  int failures = 0;
  run_launches(state, f, [&] {
    failures += launch(function, 1, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr) != 0;
  });
  if (failures != 0)
    state.SkipWithError("the raw driver launch failed");
}

void BM_LaunchHeldKernel(benchmark::State &state) {
  Fixture f(state);
  if (!f.ready())
    return;
  float *x = f.buffer->as<float>();
  run_launches(state, f, [&] { f.kernel->launch(1, 256, 0, nullptr, x, 1.0f); });
}

void BM_LaunchThroughRuntimeLookup(benchmark::State &state) {
  Fixture f(state);
  if (!f.ready())
    return;
  float *x = f.buffer->as<float>();
  Runtime &rt = *f.runtime;
  run_launches(state, f, [&] { rt.kernel(scale, params).launch(1, 256, 0, nullptr, x, 1.0f); });
}

BENCHMARK(BM_LaunchRawDriver)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_LaunchHeldKernel)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_LaunchThroughRuntimeLookup)->Repetitions(5)->ReportAggregatesOnly(true);

} // namespace
} // namespace kjit::bench

BENCHMARK_MAIN();
