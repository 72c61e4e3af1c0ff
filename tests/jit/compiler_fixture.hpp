#pragma once
// What the hiprtc and NVRTC tests share: one compiler per suite, loaded once, and a skip with the
// loader's reason where the vendor library is not installed.
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "kjit/jit/elf.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>

namespace kjit::jit {

template <Vendor vendor> class CompilerTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    try {
      compiler_ = load_compiler(vendor);
    } catch (const Error &error) {
      unavailable_ = error.what();
    }
  }
  static void TearDownTestSuite() { compiler_.reset(); }

  void SetUp() override {
    if (!compiler_)
      GTEST_SKIP() << to_string(vendor) << " compiler not available: " << unavailable_;
  }

  const Compiler &compiler() const { return *compiler_; }

  static CompileRequest request(std::string program_name, std::string source,
                                std::string_view target,
                                std::vector<std::string> name_expressions = {},
                                std::vector<HeaderFile> headers = {},
                                std::vector<std::string> pre_includes = {}) {
    return CompileRequest{.program_name = std::move(program_name),
                          .source = std::move(source),
                          .pre_includes = std::move(pre_includes),
                          .headers = std::move(headers),
                          .include_dirs = {},
                          .name_expressions = std::move(name_expressions),
                          .options = {},
                          .target = Target::parse(target)};
  }

  // The Error that `compile` throws, failing the test when it throws none.
  static Error error_from(const std::function<void()> &compile) {
    try {
      compile();
    } catch (const Error &error) {
      return error;
    }
    ADD_FAILURE() << "no kjit::Error was thrown";
    return Error(Errc::compile_error, "(none thrown)");
  }

  static bool contains(const std::vector<std::string> &names, const std::string &name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  }

  static bool supports(const Compiler &compiler, const std::string &arch) {
    const auto &targets = compiler.supported_targets();
    return std::any_of(targets.begin(), targets.end(),
                       [&](const TargetSupport &target) { return target.arch == arch; });
  }

private:
  inline static std::unique_ptr<Compiler> compiler_;
  inline static std::string unavailable_;
};

// What differs between the compilers in tests that hold for both.
struct HiprtcTraits {
  static constexpr Vendor vendor = Vendor::amd;
  static constexpr std::string_view target = "gfx90a";
  static constexpr std::string_view extension = ".hip";
  // Where the log places an error: clang's "k.hip:3:10:" begins "k.hip:3:".
  static std::string location(const std::string &file, int line) {
    return file + ":" + std::to_string(line) + ":";
  }
};

struct NvrtcTraits {
  static constexpr Vendor vendor = Vendor::nvidia;
  static constexpr std::string_view target = "sm_90";
  static constexpr std::string_view extension = ".cu";
  static std::string location(const std::string &file, int line) {
    return file + "(" + std::to_string(line) + "): ";
  }
};

} // namespace kjit::jit
