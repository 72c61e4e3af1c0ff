// Opening the device backends where there is no GPU: every failure is Error(no_device) with the
// reason, never an abort. The tables are opened under library names that do not exist (or do
// not export the driver's symbols) so that each reason is checked on any machine; the real
// backends are checked as this machine has them.
#include "kjit/error.hpp"
#include "kjit/runtime/device.hpp"
#include "runtime/src/device_driver.hpp"
#include "tests/support/scoped_environment.hpp"

#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kjit {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::ScopedEnvironment;
using ::testing::StartsWith;

struct NamedDriver {
  const char *name;
  detail::DriverApi &(*table)();
  const char *init_symbol;
};

class EachDriver : public ::testing::TestWithParam<NamedDriver> {};

INSTANTIATE_TEST_SUITE_P(Backends, EachDriver,
                         ::testing::Values(NamedDriver{"cuda", detail::cuda_driver, "cuInit"},
                                           NamedDriver{"hip", detail::hip_driver, "hipInit"}),
                         [](const auto &info) { return std::string(info.param.name); });

TEST_P(EachDriver, AMissingLibraryIsNamedWithTheLoadersReason) {
  detail::DriverApi api = GetParam().table();
  api.libraries = {"libkjit-no-such-driver.so"};
  const detail::OpenedBackend opened = detail::open_backend(api);
  EXPECT_TRUE(opened.devices.empty());
  EXPECT_EQ(opened.no_device_reason,
            api.library_label +
                " not found (libkjit-no-such-driver.so: cannot open shared object file: No such "
                "file or directory)");
}

TEST_P(EachDriver, ALibraryWithoutTheDriversSymbolsIsRefusedAndTheTableLeftAlone) {
  detail::DriverApi api = GetParam().table();
  const auto init_before = api.init.function;
  api.libraries = {"libm.so.6"};
  const detail::OpenedBackend opened = detail::open_backend(api);
  EXPECT_TRUE(opened.devices.empty());
  EXPECT_THAT(opened.no_device_reason, HasSubstr(std::string("has no ") + GetParam().init_symbol));
  EXPECT_EQ(api.init.function, init_before);
}

// This machine's own drivers: a GPU machine lists devices; any other reports why not.
TEST_P(EachDriver, TheInstalledDriverFindsDevicesOrSaysWhyNot) {
  const BackendChoice choice =
      GetParam().table().backend == Backend::hip ? BackendChoice::hip : BackendChoice::cuda;
  try {
    const auto found = devices(choice);
    ASSERT_FALSE(found.empty());
    for (const Device &device : found) {
      EXPECT_FALSE(device.name().empty());
      EXPECT_EQ(device.target().vendor(), device.vendor());
    }
    GTEST_SKIP() << "this machine has " << found.size() << " " << GetParam().name << " device(s)";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::no_device);
    EXPECT_THAT(error.summary(), StartsWith("no GPU: "));
    EXPECT_THAT(error.summary(),
                AnyOf(HasSubstr(" not found ("), HasSubstr(" failed: "),
                      HasSubstr("found no device"), HasSubstr("no usable device")));
    // The reason is kept: asking again gives the same answer without opening anything again.
    try {
      devices(choice);
      ADD_FAILURE() << "the second call found a device";
    } catch (const Error &again) {
      EXPECT_EQ(again.summary(), error.summary());
    }
  }
}

TEST(Devices, AutomaticNamesTheReasonOfEachBackend) {
  try {
    devices(BackendChoice::automatic);
    GTEST_SKIP() << "this machine has a GPU";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::no_device);
    EXPECT_THAT(error.summary(), StartsWith("no GPU: HIP: "));
    EXPECT_THAT(error.summary(), HasSubstr("; CUDA: "));
  }
}

TEST(Devices, HipWithoutKernelDriverNamesTheDeviceNode) {
  if (std::filesystem::exists("/dev/kfd"))
    GTEST_SKIP() << "/dev/kfd exists here";
  try {
    devices(BackendChoice::hip);
    FAIL() << "HIP found a device without /dev/kfd";
  } catch (const Error &error) {
    // Where libamdhip64 is installed, hipInit fails and the missing node is named.
    if (error.summary().find("hipInit") != std::string::npos) {
      EXPECT_THAT(error.summary(), HasSubstr("/dev/kfd does not exist"));
    }
  }
}

TEST(BackendChoice, ParsesKjitBackend) {
  EXPECT_EQ(parse_backend_choice("auto"), BackendChoice::automatic);
  EXPECT_EQ(parse_backend_choice("hip"), BackendChoice::hip);
  EXPECT_EQ(parse_backend_choice("cuda"), BackendChoice::cuda);
  try {
    parse_backend_choice("rocm");
    FAIL() << "rocm was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_EQ(error.summary(), "KJIT_BACKEND='rocm' is not a backend; expected auto, hip or cuda");
  }

  ScopedEnvironment env;
  env.set("KJIT_BACKEND", nullptr);
  EXPECT_EQ(backend_choice_from_environment(), BackendChoice::automatic);
  env.set("KJIT_BACKEND", "cuda");
  EXPECT_EQ(backend_choice_from_environment(), BackendChoice::cuda);
  env.set("KJIT_BACKEND", "CUDA");
  EXPECT_THROW(backend_choice_from_environment(), Error);
}

} // namespace
} // namespace kjit
