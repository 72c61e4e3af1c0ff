// The memory-bound operators' bandwidth on a GPU, each against the device-to-device copy
// bandwidth measured in the same run (issue 4: "at least 90% of the copy bandwidth").
//
//   kjit_ops_gpu_bench [--quick]
//
// For each operator, shape and element type: bytes moved per call (every input element read
// once, every output element written once, weights included) over the time per call, and that
// figure as a percentage of the copy's. The copy is the driver's own (cuMemcpyDtoD_v2,
// hipMemcpyDtoD) of 512 MiB: read + write bytes over its time. Times are host steady_clock over a
// burst of calls after warm-up, closed by a device synchronise; the burst lasts ~25 ms, so the
// launch and synchronise costs (microseconds) are below 1%. The best of 5 bursts is reported
// (the least disturbed by the rest of the machine). bench/python/ops_torch.py measures torch on
// the same shapes in the same way for the side-by-side table in BENCHMARKS.md.
#include "kjit/kjit.hpp"
#include "kjit/ops/ops.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace kjit::bench {
namespace {

using namespace kjit::ops;

// cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t) and hipMemcpyDtoD(void *, void *, size_t):
// one calling convention for both (a device address is 64 bits either way).
using RawCopy = int (*)(void *, void *, std::size_t);

RawCopy raw_copy_for(const Device &device) {
  const bool hip = device.backend() == Backend::hip;
  void *library = dlopen(hip ? "libamdhip64.so" : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr)
    library = dlopen(hip ? "libamdhip64.so.5" : "libcuda.so", RTLD_NOW | RTLD_NOLOAD);
  return library == nullptr
             ? nullptr
             : reinterpret_cast<RawCopy>(dlsym(library, hip ? "hipMemcpyDtoD" : "cuMemcpyDtoD_v2"));
}

// Seconds per call of `run`: the best of 5 bursts of enough calls to last ~25 ms.
double seconds_per_call(const Device &device, const std::function<void()> &run) {
  for (int i = 0; i < 3; ++i) // compiles or loads the variant, warms the caches and clocks
    run();
  device.synchronize();
  const auto time = [&](int calls) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i)
      run();
    device.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const int calls = std::clamp(static_cast<int>(0.025 / std::max(time(3) / 3, 1e-7)), 3, 2000);
  double best = 1e30;
  for (int burst = 0; burst < 5; ++burst)
    best = std::min(best, time(calls) / calls);
  return best;
}

// Device buffers large enough for every case, filled once per element type with random values
// in [-2, 2] (so that exponentials and norms see realistic data, never NaN).
struct Buffers {
  Buffers(const Device &device, std::size_t bytes)
      : input(device.allocate(bytes)), second(device.allocate(bytes)),
        output(device.allocate(bytes)), weight(device.allocate(1 << 20)),
        bias(device.allocate(1 << 20)) {}

  template <Element T> void fill(std::mt19937 &rng) {
    std::vector<T> pattern(1 << 18); // 0.5-1 MiB repeated
    std::uniform_real_distribution<double> uniform(-2.0, 2.0);
    for (T &value : pattern)
      value = from_double<T>(uniform(rng));
    std::vector<unsigned char> host(input.size());
    for (std::size_t at = 0; at < host.size(); at += sizeof(T) * pattern.size())
      std::memcpy(host.data() + at, pattern.data(),
                  std::min(sizeof(T) * pattern.size(), host.size() - at));
    for (DeviceBuffer *buffer : {&input, &second, &output})
      buffer->write(host.data(), host.size());
    weight.write(host.data(), weight.size());
    bias.write(host.data() + weight.size(), bias.size());
  }

  DeviceBuffer input, second, output, weight, bias;
};

struct Case {
  std::string op;
  double bytes; // read + written per call
  std::function<void()> run;
};

