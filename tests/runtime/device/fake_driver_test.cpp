// The shared device path (enumeration, lazy contexts, the current-context contract, argument
// packing, errors) run against a fake driver with two devices, once through the CUDA table and
// once through the HIP table. A binary of its own: a process opens each backend once, and here
// both open the fake (fake_driver.cpp) instead of the vendor's library.
#include "fake_driver.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime/kernel.hpp"
#include "runtime/src/device_driver.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <numeric>
#include <ostream>
#include <thread>

namespace kjit {

void PrintTo(Backend backend, std::ostream *out) { *out << to_string(backend); }

namespace {

// Before any test opens a backend.
const bool fake_installed = [] {
  detail::cuda_driver().libraries = {KJIT_FAKE_DRIVER};
  detail::hip_driver().libraries = {KJIT_FAKE_DRIVER};
  return true;
}();

struct Loaded {
  Module module;
  Kernel kernel;
};

class FakeDevices : public ::testing::TestWithParam<Backend> {
protected:
  void SetUp() override {
    ASSERT_TRUE(fake_installed);
    found_ = devices(GetParam() == Backend::hip ? BackendChoice::hip : BackendChoice::cuda);
    // kjit has loaded the fake; this handle only finds its test hooks.
    void *library = dlopen(KJIT_FAKE_DRIVER, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(library, nullptr);
    counters_ = reinterpret_cast<testing::FakeDriverCountersFunction *>(
        dlsym(library, "kjit_fake_counters"))();
    current_device_ = reinterpret_cast<testing::FakeDriverCurrentDeviceFunction *>(
        dlsym(library, "kjit_fake_current_device"));
    set_current_device_ = reinterpret_cast<testing::FakeDriverSetCurrentDeviceFunction *>(
        dlsym(library, "kjit_fake_set_current_device"));
    dlclose(library);
    set_current_device_(-1);
  }

  bool hip() const { return GetParam() == Backend::hip; }

  // The device current on this thread as the backend sees it: HIP's is 0 until one is set.
  int current_device() const {
    const int device = current_device_();
    return hip() && device < 0 ? 0 : device;
  }

  Loaded load_scale(const Device &device) {
    Module module = Module::load(device, std::as_bytes(std::span(image, sizeof image)));
    Kernel kernel = module.kernel("scale", KernelSignature::of<float *, float, int>());
    return {std::move(module), std::move(kernel)};
  }

  // 512 floats of 1 on `device`, for the launch tests' scale kernel.
  static DeviceBuffer ones(const Device &device) {
    const std::vector<float> x(512, 1.0f);
    DeviceBuffer buffer = device.allocate(x.size() * sizeof(float));
    buffer.write(std::span(x));
    return buffer;
  }

  // Launches scale on `device` over n elements from a fresh buffer and checks the result.
  void scale_on(const Device &device, const Kernel &kernel, int n) {
    std::vector<float> x(static_cast<std::size_t>(n) + 8);
    std::iota(x.begin(), x.end(), 1.0f);
    DeviceBuffer buffer = device.allocate(x.size() * sizeof(float));
    buffer.write(std::span(x));
    kernel.launch({.grid = (n + 255) / 256, .block = 256}, buffer.as<float>(), 2.5f, n);
    device.synchronize();
    buffer.read(std::span(x));
    for (int i = 0; i < n + 8; ++i)
      ASSERT_EQ(x[i], (i < n ? 2.5f : 1.0f) * float(i + 1)) << "element " << i;
  }

  static constexpr char image[] = "KJIT-FAKE-CODE";
  std::span<const Device> found_;
  testing::FakeDriverCounters *counters_ = nullptr;
  testing::FakeDriverCurrentDeviceFunction *current_device_ = nullptr;
  testing::FakeDriverSetCurrentDeviceFunction *set_current_device_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Tables, FakeDevices, ::testing::Values(Backend::cuda, Backend::hip),
                         [](const auto &info) {
                           return info.param == Backend::hip ? "hip" : "cuda";
                         });

TEST(HipCodeObjectVersions, FollowTheRelease) {
  EXPECT_EQ(detail::code_object_version_of_hip(5, 2), 4);
  EXPECT_EQ(detail::code_object_version_of_hip(5, 7), 4);
  EXPECT_EQ(detail::code_object_version_of_hip(6, 0), 5);
  EXPECT_EQ(detail::code_object_version_of_hip(6, 3), 5);
  EXPECT_EQ(detail::code_object_version_of_hip(6, 4), 6);
  EXPECT_EQ(detail::code_object_version_of_hip(7, 2), 6);
}

TEST_P(FakeDevices, DescribesEachDeviceWithItsNativeTarget) {
  ASSERT_EQ(found_.size(), 2u);
  const char *targets[2][2] = {{"sm_90a", "sm_80"},
                               {"gfx90a:sramecc+:xnack-", "gfx942:sramecc+:xnack-"}};
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(found_[i].ordinal(), i);
    EXPECT_EQ(found_[i].name(), "kjit fake GPU " + std::to_string(i));
    EXPECT_EQ(found_[i].target().id(), targets[hip()][i]);
    EXPECT_EQ(found_[i].backend(), GetParam());
    EXPECT_EQ(found_[i].vendor(), hip() ? Vendor::amd : Vendor::nvidia);
    // The fake HIP runtime is ROCm 6.4's, the first that loads generic targets' code objects.
    EXPECT_EQ(found_[i].newest_code_object_version(), hip() ? std::optional(6) : std::nullopt);
  }
}

TEST_P(FakeDevices, ContextsAreMadeOnFirstUseOnly) {
  const int before = counters_->primary_retain;
  devices(hip() ? BackendChoice::hip : BackendChoice::cuda);
  EXPECT_EQ(counters_->primary_retain, before) << "enumerating made a context";
  for (const Device &device : found_)
    device.allocate(16);
  // CUDA retains each device's primary context once for the process; HIP has none to make.
  EXPECT_EQ(counters_->primary_retain, hip() ? before : 2);
}

TEST_P(FakeDevices, LaunchPassesTheArgumentsToTheKernel) {
  Loaded scale = load_scale(found_[0]);
  EXPECT_EQ(scale.kernel.registers(), 32);
  EXPECT_EQ(scale.kernel.max_threads_per_block(), 1024);
  EXPECT_EQ(scale.kernel.name(), "scale");
  for (int n : {1, 255, 256, 257, 1001})
    scale_on(found_[0], scale.kernel, n);
}

TEST_P(FakeDevices, ASteadyStateLaunchIsOneContextQueryAndOneLaunch) {
  Loaded scale = load_scale(found_[0]);
  DeviceBuffer x = found_[0].allocate(4 * sizeof(float));
  scale.kernel.launch({.grid = 1, .block = 4}, x.as<float>(), 1.0f, 4);
  const int gets = counters_->context_get, sets = counters_->context_set;
  const int launches = counters_->launches;
  for (int i = 0; i < 100; ++i)
    scale.kernel.launch({.grid = 1, .block = 4}, x.as<float>(), 1.0f, 4);
  EXPECT_EQ(counters_->launches - launches, 100);
  EXPECT_EQ(counters_->context_get - gets, 100);
  EXPECT_EQ(counters_->context_set - sets, 0);
}

TEST_P(FakeDevices, ALaunchLeavesTheCallersDeviceCurrent) {
  Loaded scale = load_scale(found_[0]);
  std::vector<float> x = {1, 2, 3, 4};
  DeviceBuffer buffer = found_[0].allocate(x.size() * sizeof(float));
  buffer.write(std::span(x));
  set_current_device_(1); // the host program works on device 1
  const int sets = counters_->context_set;
  // The fake refuses a launch while another device than the function's is current.
  scale.kernel.launch({.grid = 1, .block = 4}, buffer.as<float>(), 2.0f, 4);
  EXPECT_EQ(counters_->context_set - sets, 2) << "made current, then restored";
  EXPECT_EQ(current_device(), 1);
  buffer.read(std::span(x));
  EXPECT_EQ(x, (std::vector<float>{2, 4, 6, 8}));
}

TEST_P(FakeDevices, AThreadWithoutADeviceKeepsTheOneKjitMadeCurrent) {
  Loaded on_device_1 = load_scale(found_[1]);
  int after = -2;
  std::thread fresh([&] {
    on_device_1.kernel.launch({.grid = 1, .block = 1}, static_cast<float *>(nullptr), 1.0f, 0);
    after = current_device();
  });
  fresh.join();
  // CUDA: the thread had no context, it keeps device 1's. HIP always has a current device (0),
  // which is restored.
  EXPECT_EQ(after, hip() ? 0 : 1);
}

TEST_P(FakeDevices, WrongArgumentsNeverReachTheDriver) {
  Loaded scale = load_scale(found_[0]);
  const int launches = counters_->launches;
  EXPECT_THROW(scale.kernel.launch({.grid = 1, .block = 1}, static_cast<float *>(nullptr), 1.0, 1),
               Error);
  EXPECT_THROW(scale.kernel.launch({.grid = 1, .block = 1}, static_cast<float *>(nullptr), 1.0f),
               Error);
  EXPECT_EQ(counters_->launches, launches);
}

// A cluster of one block is a plain launch (one cuLaunchKernel); a larger cluster goes through
// cuLaunchKernelEx with the cluster dimension on CUDA, and is refused before the driver on HIP,
// which has no clusters, or where it does not divide the grid.
TEST_P(FakeDevices, ClustersLaunchThroughLaunchKernelExOnCudaAndAreRefusedOnHip) {
  const Device &device = found_[0];
  Loaded scale = load_scale(device);
  DeviceBuffer buffer = ones(device);
  const int launches = counters_->launches, cluster_launches = counters_->cluster_launches;
  scale.kernel.launch({.grid = 2, .block = 256, .cluster = 1}, buffer.as<float>(), 2.0f, 512);
  EXPECT_EQ(counters_->launches, launches + 1);
  EXPECT_EQ(counters_->cluster_launches, cluster_launches);
  auto refusal = [&](const LaunchConfig &config) {
    try {
      scale.kernel.launch(config, buffer.as<float>(), 2.0f, 512);
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument);
      return error.summary();
    }
    return std::string("no error");
  };
  if (hip()) {
    EXPECT_EQ(refusal({.grid = 2, .block = 256, .cluster = 2}),
              "scale: a cluster of (2, 1, 1) blocks cannot launch on HIP device 0 (kjit fake GPU "
              "0), which has no thread-block clusters (NVIDIA only)");
    EXPECT_EQ(counters_->launches, launches + 1);
    return;
  }
  scale.kernel.launch({.grid = 2, .block = 256, .cluster = 2}, buffer.as<float>(), 2.0f, 512);
  EXPECT_EQ(counters_->launches, launches + 2);
  EXPECT_EQ(counters_->cluster_launches, cluster_launches + 1);
  EXPECT_EQ(counters_->cluster_blocks, 2u);
  device.synchronize();
  std::vector<float> x(512);
  buffer.read(std::span(x));
  EXPECT_EQ(x[0], 4.0f);
  EXPECT_EQ(x[511], 4.0f);
  EXPECT_EQ(refusal({.grid = 3, .block = 256, .cluster = 2}),
            "scale: the cluster (2, 1, 1) does not divide the grid (3, 1, 1)");
  EXPECT_EQ(refusal({.grid = Dim3(2, 2), .block = 256, .cluster = Dim3(1, 0)}),
            "scale: the cluster (1, 0, 1) does not divide the grid (2, 2, 1)");
  EXPECT_EQ(counters_->launches, launches + 2);
}

// A launch that may overlap the previous kernel goes through cuLaunchKernelEx with programmatic
// stream serialization alone on CUDA (no cluster attribute for a cluster of one block), beside a
// cluster's dimension where there is one; on HIP, which has no such launch, it is a plain launch.
TEST_P(FakeDevices, AnOverlappingLaunchAsksForProgrammaticSerializationOnCudaAlone) {
  const Device &device = found_[0];
  Loaded scale = load_scale(device);
  DeviceBuffer buffer = ones(device);
  const int launches = counters_->launches, cluster_launches = counters_->cluster_launches,
            overlapped = counters_->overlapped_launches;
  scale.kernel.launch({.grid = 2, .block = 256, .overlap_previous = true}, buffer.as<float>(), 2.0f,
                      512);
  EXPECT_EQ(counters_->launches, launches + 1);
  EXPECT_EQ(counters_->cluster_launches, cluster_launches);
  EXPECT_EQ(counters_->overlapped_launches, overlapped + (hip() ? 0 : 1));
  if (!hip()) {
    scale.kernel.launch({.grid = 2, .block = 256, .cluster = 2, .overlap_previous = true},
                        buffer.as<float>(), 2.0f, 512);
    EXPECT_EQ(counters_->cluster_launches, cluster_launches + 1);
    EXPECT_EQ(counters_->overlapped_launches, overlapped + 2);
  }
  device.synchronize();
  std::vector<float> x(512);
  buffer.read(std::span(x));
  EXPECT_EQ(x[0], hip() ? 2.0f : 4.0f);
  EXPECT_EQ(x[511], hip() ? 2.0f : 4.0f);
}

TEST_P(FakeDevices, DriverRefusalsNameTheCallTheDeviceAndTheReason) {
  auto summary_of = [](auto action) {
    try {
      action();
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::device_error);
      return error.summary();
    }
    return std::string("no error");
  };
  const std::string not_code = "not a code object";
  EXPECT_EQ(
      summary_of([&] { Module::load(found_[0], std::as_bytes(std::span(not_code.c_str(), 18))); }),
      hip() ? "hipModuleLoadData on HIP device 0 (kjit fake GPU 0) failed: "
              "hipErrorInvalidImage (device kernel image is invalid)"
            : "cuModuleLoadData on CUDA device 0 (kjit fake GPU 0) failed: "
              "CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)");
  Loaded scale = load_scale(found_[0]);
  EXPECT_EQ(
      summary_of([&] { scale.module.kernel("_Z4nopev", KernelSignature()); }),
      std::string(hip() ? "hipModuleGetFunction" : "cuModuleGetFunction") +
          " found no kernel '_Z4nopev' in the module on " + (hip() ? "HIP" : "CUDA") +
          " device 0 (kjit fake GPU 0): " + (hip() ? "hipErrorNotFound" : "CUDA_ERROR_NOT_FOUND") +
          " (named symbol not found)");
  EXPECT_EQ(
      summary_of([&] {
        scale.kernel.launch({.grid = 1, .block = 2048}, static_cast<float *>(nullptr), 1.0f, 0);
      }),
      std::string(hip() ? "hipModuleLaunchKernel" : "cuLaunchKernel") + " of scale on " +
          (hip() ? "HIP" : "CUDA") +
          " device 0 (kjit fake GPU 0) with grid (1, 1, 1), block (2048, 1, 1), 0 shared "
          "bytes failed: " +
          (hip() ? "hipErrorInvalidValue" : "CUDA_ERROR_INVALID_VALUE") + " (invalid argument)");
}

TEST_P(FakeDevices, ModulesAndBuffersAreReleasedOnTheirOwnDevice) {
  const int unloads = counters_->module_unloads, frees = counters_->frees;
  {
    Loaded on_device_1 = load_scale(found_[1]);
    DeviceBuffer buffer = found_[1].allocate(64);
    set_current_device_(0);
  } // the fake refuses to unload or free while another device is current
  EXPECT_EQ(counters_->module_unloads - unloads, 1);
  EXPECT_EQ(counters_->frees - frees, 1);
  EXPECT_EQ(current_device(), 0);
}

TEST_P(FakeDevices, AMovedModuleUnloadsOnce) {
  const int unloads = counters_->module_unloads;
  {
    Loaded first = load_scale(found_[0]);
    Module moved = std::move(first.module);
    Module assigned = Module::load(found_[0], std::as_bytes(std::span(image, sizeof image)));
    assigned = std::move(moved);
  }
  EXPECT_EQ(counters_->module_unloads - unloads, 2);
}

} // namespace
} // namespace kjit
