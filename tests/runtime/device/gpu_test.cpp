// GPU tests: kernels compiled through kjit for the device's own target, loaded, launched, and
// their output compared with a CPU reference computed in double precision. Outputs are poisoned
// (every byte 0xFF: NaN as float and as half) before each launch, and the elements past the end
// must keep the poison. Every test skips with the reason where no GPU is found.
#include "header_library_kernels.hpp" // kjit_embed_sources(): bench/header_libraries
#include "kjit/kjit.hpp"
#include "kjit/runtime/kernel.hpp"
#include "kjit/templates/library.hpp"
#include "runtime/src/device_driver.hpp"
#include "tests/support/poison.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <gtest/gtest.h>
#include <optional>
#include <random>
#include <thread>
#include <unistd.h>

namespace kjit {
namespace {

// An out-of-place kernel, so that the whole output starts poisoned.
const Template scale_copy("scale_copy", R"(template <typename T>
__global__ void scale_copy(const T *KJIT_RESTRICT x, T *KJIT_RESTRICT y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);
})",
                          {{"T", ParamSchema::type({"float", "half"})}});

// The same kernel with its argument types declared, for Runtime::kernel.
const Template declared_scale_copy("scale_copy", scale_copy.source(),
                                   {{"T", ParamSchema::type({"float", "half"})}},
                                   {.arguments = {"const T*", "T*", "float", "int"}});

// Sizes around the block size and odd ones, small to a million.
const int sizes[] = {1, 7, 255, 256, 257, 4099, 1000003};
constexpr int tail = 64; // poisoned elements past n that no thread may write
constexpr unsigned block_size = 256;

unsigned blocks_for(int elements, int per_block) {
  return static_cast<unsigned>((elements + per_block - 1) / per_block);
}

// Element types as the host holds them: float, and half as the bits of an IEEE binary16.
struct FloatElement {
  using Host = float;
  static constexpr const char *name = "float";
  static constexpr double relative_tolerance = 0x1p-23; // one float rounding (2^-24), with room
  static Host random(std::mt19937 &rng) {
    return std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);
  }
  static double value(Host x) { return x; }
};

struct HalfElement {
  using Host = std::uint16_t;
  static constexpr const char *name = "half";
  static constexpr double relative_tolerance = 0x1p-10; // one half rounding (2^-11), with room
  // Normal numbers of magnitude [2^-5, 2^3): scaled by the test's factors they stay normal.
  static Host random(std::mt19937 &rng) {
    const unsigned sign = std::uniform_int_distribution<unsigned>(0, 1)(rng);
    const unsigned exponent = std::uniform_int_distribution<unsigned>(10, 17)(rng); // bias 15
    const unsigned mantissa = std::uniform_int_distribution<unsigned>(0, 1023)(rng);
    return static_cast<Host>(sign << 15 | exponent << 10 | mantissa);
  }
  static double value(Host bits) {
    const int exponent = bits >> 10 & 0x1f;
    const int mantissa = bits & 0x3ff;
    double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                       : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                        : std::ldexp(1024 + mantissa, exponent - 25);
    return bits & 0x8000 ? -magnitude : magnitude;
  }
};

using kjit::testing::is_poison;
using kjit::testing::poisoned;

struct Loaded {
  Module module;
  Kernel kernel;
};

