#pragma once
// What the GPU benchmarks share: host-timed batches of launches, and the bandwidth baseline.
#include "kjit/kjit.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
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
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
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
