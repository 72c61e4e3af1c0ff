#pragma once
// For the operators' CPU tests: compiles a built-in template's variant for a target through a
// Runtime with a private cache, and checks the code object the way a loader would see it.
#include "kjit/jit/elf.hpp"
#include "kjit/kjit.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <cstdint>
#include <gtest/gtest.h>
#include <string>

namespace kjit::ops::compile_testing {

// Passes when `object` is an ELF code object for `target`'s vendor holding the kernel's symbol:
// what a loader would see, not the compiler's return code.
inline ::testing::AssertionResult holds_its_kernel(const CodeObject &object,
                                                   const jit::Target &target) {
  const auto elf = jit::read_elf(object.code());
  if (!elf)
    return ::testing::AssertionFailure() << object.expression() << ": not an ELF code object";
  const std::uint16_t machine =
      target.vendor() == Vendor::amd ? jit::elf_machine_amdgpu : jit::elf_machine_cuda;
  if (elf->machine != machine)
    return ::testing::AssertionFailure()
           << object.expression() << ": ELF machine " << elf->machine << ", expected " << machine;
  if (std::find(elf->symbols.begin(), elf->symbols.end(), object.lowered_name()) ==
      elf->symbols.end())
    return ::testing::AssertionFailure()
           << object.expression() << ": no symbol " << object.lowered_name();
  return ::testing::AssertionSuccess();
}

class OpsCompileTest : public ::testing::Test {
protected:
  // Compiles `params` of the built-in template `name` for `target` and checks its code object
  // (holds_its_kernel). A missing compiler (hiprtc or NVRTC not installed) skips the calling test.
  ::testing::AssertionResult compiles(const std::string &name, const ParamValues &params,
                                      const std::string &target) {
    const jit::Target parsed = jit::Target::parse(target);
    return holds_its_kernel(runtime_.compile(templates::find(name), params, parsed), parsed);
  }

  // Passes when compiling `params` of `name` for `target` fails with a compile error whose log
  // holds `message` (a static_assert or #error of the template).
  ::testing::AssertionResult refuses_to_compile(const std::string &name, const ParamValues &params,
                                                const std::string &target,
                                                const std::string &message) {
    try {
      runtime_.compile(templates::find(name), params, jit::Target::parse(target));
    } catch (const Error &error) {
      if (error.code() == Errc::compile_error && error.detail().find(message) != std::string::npos)
        return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << error.summary() << "\n" << error.detail();
    }
    return ::testing::AssertionFailure() << name << " compiled for " << target;
  }

  // Passes when `name` refuses `target` before compiling, as a template written for other targets
  // does (Template::targets), naming what it builds for.
  ::testing::AssertionResult refused_before_compiling(const std::string &name,
                                                      const std::string &target,
                                                      const std::string &builds_for) {
    try {
      runtime_.compile(templates::find(name), {}, jit::Target::parse(target));
    } catch (const Error &error) {
      if (error.code() == Errc::unsupported_target &&
          error.summary() == "template " + name + " builds only for " + builds_for + ", not " +
                                 jit::Target::parse(target).arch())
        return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << error.summary();
    }
    return ::testing::AssertionFailure() << name << " compiled for " << target;
  }

  void SetUp() override {
    for (Vendor vendor : {Vendor::amd, Vendor::nvidia}) {
      try {
        runtime_.compiler(vendor);
      } catch (const Error &error) {
        GTEST_SKIP() << "a compiler is not available: " << error.summary();
      }
    }
  }

private:
  kjit::testing::TempDir dir_;
  Runtime runtime_{kjit::testing::private_config(dir_)};
};

} // namespace kjit::ops::compile_testing
