// Where load_hiprtc looks: ROCM_PATH alone when it is set, and the comgr beside the hiprtc found.
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "tests/support/scoped_environment.hpp"
#include "tests/support/temp_dir.hpp"
#include "vendor_compilers.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

namespace kjit::jit {
namespace {

namespace fs = std::filesystem;

// Set in the parent for the child process that EXPECT_EXIT starts, which runs this test again.
constexpr const char *fake_rocm_variable = "KJIT_TEST_FAKE_ROCM";

// "libamdhip64.so.5" from "libamdhip64.so.5.2.21153": the name the loader searches for.
std::string soname_of(const std::string &file) {
  const std::size_t so = file.find(".so.");
  return file.substr(0, file.find('.', so + 4));
}

// An installation as AMD lays one out: each library's file with its soname as a link to it. The
// files are hard links (copies where linking fails), so their real paths stay in `lib`.
void install_like_rocm(const std::string &library, const fs::path &lib) {
  const fs::path file = lib / fs::path(library).filename();
  std::error_code error;
  fs::create_hard_link(library, file, error);
  if (error)
    fs::copy_file(library, file);
  fs::create_symlink(file.filename(), lib / soname_of(file.filename().string()));
}

// Runs in a fresh process, where no hiprtc is loaded yet: loads through ROCM_PATH, compiles, and
// exits 0 only when both libraries named, and every comgr mapped, come from the fake installation.
[[noreturn]] void load_and_compile_from(const std::string &rocm) {
  ::setenv("ROCM_PATH", rocm.c_str(), 1);
  const std::string lib = rocm + "/lib/";
  int failures = 0;
  try {
    std::unique_ptr<Compiler> hiprtc = load_hiprtc();
    for (const std::string &file : hiprtc->library_files())
      if (!file.starts_with(lib)) {
        std::cerr << "loaded " << file << ", not from " << lib << "\n";
        ++failures;
      }
    hiprtc->compile(
        CompileRequest{.program_name = "k.hip",
                       .source = "extern \"C\" __global__ void k(float *x) { *x = 2; }\n",
                       .pre_includes = {},
                       .headers = {},
                       .name_expressions = {},
                       .options = {},
                       .target = Target::parse(hiprtc->supported_targets().front().arch)});
  } catch (const Error &error) {
    std::cerr << error.what() << "\n";
    std::exit(1);
  }
  std::ifstream maps("/proc/self/maps");
  int comgr_mappings = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.find("libamd_comgr") != std::string::npos) {
      ++comgr_mappings;
      if (line.find(lib) == std::string::npos) {
        std::cerr << "hiprtc compiled with another comgr: " << line << "\n";
        ++failures;
      }
    }
  if (comgr_mappings == 0) {
    std::cerr << "no comgr is mapped after a compile\n";
    ++failures;
  }
  std::exit(failures == 0 ? 0 : 1);
}

TEST(HiprtcLoader, RocmPathInstallationIsLoadedWithItsOwnComgr) {
  // The child process re-executes this test, so nothing is loaded in it yet; it finds the fake
  // installation through fake_rocm_variable and runs the one EXPECT_EXIT below.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::optional<testing::TempDir> rocm;
  testing::ScopedEnvironment environment;
  if (std::getenv(fake_rocm_variable) == nullptr) {
    std::vector<std::string> host_files;
    try {
      host_files = load_hiprtc()->library_files();
    } catch (const Error &error) {
      GTEST_SKIP() << "hiprtc not available: " << error.what();
    }
    rocm.emplace();
    fs::create_directories(*rocm / "lib");
    for (const std::string &file : host_files)
      install_like_rocm(file, *rocm / "lib");
    environment.set(fake_rocm_variable, rocm->path().c_str());
  }
  EXPECT_EXIT(load_and_compile_from(std::getenv(fake_rocm_variable)), ::testing::ExitedWithCode(0),
              "");
}

TEST(HiprtcLoader, RocmPathWithoutHiprtcIsAnErrorNotAFallback) {
  testing::TempDir rocm;
  fs::create_directories(rocm / "lib");
  testing::ScopedEnvironment environment;
  environment.set("ROCM_PATH", rocm.path().c_str());
  try {
    load_hiprtc();
    FAIL() << "a hiprtc was loaded from outside an empty ROCM_PATH";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::compiler_unavailable);
    EXPECT_EQ(error.summary(),
              "ROCM_PATH is set but " + (rocm / "lib").string() + " holds no hiprtc");
    EXPECT_NE(error.detail().find((rocm / "lib" / "libhiprtc.so.6").string() + ": "),
              std::string::npos)
        << error.detail();
  }
}

} // namespace
} // namespace kjit::jit
