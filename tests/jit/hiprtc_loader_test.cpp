// Where load_hiprtc looks: ROCM_PATH alone when it is set, and the comgr beside the hiprtc found.
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "tests/support/scoped_environment.hpp"
#include "tests/support/temp_dir.hpp"
#include "vendor_compilers.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <dlfcn.h>
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
void install_as(const std::string &library, const fs::path &file) {
  std::error_code error;
  fs::create_hard_link(library, file, error);
  if (error)
    fs::copy_file(library, file);
}
void install_like_rocm(const std::string &library, const fs::path &lib) {
  const fs::path file = lib / fs::path(library).filename();
  install_as(library, file);
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
                       .include_dirs = {},
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

// Runs in a fresh process: loading through ROCM_PATH, whose hiprtc has no comgr there nor on the
// loader's path, must fail naming both places searched. Exits 0 when it does.
[[noreturn]] void expect_missing_comgr(const std::string &rocm, const std::string &comgr) {
  ::setenv("ROCM_PATH", rocm.c_str(), 1);
  try {
    load_hiprtc();
    std::cerr << "hiprtc was loaded without " << comgr << "\n";
  } catch (const Error &error) {
    const std::string beside = rocm + "/lib/" + comgr;
    if (error.code() == Errc::compiler_unavailable &&
        error.summary().ends_with("was found without its comgr (searched " + beside + ", then " +
                                  comgr + ")") &&
        error.detail().find("  " + beside + ": ") != std::string::npos &&
        error.detail().find("\n  " + comgr + ": ") != std::string::npos)
      std::exit(0);
    std::cerr << error.what() << "\n" << error.detail() << "\n";
  }
  std::exit(1);
}

// The real hiprtc, installed under the name of a release whose comgr this system lacks (ROCm 7's
// comgr 3 on Debian 12, ROCm 5's comgr 2 in a ROCm 6 or 7 root), so that neither the directory of
// the hiprtc nor the loader's path has its comgr.
TEST(HiprtcLoader, HiprtcWithoutItsComgrNamesBothFilesSearched) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  constexpr const char *missing_variable = "KJIT_TEST_MISSING_COMGR";
  std::optional<testing::TempDir> rocm;
  testing::ScopedEnvironment environment;
  if (std::getenv(missing_variable) == nullptr) {
    std::string hiprtc_file;
    try {
      for (const std::string &file : load_hiprtc()->library_files())
        if (file.find("comgr") == std::string::npos)
          hiprtc_file = file;
    } catch (const Error &error) {
      GTEST_SKIP() << "hiprtc not available: " << error.what();
    }
    std::optional<std::pair<int, std::string>> absent; // a release and its comgr's soname
    for (const auto &[release, comgr] :
         {std::pair{7, "libamd_comgr.so.3"}, {5, "libamd_comgr.so.2"}})
      if (void *handle = dlopen(comgr, RTLD_NOW | RTLD_LOCAL)) {
        dlclose(handle);
      } else {
        absent.emplace(release, comgr);
        break;
      }
    if (!absent)
      GTEST_SKIP() << "this system has both comgr 2 and comgr 3";
    rocm.emplace();
    const fs::path lib = *rocm / "lib";
    fs::create_directories(lib);
    const std::string name = "libhiprtc.so." + std::to_string(absent->first);
    install_as(hiprtc_file, lib / (name + ".0.0"));
    fs::create_symlink(name + ".0.0", lib / name);
    environment.set(missing_variable, (rocm->path().string() + ":" + absent->second).c_str());
  }
  const std::string given = std::getenv(missing_variable);
  const std::size_t colon = given.rfind(':');
  EXPECT_EXIT(expect_missing_comgr(given.substr(0, colon), given.substr(colon + 1)),
              ::testing::ExitedWithCode(0), "");
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
