#pragma once
// What the GPU benchmarks share: host-timed batches of launches, and the bandwidth baseline.
#include "bench/median.hpp"
#include "kjit/kjit.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace kjit::bench {

// The median of 5 batches of `launches` calls of `run`, each timed on the host from the first
// launch to the device's synchronisation, per launch; after one call to compile and warm up.
inline double median_ms_per_launch(const Device &device, int launches,
                                   const std::function<void()> &run) {
  run();
  device.synchronize();
  std::vector<double> batches;
  for (int batch = 0; batch < 5; ++batch) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i)
      run();
    device.synchronize();
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    batches.push_back(elapsed.count() / launches);
  }
  return median(std::move(batches));
}

// The time per launch of each of `runs`, all at one clock. An H100 or H200 at its power cap runs
// each kernel at the clock its power allows, so runs timed one after another for a while each see
// a clock of their own, and their ratios move with the order (BENCHMARKS.md, "fused_moe prefill
// under the power cap"). Here the runs take turns in bursts of about `burst_ms`, `cycles` times,
// after `warm_ms` of the same turns (a card from idle boosts for about a second); each run's
// figure is its median burst, per launch. Each run is called twice first: to compile, and to size
// its burst on the host's clock. The timed bursts are all queued back to back, each between two
// device events, with one wait at the end: the device never idles between them, so no burst's
// time holds the host's work before its first launch (more for a run that checks more).
inline std::vector<double> interleaved_ms_per_launch(const Device &device,
                                                     const std::vector<std::function<void()>> &runs,
                                                     double warm_ms = 0, int cycles = 15,
                                                     double burst_ms = 10) {
  using clock = std::chrono::steady_clock;
  const auto ms_since = [](clock::time_point start) {
    return std::chrono::duration<double, std::milli>(clock::now() - start).count();
  };
  std::vector<int> launches;
  for (const auto &run : runs) {
    run();
    device.synchronize();
    const auto start = clock::now();
    run();
    device.synchronize();
    launches.push_back(
        std::max(1, static_cast<int>(burst_ms / std::max(ms_since(start), 1e-3) + 0.5)));
  }
  const auto burst = [&](std::size_t index) {
    for (int i = 0; i < launches[index]; ++i)
      runs[index]();
  };
  for (const auto start = clock::now(); ms_since(start) < warm_ms; device.synchronize())
    for (std::size_t index = 0; index < runs.size(); ++index)
      burst(index);
  std::vector<std::unique_ptr<EventTimer>> timers;
  for (std::size_t i = 0; i < runs.size() * cycles; ++i)
    timers.push_back(std::make_unique<EventTimer>(device));
  burst(runs.size() - 1); // untimed: the device is busy while the first timed burst is queued
  for (std::size_t i = 0; i < timers.size(); ++i) {
    timers[i]->start(nullptr);
    burst(i % runs.size());
    timers[i]->stop(nullptr);
  }
  std::vector<std::vector<double>> bursts(runs.size());
  for (std::size_t i = 0; i < timers.size(); ++i)
    bursts[i % runs.size()].push_back(timers[i]->elapsed_ms() / launches[i % runs.size()]);
  std::vector<double> medians;
  for (auto &samples : bursts)
    medians.push_back(median(std::move(samples)));
  return medians;
}

// A 16-byte-per-thread grid-stride copy: the bandwidth baseline. Launch over n = bytes / 16
// vectors: (const uint4 *from, uint4 *to, long long n).
inline const Template &copy16_template() {
  static const Template copy("copy16", R"(
__global__ void copy16(const uint4 *KJIT_RESTRICT from, uint4 *KJIT_RESTRICT to, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    to[i] = from[i];
})",
                             {},
                             TemplateOptions{.arguments = {"const uint4*", "uint4*", "long long"}});
  return copy;
}

} // namespace kjit::bench