class Gpu : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      found_ = devices();
    } catch (const Error &error) {
      GTEST_SKIP() << error.summary();
    }
    runtime_.emplace(testing::private_config(dir_));
  }

  const Device &device() const { return found_.front(); }

  Loaded load(const Device &on, const Template &tmpl, const ParamValues &params,
              KernelSignature signature) {
    const CodeObject &code = runtime_->compile(tmpl, params, on.target());
    Module module = Module::load(on, code.code());
    Kernel kernel = module.kernel(code.lowered_name(), std::move(signature), code.expression());
    return {std::move(module), std::move(kernel)};
  }

  template <typename Element> Loaded load_scale_copy(const Device &on) {
    using Host = typename Element::Host;
    return load(on, scale_copy, {{"T", Element::name}},
                KernelSignature::of<const Host *, Host *, float, int>());
  }

  // y = a * x over n elements on `on`, checked element by element.
  template <typename Element> void check_scale_copy(const Device &on, const Kernel &kernel, int n) {
    using Host = typename Element::Host;
    std::mt19937 rng(static_cast<unsigned>(n));
    const float a = -1.6875f;
    std::vector<Host> x(static_cast<std::size_t>(n));
    std::generate(x.begin(), x.end(), [&] { return Element::random(rng); });
    std::vector<Host> y = poisoned<Host>(x.size() + tail);

    DeviceBuffer x_device = on.allocate(x.size() * sizeof(Host));
    DeviceBuffer y_device = on.allocate(y.size() * sizeof(Host));
    x_device.write(std::span(x));
    y_device.write(std::span(y));
    kernel.launch({.grid = blocks_for(n, block_size), .block = block_size},
                  x_device.as<const Host>(), y_device.as<Host>(), a, n);
    on.synchronize();
    y_device.read(std::span(y));

    int wrong = 0;
    for (int i = 0; i < n; ++i) {
      const double expected = Element::value(x[i]) * a;
      const double got = Element::value(y[i]);
      if (!(std::abs(got - expected) <= Element::relative_tolerance * std::abs(expected)) &&
          ++wrong <= 3)
        ADD_FAILURE() << Element::name << " n=" << n << ": y[" << i << "] = " << got
                      << ", expected " << expected;
    }
    EXPECT_EQ(wrong, 0) << Element::name << " n=" << n << " on " << on.name();
    EXPECT_TRUE(std::all_of(y.begin() + n, y.end(), is_poison<Host>))
        << "a thread wrote past n=" << n;
  }

  testing::TempDir dir_;
  std::span<const Device> found_;
  std::optional<Runtime> runtime_;
};

TEST_F(Gpu, DescribesItsDevices) {
  for (const Device &gpu : found_) {
    std::printf("[  DEVICE  ] %s device %d: %s, target %s\n",
                std::string(to_string(gpu.backend())).c_str(), gpu.ordinal(), gpu.name().c_str(),
                gpu.target().id().c_str());
    EXPECT_FALSE(gpu.name().empty());
    EXPECT_EQ(gpu.target().vendor(), gpu.vendor());
    EXPECT_EQ(gpu.vendor(), gpu.backend() == Backend::hip ? Vendor::amd : Vendor::nvidia);
  }
}

TEST_F(Gpu, ScaleCopyFloatMatchesTheReference) {
  Loaded loaded = load_scale_copy<FloatElement>(device());
  for (int n : sizes)
    check_scale_copy<FloatElement>(device(), loaded.kernel, n);
}

TEST_F(Gpu, ScaleCopyHalfMatchesTheReference) {
  Loaded loaded = load_scale_copy<HalfElement>(device());
  for (int n : sizes)
    check_scale_copy<HalfElement>(device(), loaded.kernel, n);
}