template <Element T> std::vector<Case> cases(Runtime &rt, Buffers &b, int rows, int hidden) {
  T *x = b.input.as<T>(), *y = b.second.as<T>(), *out = b.output.as<T>();
  const T *w = b.weight.as<T>(), *bias = b.bias.as<T>();
  const double n = static_cast<double>(rows) * hidden, s = sizeof(T);
  const std::int64_t count = static_cast<std::int64_t>(rows) * hidden;
  // The gated forms read [rows, 2 * d] and write [rows, d] with d = hidden / 2: the same input
  // size as the others.
  const int d = hidden / 2;
  return {
      {"rms_norm", (2 * n + hidden) * s,
       [=, &rt] { rms_norm(rt, out, x, w, 1e-6f, rows, hidden); }},
      {"fused_add_rms_norm", (4 * n + hidden) * s,
       [=, &rt] { fused_add_rms_norm(rt, x, y, w, 1e-6f, rows, hidden); }},
      {"layer_norm", (2 * n + 2 * hidden) * s,
       [=, &rt] { layer_norm(rt, out, x, w, bias, 1e-5f, rows, hidden); }},
      {"softmax", 2 * n * s, [=, &rt] { softmax(rt, out, x, 0.125f, rows, hidden); }},
      {"softmax causal", 2 * n * s,
       [=, &rt] { softmax(rt, out, x, 0.125f, rows, hidden, std::min(rows, hidden)); }},
      {"silu", 2 * n * s, [=, &rt] { silu(rt, out, x, count); }},
      {"gelu", 2 * n * s, [=, &rt] { gelu(rt, out, x, count); }},
      {"gelu_tanh", 2 * n * s, [=, &rt] { gelu_tanh(rt, out, x, count); }},
      {"relu", 2 * n * s, [=, &rt] { relu(rt, out, x, count); }},
      {"sigmoid", 2 * n * s, [=, &rt] { sigmoid(rt, out, x, count); }},
      {"silu_and_mul", 1.5 * n * s, [=, &rt] { silu_and_mul(rt, out, x, rows, d); }},
      {"gelu_and_mul", 1.5 * n * s, [=, &rt] { gelu_and_mul(rt, out, x, rows, d); }},
  };
}

int run(bool quick) {
  const Device &device = devices().front();
  Runtime rt;
  const std::vector<std::pair<int, int>> shapes =
      quick ? std::vector<std::pair<int, int>>{{8192, 8192}}
            : std::vector<std::pair<int, int>>{{8192, 8192}, {16384, 8192}};
  const std::size_t largest = std::size_t{16384} * 8192 * sizeof(float);
  Buffers buffers(device, largest);
  std::mt19937 rng(4);

  const RawCopy copy = raw_copy_for(device);
  double copy_bandwidth = 0;
  if (copy != nullptr) {
    constexpr std::size_t copy_bytes = std::size_t{512} << 20;
    int failures = 0;
    const double seconds = seconds_per_call(device, [&] {
      failures += copy(buffers.output.data(), buffers.input.data(), copy_bytes) != 0;
    });
    if (failures == 0)
      copy_bandwidth = 2.0 * copy_bytes / seconds;
  }
  std::printf("# %s (%s), kjit operators; copy: %s\n", device.name().c_str(),
              device.target().id().c_str(),
              copy_bandwidth > 0
                  ? (std::to_string(copy_bandwidth / 1e9) + " GB/s (driver DtoD, 512 MiB)").c_str()
                  : "unavailable");
  std::printf("%-20s %-12s %-9s %10s %9s %8s\n", "op", "shape", "dtype", "us/call", "GB/s",
              "% copy");
  const auto report = [&](const char *dtype, const std::string &shape, const Case &c) {
    const double seconds = seconds_per_call(device, c.run);
    const double bandwidth = c.bytes / seconds;
    std::printf("%-20s %-12s %-9s %10.1f %9.1f %7.1f%%\n", c.op.c_str(), shape.c_str(), dtype,
                seconds * 1e6, bandwidth / 1e9,
                copy_bandwidth > 0 ? 100.0 * bandwidth / copy_bandwidth : 0.0);
    std::fflush(stdout);
  };
  const auto run_type = [&]<Element T>(const char *dtype) {
    buffers.fill<T>(rng);
    for (const auto &[rows, hidden] : shapes)
      for (const Case &c : cases<T>(rt, buffers, rows, hidden))
        report(dtype, std::to_string(rows) + "x" + std::to_string(hidden), c);
  };
  run_type.operator()<Half>("float16");
  run_type.operator()<BFloat16>("bfloat16");
  run_type.operator()<float>("float32");
  return 0;
}

} // namespace
} // namespace kjit::bench

int main(int argc, char **argv) {
  const std::string argument = argc > 1 ? argv[1] : "";
  if (argc > 2 || (argc == 2 && argument != "--quick")) {
    const bool help = argument == "--help" || argument == "-h";
    std::fprintf(help ? stdout : stderr,
                 "usage: kjit_ops_gpu_bench [--quick]\n"
                 "  the operators' bandwidth against the device-to-device copy; --quick: 8192x8192 "
                 "only\n");
    return help ? 0 : 2;
  }
  try {
    return kjit::bench::run(argument == "--quick");
  } catch (const kjit::Error &error) {
    std::fprintf(stderr, "kjit_ops_gpu_bench: %s\n", error.what());
    return error.code() == kjit::Errc::no_device ? 0 : 1;
  }
}
