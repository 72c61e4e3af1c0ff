// Finding hiprtc's device library: the variables first, then the package of comgr's LLVM; its
// digest follows its content; the error for a generic target without it names the package.
#include "device_library.hpp"
#include "tests/support/scoped_environment.hpp"
#include "tests/support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>

namespace kjit::jit {
namespace {

using testing::ScopedEnvironment;
using testing::TempDir;

TEST(DeviceLibraryTest, LlvmMajorVersionComesFromTheLibLlvmDependency) {
  const std::vector<std::string> sid{"libz.so.1", "libLLVM.so.21.1", "libc.so.6"};
  EXPECT_EQ(llvm_major_version(sid), 21);
  const std::vector<std::string> bookworm{"libLLVM-15.so.1"};
  EXPECT_EQ(llvm_major_version(bookworm), 15);
  const std::vector<std::string> none{"libz.so.1", "libLLVMSupport.so"};
  EXPECT_EQ(llvm_major_version(none), std::nullopt);
}

class DeviceLibraryEnvironment : public ::testing::Test {
protected:
  void SetUp() override {
    environment.set("HIP_DEVICE_LIB_PATH", nullptr);
    environment.set("KJIT_ROCM_DEVICE_LIB_PATH", nullptr);
  }
  void write(const std::string &name, const std::string &content) {
    std::ofstream(dir / name) << content;
  }
  ScopedEnvironment environment;
  TempDir dir;
};

TEST_F(DeviceLibraryEnvironment, AVariableNamesTheFolderAndTheDigestFollowsItsContent) {
  write("ockl.bc", "one");
  write("oclc_abi_version_600.bc", "two");
  write("README", "not bitcode");
  environment.set("KJIT_ROCM_DEVICE_LIB_PATH", dir.path().c_str());
  const DeviceLibrary found = find_device_library(99);
  EXPECT_EQ(found.directory, dir.path().string());
  EXPECT_EQ(found.files, (std::vector<std::string>{(dir / "ockl.bc").string(),
                                                   (dir / "oclc_abi_version_600.bc").string()}));
  EXPECT_EQ(found.digest.size(), 32u);
  EXPECT_EQ(found.package, "rocm-device-libs-99");

  write("ockl.bc", "changed");
  EXPECT_NE(find_device_library(99).digest, found.digest);
  write("ockl.bc", "one");
  EXPECT_EQ(find_device_library(99).digest, found.digest);

  // HIP_DEVICE_LIB_PATH, which clang itself reads, comes first.
  TempDir other;
  std::ofstream(other / "ockl.bc") << "one";
  environment.set("HIP_DEVICE_LIB_PATH", other.path().c_str());
  EXPECT_EQ(find_device_library(99).directory, other.path().string());
}

TEST_F(DeviceLibraryEnvironment, AVariableNamingNoBitcodeIsAnError) {
  environment.set("HIP_DEVICE_LIB_PATH", dir.path().c_str());
  try {
    find_device_library(21);
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::compiler_unavailable);
    EXPECT_EQ(error.summary(), "HIP_DEVICE_LIB_PATH=" + dir.path().string() +
                                   " names no folder of device-library bitcode (*.bc files)");
    EXPECT_NE(error.detail().find("rocm-device-libs-21: /usr/lib/llvm-21/lib/clang/21/amdgcn/"
                                  "bitcode"),
              std::string::npos)
        << error.detail();
  }
}

TEST_F(DeviceLibraryEnvironment, WithoutOneAGenericTargetIsRefusedNamingThePackage) {
  const DeviceLibrary none = find_device_library(99); // no LLVM 99 is installed
  EXPECT_TRUE(none.directory.empty());
  EXPECT_EQ(none.package_directory, "/usr/lib/llvm-99/lib/clang/99/amdgcn/bitcode");
  const Error error = device_library_missing(none, Target::parse("gfx11-generic"), "hiprtc, X");
  EXPECT_EQ(error.code(), Errc::unsupported_target);
  EXPECT_EQ(error.summary(), "hiprtc, X compiles gfx11-generic only with the device library on "
                             "disk: install rocm-device-libs-99 (it installs "
                             "/usr/lib/llvm-99/lib/clang/99/amdgcn/bitcode), or name its folder "
                             "in HIP_DEVICE_LIB_PATH");
}

} // namespace
} // namespace kjit::jit