// The built-in axpy, in place on y: each thread handles ITEMS elements.
TEST_F(Gpu, BuiltinAxpyMatchesTheReference) {
  constexpr int items = 4;
  Loaded loaded = load(device(), templates::find("axpy"), {{"T", "float"}, {"ITEMS", items}},
                       KernelSignature::of<const float *, float *, float, int>());
  EXPECT_GT(loaded.kernel.registers(), 0);
  EXPECT_GE(loaded.kernel.max_threads_per_block(), static_cast<int>(block_size));
  for (int n : sizes) {
    std::mt19937 rng(static_cast<unsigned>(n) + 1);
    const float a = 0.8125f;
    std::vector<float> x(static_cast<std::size_t>(n));
    std::vector<float> y = poisoned<float>(x.size() + tail);
    std::generate(x.begin(), x.end(), [&] { return FloatElement::random(rng); });
    std::generate(y.begin(), y.begin() + n, [&] { return FloatElement::random(rng); });
    DeviceBuffer x_device = device().allocate(x.size() * sizeof(float));
    DeviceBuffer y_device = device().allocate(y.size() * sizeof(float));
    x_device.write(std::span(x));
    y_device.write(std::span(y));
    const std::vector<float> y_before = y;

    loaded.kernel.launch({.grid = blocks_for(n, block_size * items), .block = block_size},
                         x_device.as<const float>(), y_device.as<float>(), a, n);
    device().synchronize();
    y_device.read(std::span(y));

    int wrong = 0;
    for (int i = 0; i < n; ++i) {
      const double product = double(a) * x[i];
      const double expected = product + y_before[i];
      const double bound = 0x1p-22 * (std::abs(product) + std::abs(y_before[i]));
      if (!(std::abs(y[i] - expected) <= bound) && ++wrong <= 3)
        ADD_FAILURE() << "n=" << n << ": y[" << i << "] = " << y[i] << ", expected " << expected;
    }
    EXPECT_EQ(wrong, 0) << "n=" << n;
    EXPECT_TRUE(std::all_of(y.begin() + n, y.end(), is_poison<float>)) << "n=" << n;
  }
}

TEST_F(Gpu, AWrongArgumentThrowsBeforeTheDriverAndLaunchesNothing) {
  Loaded loaded = load_scale_copy<FloatElement>(device());
  const int n = 1000;
  std::vector<float> y = poisoned<float>(n);
  DeviceBuffer x_device = device().allocate(n * sizeof(float));
  DeviceBuffer y_device = device().allocate(n * sizeof(float));
  y_device.write(std::span(y));
  try {
    loaded.kernel.launch({.grid = blocks_for(n, block_size), .block = block_size},
                         x_device.as<const float>(), y_device.as<float>(), 2.0, n);
    ADD_FAILURE() << "a double was accepted for a float parameter";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    EXPECT_EQ(error.summary(),
              "scale_copy<float>: argument 3 is 8 bytes (double), the kernel takes 4 (float)");
  }
  EXPECT_THROW(loaded.kernel.launch({.grid = blocks_for(n, block_size), .block = block_size},
                                    x_device.as<const float>(), y_device.as<float>(), 2.0f),
               Error);
  device().synchronize();
  y_device.read(std::span(y));
  EXPECT_TRUE(std::all_of(y.begin(), y.end(), is_poison<float>)) << "the kernel ran";
}

TEST_F(Gpu, DriverRefusalsAreDeviceErrors) {
  Loaded loaded = load_scale_copy<FloatElement>(device());
  try {
    loaded.module.kernel("kjit_no_such_kernel", KernelSignature());
    ADD_FAILURE() << "a missing kernel was found";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::device_error);
    EXPECT_NE(error.summary().find("kjit_no_such_kernel"), std::string::npos) << error.summary();
  }
  const std::string not_code = "this is not a code object";
  try {
    Module::load(device(), std::as_bytes(std::span(not_code.c_str(), not_code.size() + 1)));
    ADD_FAILURE() << "text was loaded as a module";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::device_error);
  }
  // More threads per block than any device runs: the driver refuses the launch itself.
  DeviceBuffer x_device = device().allocate(sizeof(float));
  try {
    loaded.kernel.launch({.grid = 1, .block = 4096}, x_device.as<const float>(),
                         x_device.as<float>(), 1.0f, 1);
    ADD_FAILURE() << "a block of 4096 threads was launched";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::device_error);
    EXPECT_NE(error.summary().find("block (4096, 1, 1)"), std::string::npos) << error.summary();
  }
  EXPECT_NO_THROW(device().synchronize());
}

// A thread that never used the device: kjit makes the context current itself.
TEST_F(Gpu, LaunchesFromAFreshThread) {
  Loaded loaded = load_scale_copy<FloatElement>(device());
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
      check_scale_copy<FloatElement>(device(), loaded.kernel, 4099);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  worker.join();
  if (failure)
    std::rethrow_exception(failure);
}

