#pragma once
// For the operators' CPU tests: compiles a built-in template's variant for a target through a
// Runtime with a private cache, and checks the code object the way a loader would see it.
#include "kjit/jit/compiler.hpp"
#include "kjit/jit/elf.hpp"
#include "kjit/kjit.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <cstdint>
#include <gtest/gtest.h>
#include <memory>
#include <regex>
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

// NVRTC where it is installed, else null (the calling test skips).
inline std::unique_ptr<jit::Compiler> nvrtc_or_null() {
  try {
    return jit::load_compiler(Vendor::nvidia);
  } catch (const Error &) {
    return nullptr;
  }
}

// A compiler that hands every request to `inner` with ptxas's -v report asked for, and keeps the
// last log: what ptxas says of a variant a Runtime compiles as it compiles any other.
class PtxasReporting : public jit::Compiler {
public:
  explicit PtxasReporting(const jit::Compiler &inner) : inner_(inner) {}
  Vendor vendor() const override { return inner_.vendor(); }
  std::string_view name() const override { return inner_.name(); }
  const std::string &identity() const override { return inner_.identity(); }
  std::vector<std::pair<std::string, std::string>> environment() const override {
    return inner_.environment();
  }
  const std::vector<jit::TargetSupport> &supported_targets() const override {
    return inner_.supported_targets();
  }
  jit::CompileResult compile(const jit::CompileRequest &request) const override {
    jit::CompileRequest verbose = request;
    verbose.options.push_back("--ptxas-options=-v");
    jit::CompileResult result = inner_.compile(verbose);
    last_log_ = result.log;
    return result;
  }
  const std::string &last_log() const { return last_log_; }

private:
  const jit::Compiler &inner_;
  mutable std::string last_log_;
};

// ptxas's -v report for `instance` compiled for `target` by `nvrtc` through a Runtime with a cache
// of its own (so that it compiles), as kjit compiles every variant.
inline std::string ptxas_report(const jit::Compiler &nvrtc, const Instance &instance,
                                const jit::Target &target) {
  const PtxasReporting reporting(nvrtc);
  const kjit::testing::TempDir dir;
  Config config = kjit::testing::private_config(dir);
  config.compilers = [&reporting](Vendor) -> const jit::Compiler & { return reporting; };
  Runtime(config).compile(instance.source_template(), instance.values(), target);
  return reporting.last_log();
}

// Passes when ptxas, compiling `instance` for `target` (sm_90a unless said) through `nvrtc` as
// kjit does plus --ptxas-options=-v, reports no serialised wgmma (warning C7510, or C7512 where
// registers run short: the kernel then runs far slower), no ignored setmaxnreg (C7508), no spills
// and no stack frame: what it reports in its log only, without failing.
inline ::testing::AssertionResult
wgmma_compiles_cleanly(const jit::Compiler &nvrtc, const Instance &instance,
                       const jit::Target &target = jit::Target::parse("sm_90a")) {
  const std::string log = ptxas_report(nvrtc, instance, target);
  const auto failure = [&](const char *what) {
    return ::testing::AssertionFailure()
           << what << ": " << instance.expression(Vendor::nvidia) << " for " << target.id() << "\n"
           << log;
  };
  if (log.find("C7510") != std::string::npos ||
      log.find("wgmma.mma_async instructions are serialized") != std::string::npos)
    return failure("wgmma serialised");
  if (log.find("C7508") != std::string::npos)
    return failure("setmaxnreg ignored");
  static const std::regex spills(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::smatch found;
  if (!std::regex_search(log, found, spills))
    return failure("no ptxas -v report");
  if (found[1].str() != "0" || found[2].str() != "0")
    return failure("spills");
  if (log.find("0 bytes stack frame") == std::string::npos)
    return failure("a stack frame");
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
