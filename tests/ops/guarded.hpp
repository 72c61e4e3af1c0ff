#pragma once
// What the operators' GPU tests share beyond gpu_support.hpp. Outputs with a guard band: `count`
// elements the operator writes followed by `guard` it must not, all poisoned (NaN), so that both a
// missed write and a write past the end are caught.
#include "tests/ops/gpu_support.hpp"
#include "tests/support/poison.hpp"

#include <algorithm>
#include <random>

namespace kjit::ops::gpu_testing {

inline constexpr std::size_t guard_elements = 256;

// Every byte of the guard band after `count` elements of T is still poison.
template <Element T>
::testing::AssertionResult guard_intact(const DeviceBuffer &buffer, std::size_t count) {
  std::vector<unsigned char> bytes(buffer.size());
  buffer.device().synchronize();
  buffer.read(bytes.data(), bytes.size());
  const auto first = bytes.begin() + static_cast<std::ptrdiff_t>(count * sizeof(T));
  const auto changed = std::find_if(
      first, bytes.end(), [](unsigned char b) { return b != kjit::testing::poison_byte; });
  if (changed == bytes.end())
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "written past the end: byte " << (changed - first) << " of the guard band";
}

// `host` followed by a poisoned guard band, on the device.
template <Element T> std::vector<T> with_guard(std::vector<T> host) {
  const std::vector<T> guard = kjit::testing::poisoned<T>(guard_elements);
  host.insert(host.end(), guard.begin(), guard.end());
  return host;
}

// A GPU test run once per element type, with a generator of fixed seed.
template <typename T> class TypedOpsGpuTest : public OpsGpuTest {
protected:
  std::mt19937 rng{20261123};
};
using ElementTypes = ::testing::Types<float, Half, BFloat16>;

} // namespace kjit::ops::gpu_testing