TEST_F(Gpu, EachOfTwoDevicesRunsItsOwnModule) {
  if (found_.size() < 2)
    GTEST_SKIP() << "one " << to_string(device().backend()) << " device (" << device().name()
                 << "): two are needed";
  // The calling code works on device 0; kjit's calls for device 1 switch to it and back.
  found_[0].synchronize(); // makes device 0's context current on a thread that had none
  const detail::DriverApi &api = *detail::DeviceAccess::state(found_[0]).api;
  detail::Context before = 0;
  ASSERT_EQ(api.current_context(&before), 0);
  ASSERT_EQ(before, detail::DeviceAccess::state(found_[0]).context());

  std::vector<Loaded> per_device;
  for (const Device &gpu : found_.first(2))
    per_device.push_back(load_scale_copy<FloatElement>(gpu));
  for (int round = 0; round < 2; ++round)
    for (std::size_t i = 0; i < per_device.size(); ++i)
      check_scale_copy<FloatElement>(found_[i], per_device[i].kernel, 257 + round * 4000);

  detail::Context after = 0;
  ASSERT_EQ(api.current_context(&after), 0);
  EXPECT_EQ(after, before) << "kjit left device 1 current";
}

// The Runtime's own path, as operator code calls it on every launch: from parameters to a
// loaded Kernel, checked against the argument types the template declares.
TEST_F(Gpu, RuntimeKernelFromParametersLaunchesAndIsFoundAgain) {
  const Kernel &kernel = runtime_->kernel(declared_scale_copy, {{"T", "float"}}, device());
  EXPECT_EQ(&runtime_->kernel(declared_scale_copy, {{"T", "float"}}, device()), &kernel);
  EXPECT_EQ(kernel.signature().to_string(), "(float*, float*, float, int)");
  EXPECT_EQ(runtime_->counters().compiled, 1u);
  for (int n : sizes)
    check_scale_copy<FloatElement>(device(), kernel, n);
}

// A second process with the cache this one filled: it loads the entry from disk and launches
// without compiling. The child is this binary running the disabled test below.
TEST_F(Gpu, AFreshProcessHitsTheDiskAndLaunchesWithoutCompiling) {
  const CodeObject &code =
      runtime_->compile(declared_scale_copy, {{"T", "float"}}, device().target());
  ASSERT_EQ(code.origin(), Origin::compiled);
  ASSERT_FALSE(code.entry_path().empty());
  const std::string command = "KJIT_CACHE_DIR='" + (dir_ / "cache").string() +
                              "' KJIT_PREBUILT_DIR='" + (dir_ / "no-prebuilt").string() +
                              "' /proc/" + std::to_string(::getpid()) +
                              "/exe --gtest_also_run_disabled_tests "
                              "--gtest_filter=Gpu.DISABLED_ChildLaunchesFromTheWarmCache 2>&1";
  FILE *child = ::popen(command.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, child) != nullptr)
    output += buffer;
  EXPECT_EQ(::pclose(child), 0) << output;
  EXPECT_NE(output.find("[  PASSED  ] 1 test"), std::string::npos) << output;
}

TEST_F(Gpu, DISABLED_ChildLaunchesFromTheWarmCache) {
  Runtime fresh; // configured from the environment the parent set
  const Kernel &kernel = fresh.kernel(declared_scale_copy, {{"T", "float"}}, device());
  EXPECT_EQ(fresh.counters().compiled, 0u);
  EXPECT_EQ(fresh.counters().user_cache_hits, 1u);
  check_scale_copy<FloatElement>(device(), kernel, 4099);
}

