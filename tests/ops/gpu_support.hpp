#pragma once
// What every operator's GPU test needs: a Runtime with a private cache, the device, random
// inputs, poisoned outputs (every byte 0xFF: NaN as float, half and bfloat16) and an element-wise
// comparison with a double-precision reference that reports the first mismatches.
#include "kjit/kjit.hpp"
#include "kjit/ops/ops.hpp"
#include "kjit/runtime/kernel.hpp"
#include "tests/support/poison.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace kjit::ops::gpu_testing {

class OpsGpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      devices();
    } catch (const Error &error) {
      GTEST_SKIP() << error.summary();
    }
    runtime_.emplace(kjit::testing::private_config(dir_));
  }

  Runtime &runtime() { return *runtime_; }
  const Device &device() { return runtime_->default_device(); }

  template <Element T> DeviceBuffer upload(const std::vector<T> &host) {
    DeviceBuffer buffer = device().allocate(host.size() * sizeof(T));
    buffer.write(host.data(), host.size() * sizeof(T));
    return buffer;
  }
  // `count` elements of poison, on the device.
  template <Element T> DeviceBuffer poisoned(std::size_t count) {
    return upload(kjit::testing::poisoned<T>(count));
  }
  // Waits for the device, then reads `count` elements back.
  template <Element T> std::vector<T> download(const DeviceBuffer &buffer, std::size_t count) {
    device().synchronize();
    std::vector<T> host(count);
    buffer.read(host.data(), count * sizeof(T));
    return host;
  }

private:
  kjit::testing::TempDir dir_;
  std::optional<Runtime> runtime_;
};

// For typed tests over every element type: TYPED_TEST_SUITE(MyTest, ElementTypes).
using ElementTypes = ::testing::Types<float, Half, BFloat16>;

// `count` values uniform in [low, high), rounded to T.
template <Element T>
std::vector<T> random_elements(std::size_t count, std::mt19937 &rng, double low, double high) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<T> values(count);
  for (T &value : values)
    value = from_double<T>(uniform(rng));
  return values;
}

template <Element T> std::vector<double> to_doubles(const std::vector<T> &values) {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    out[i] = to_double(values[i]);
  return out;
}

// Passes when every |got - expected| <= absolute + relative * |expected|; NaN never passes (so
// poison left in an output fails). Names the first mismatches and counts them.
template <Element T>
::testing::AssertionResult all_close(std::span<const T> got, std::span<const double> expected,
                                     double absolute, double relative) {
  if (got.size() != expected.size())
    return ::testing::AssertionFailure() << got.size() << " values, expected " << expected.size();
  std::size_t wrong = 0;
  std::string first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double value = to_double(got[i]);
    if (std::abs(value - expected[i]) <= absolute + relative * std::abs(expected[i]))
      continue;
    if (++wrong <= 5)
      first += "\n  [" + std::to_string(i) + "] got " + std::to_string(value) + ", expected " +
               std::to_string(expected[i]);
  }
  if (wrong == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << wrong << " of " << got.size() << " values out of tolerance (absolute " << absolute
         << ", relative " << relative << "):" << first;
}

// Passes when every |got[i] - expected[i]| <= bound(i); NaN never passes. Names the first
// mismatches and counts them.
template <Element T, typename Bound>
::testing::AssertionResult within_bounds(const std::vector<T> &got,
                                         const std::vector<double> &expected, const Bound &bound) {
  std::size_t wrong = 0;
  std::string first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double value = to_double(got[i]), allowed = bound(i);
    if (std::abs(value - expected[i]) <= allowed)
      continue;
    if (++wrong <= 5)
      first += "\n  [" + std::to_string(i) + "] got " + std::to_string(value) + ", expected " +
               std::to_string(expected[i]) + " within " + std::to_string(allowed);
  }
  if (wrong == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << wrong << " of " << got.size() << " wrong:" << first;
}

template <Element T>
::testing::AssertionResult all_close(const std::vector<T> &got, const std::vector<double> &expected,
                                     double absolute, double relative) {
  return all_close(std::span<const T>(got), std::span<const double>(expected), absolute, relative);
}

} // namespace kjit::ops::gpu_testing
