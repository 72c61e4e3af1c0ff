#include "dynamic_library.hpp"

#include "kjit/error.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace kjit::jit {
namespace {

TEST(DynamicLibrary, ReportsEveryCandidateAndWhyItFailed) {
  std::vector<std::string> candidates{"libkjit_does_not_exist.so.1", "/nonexistent/libx.so",
                                      "libm.so.6"};
  try {
    DynamicLibrary::open_first("hiprtc", candidates, "hiprtcCreateProgram");
    FAIL() << "a library without hiprtcCreateProgram was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::compiler_unavailable);
    EXPECT_EQ(error.summary(), "hiprtc could not be loaded; tried 3 places:");
    EXPECT_NE(error.detail().find("libkjit_does_not_exist.so.1: libkjit_does_not_exist.so.1: "
                                  "cannot open shared object file"),
              std::string::npos)
        << error.detail();
    EXPECT_NE(error.detail().find("/nonexistent/libx.so: "), std::string::npos) << error.detail();
    EXPECT_NE(error.detail().find("libm.so.6: loaded /"), std::string::npos) << error.detail();
    EXPECT_NE(error.detail().find("but it has no hiprtcCreateProgram"), std::string::npos)
        << error.detail();
  }
}

TEST(DynamicLibrary, OpensTheFirstThatLoadsAndResolvesFunctions) {
  std::vector<std::string> candidates{"libkjit_does_not_exist.so.1", "libm.so.6"};
  DynamicLibrary libm = DynamicLibrary::open_first("libm", candidates, "cos");
  EXPECT_NE(libm.real_path().find("libm"), std::string::npos) << libm.real_path();
  EXPECT_EQ(libm.real_path().front(), '/');
  auto cosine = libm.function<double (*)(double)>("cos");
  EXPECT_EQ(cosine(0.0), 1.0);
  EXPECT_THROW(libm.function<void (*)()>("kjit_no_such_function"), Error);
}

TEST(LibraryCandidates, NamesFirstThenEachNameInEachSetDirectory) {
  EXPECT_EQ(
      library_candidates({"liba.so.1", "liba.so"}, {"/opt/x/lib", "", "/usr/lib"}),
      (std::vector<std::string>{"liba.so.1", "liba.so", "/opt/x/lib/liba.so.1",
                                "/opt/x/lib/liba.so", "/usr/lib/liba.so.1", "/usr/lib/liba.so"}));
}

TEST(VersionedDirectories, NewestVersionFirstAndOnlyDottedNumbers) {
  testing::TempDir opt;
  for (const char *name : {"rocm", "rocm-5.7.1", "rocm-6.10.0", "rocm-6.4.3", "rocm-6.4",
                           "rocm-6.4.3-rc1", "rocm-", "rocm-6..4", "rocm-7.", "hip-9.0"})
    std::filesystem::create_directory(opt / name);
  const std::string root = opt.path().string();
  EXPECT_EQ(versioned_directories(root, "rocm-", "lib"),
            (std::vector<std::string>{root + "/rocm-6.10.0/lib", root + "/rocm-6.4.3/lib",
                                      root + "/rocm-6.4/lib", root + "/rocm-5.7.1/lib"}));
  EXPECT_TRUE(versioned_directories(root + "/missing", "rocm-", "lib").empty());
}

TEST(DirectoryFromEnvironment, IsEmptyWhenTheVariableIsUnsetOrEmpty) {
  setenv("KJIT_TEST_PREFIX", "/opt/cuda", 1);
  EXPECT_EQ(directory_from_environment("KJIT_TEST_PREFIX", "lib64"), "/opt/cuda/lib64");
  setenv("KJIT_TEST_PREFIX", "", 1);
  EXPECT_EQ(directory_from_environment("KJIT_TEST_PREFIX", "lib64"), "");
  unsetenv("KJIT_TEST_PREFIX");
  EXPECT_EQ(directory_from_environment("KJIT_TEST_PREFIX", "lib64"), "");
}

} // namespace
} // namespace kjit::jit