// The directory CUB's headers are found under: KJIT_CUB_INCLUDE, else the CUDA toolkit's CCCL
// directory (CUDA 13) or its include directory (CUDA 12). Empty when none holds CUB.
std::string cub_include_directory() {
  std::vector<std::string> candidates;
  if (const char *given = std::getenv("KJIT_CUB_INCLUDE"))
    candidates.emplace_back(given);
  const char *cuda = std::getenv("CUDA_HOME");
  for (const std::string &root : {std::string(cuda ? cuda : ""), std::string("/usr/local/cuda")})
    if (!root.empty())
      for (const char *sub : {"/include/cccl", "/include"})
        candidates.push_back(root + sub);
  for (const std::string &dir : candidates)
    if (std::filesystem::is_regular_file(dir + "/cub/block/block_scan.cuh"))
      return std::filesystem::absolute(dir).string();
  return {};
}

// A real header library through include directories (issue 26): CUB's BlockScan, compiled by
// NVRTC against the toolkit's headers, run, and found again through the header manifest by a
// fresh Runtime. Each block's inclusive prefix sum of `in`, one item per thread (the kernel of
// bench/header_libraries/cub_block_scan.cu).
TEST_F(Gpu, CubBlockScanThroughIncludeDirectoriesMatchesTheReference) {
  if (device().vendor() != Vendor::nvidia)
    GTEST_SKIP() << "CUB is NVIDIA's; the device is " << device().name();
  const std::string cub = cub_include_directory();
  if (cub.empty())
    GTEST_SKIP() << "no CUB headers (set KJIT_CUB_INCLUDE to the directory holding cub/)";
  std::printf("[  CUB     ] headers from %s\n", cub.c_str());
  const Template block_scan(
      "block_scan", testing::header_library_kernels::source("cub_block_scan.cu"),
      {{"T", ParamSchema::type({"int"})}, {"THREADS", ParamSchema::one_of({128, 256})}},
      {.include_dirs = {cub}});
  for (int threads : {128, 256}) {
    const ParamValues params{{"T", "int"}, {"THREADS", threads}};
    const CodeObject &code = runtime_->compile(block_scan, params, device().target());
    EXPECT_EQ(code.origin(), Origin::compiled);
    Module module = Module::load(device(), code.code());
    Kernel kernel = module.kernel(code.lowered_name(), KernelSignature::of<const int *, int *>(),
                                  code.expression());
    const int blocks = 997;
    const std::size_t n = static_cast<std::size_t>(blocks) * threads;
    std::mt19937 rng(static_cast<unsigned>(threads));
    std::vector<int> in(n);
    std::generate(in.begin(), in.end(),
                  [&] { return std::uniform_int_distribution<int>(-100000, 100000)(rng); });
    std::vector<int> out = poisoned<int>(n + tail);
    DeviceBuffer in_device = device().allocate(n * sizeof(int));
    DeviceBuffer out_device = device().allocate(out.size() * sizeof(int));
    in_device.write(std::span(in));
    out_device.write(std::span(out));
    kernel.launch({.grid = static_cast<unsigned>(blocks), .block = static_cast<unsigned>(threads)},
                  in_device.as<const int>(), out_device.as<int>());
    device().synchronize();
    out_device.read(std::span(out));
    int wrong = 0;
    for (std::size_t block = 0; block < static_cast<std::size_t>(blocks); ++block) {
      long long sum = 0; // the reference in 64 bits: no partial sum here exceeds an int
      for (std::size_t t = 0; t < static_cast<std::size_t>(threads); ++t) {
        const std::size_t i = block * threads + t;
        sum += in[i];
        if (out[i] != sum && ++wrong <= 3)
          ADD_FAILURE() << "THREADS=" << threads << ": out[" << i << "] = " << out[i]
                        << ", expected " << sum;
      }
    }
    EXPECT_EQ(wrong, 0) << "THREADS=" << threads;
    EXPECT_TRUE(std::all_of(out.begin() + n, out.end(), is_poison<int>))
        << "a thread wrote past the last block";
  }
  // A fresh Runtime finds both through the manifest: every CUB header unchanged.
  Runtime fresh(testing::private_config(dir_));
  for (int threads : {128, 256})
    EXPECT_EQ(
        fresh.compile(block_scan, {{"T", "int"}, {"THREADS", threads}}, device().target()).origin(),
        Origin::user_cache);
}

} // namespace
} // namespace kjit
