#pragma once
// For the tests that prove AMD kernels from their code objects, with no AMD GPU
// (gemm_mfma_test.cpp, flash_attention_mfma_test.cpp): a built-in template's variant compiled by
// hiprtc for a target, its resources as its metadata records them, and its disassembly by
// llvm-objdump, counted by mnemonic.
#include "kjit/jit/kernel_resources.hpp"
#include "ops/src/variants.hpp"
#include "tests/ops/compile_support.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>

namespace kjit::ops::amd_code_object {

// The newest llvm-objdump of ROCm (/opt/rocm/llvm) or of Debian's LLVM packages
// (/usr/lib/llvm-N), or "" when there is none.
inline std::string find_llvm_objdump() {
  if (std::filesystem::exists("/opt/rocm/llvm/bin/llvm-objdump"))
    return "/opt/rocm/llvm/bin/llvm-objdump";
  std::string newest;
  int newest_version = 0;
  std::error_code error;
  for (const auto &entry : std::filesystem::directory_iterator("/usr/lib", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("llvm-", 0) != 0 || !std::filesystem::exists(entry.path() / "bin/llvm-objdump"))
      continue;
    const int version = std::atoi(name.c_str() + 5);
    if (version > newest_version) {
      newest_version = version;
      newest = (entry.path() / "bin/llvm-objdump").string();
    }
  }
  return newest;
}

// What a disassembly says about its instructions: how many of each mnemonic, and how many VGPRs
// and AGPRs it names (one past the highest number: v[0:3] names 4).
struct Disassembly {
  std::map<std::string, int> mnemonics;
  int vgprs = 0, agprs = 0;

  int count_starting(const std::string &prefix) const {
    int count = 0;
    for (const auto &[mnemonic, times] : mnemonics)
      if (mnemonic.rfind(prefix, 0) == 0)
        count += times;
    return count;
  }
};

inline Disassembly parse(const std::string &text) {
  Disassembly parsed;
  std::istringstream lines(text);
  std::string line;
  // Instruction lines are indented and start with a lower-case mnemonic ("\tv_mfma_...").
  const std::regex instruction(R"(^\s+([a-z][a-z0-9_]*)(\s|$))");
  const std::regex register_name(R"(\b([va])(?:\[(\d+):(\d+)\]|(\d+)\b))");
  for (std::smatch match; std::getline(lines, line);) {
    if (!std::regex_search(line, match, instruction))
      continue;
    ++parsed.mnemonics[match[1].str()];
    const std::string operands = line.substr(match.position(0) + match.length(0));
    for (std::sregex_iterator it(operands.begin(), operands.end(), register_name), end; it != end;
         ++it) {
      const int last = std::stoi((*it)[3].matched ? (*it)[3].str() : (*it)[4].str());
      int &highest = (*it)[1] == "v" ? parsed.vgprs : parsed.agprs;
      highest = std::max(highest, last + 1);
    }
  }
  return parsed;
}

// A variant's kernel as hiprtc built it: its resources and its instructions.
struct CompiledKernel {
  jit::KernelResources resources;
  Disassembly code;
};

// Compiles `variant` for `target` through a Runtime with a private cache and reads the kernel
// back. Sets `skip` (and returns nullopt) where no hiprtc compiles for the target (ROCm 5.2 lists
// neither gfx942 nor gfx950, and kjit refuses them before calling it) or no llvm-objdump is
// found; records a test failure (and returns nullopt) where the code object lacks the kernel or
// its metadata, or llvm-objdump fails.
inline std::optional<CompiledKernel> compile_and_read(const detail::ChosenVariant &variant,
                                                      const jit::Target &target,
                                                      std::string &skip) {
  kjit::testing::TempDir dir;
  Runtime runtime{kjit::testing::private_config(dir)};
  std::optional<CodeObject> object;
  try {
    object.emplace(runtime.compile(*variant.tmpl, variant.params, target));
  } catch (const Error &error) {
    if (error.code() != Errc::compiler_unavailable && error.code() != Errc::unsupported_target)
      throw;
    skip = "no hiprtc that compiles for " + target.id() + ": " + error.summary();
    return std::nullopt;
  }
  const std::string objdump = find_llvm_objdump();
  if (objdump.empty()) {
    skip = "no llvm-objdump found (looked in /opt/rocm/llvm/bin and /usr/lib/llvm-*/bin)";
    return std::nullopt;
  }
  const auto fail = [](const std::string &why) {
    ADD_FAILURE() << why;
    return std::nullopt;
  };
  if (const auto holds = compile_testing::holds_its_kernel(*object, target); !holds)
    return fail(holds.message());
  const auto all = jit::read_kernel_resources(object->code());
  if (!all)
    return fail("no AMDGPU metadata in the code object");
  const auto found = std::find_if(all->begin(), all->end(), [&](const jit::KernelResources &r) {
    return r.symbol == object->lowered_name();
  });
  if (found == all->end())
    return fail("no metadata for " + object->lowered_name());

  const auto file = dir / "kernel.co";
  std::ofstream(file, std::ios::binary)
      .write(reinterpret_cast<const char *>(object->code().data()),
             static_cast<std::streamsize>(object->code().size()));
  const std::string command =
      objdump + " -d --mcpu=" + target.arch() + " " + file.string() + " 2>&1";
  std::string text;
  FILE *pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return fail("cannot run " + command);
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    text.append(buffer, got);
  if (::pclose(pipe) != 0)
    return fail(command + ":\n" + text.substr(0, 2000));
  return CompiledKernel{*found, parse(text)};
}

// Bytes of LDS a compute unit of `target` holds: 64 KiB on gfx942, 160 KiB on gfx950.
inline std::uint64_t lds_per_compute_unit(const jit::Target &target) {
  return target.arch() == "gfx950" ? 160 * 1024 : 64 * 1024;
}

// No scratch and no spills, 64-lane wavefronts, VGPRs (aligned to 4) plus AGPRs within
// `registers` (256: two waves per SIMD, counting both whether or not .vgpr_count already includes
// the AGPRs), and metadata counts that cover every register the code names.
inline void expect_no_spills_on_wave64(const CompiledKernel &kernel, std::uint32_t registers) {
  const jit::KernelResources &resources = kernel.resources;
  EXPECT_EQ(resources.scratch_bytes, 0u);
  ASSERT_TRUE(resources.spills.has_value());
  EXPECT_EQ(*resources.spills, 0u);
  EXPECT_EQ(resources.wavefront_size, std::optional<std::uint32_t>(64));
  const std::uint32_t used = (resources.registers + 3) / 4 * 4 + resources.agprs.value_or(0);
  EXPECT_LE(used, registers) << "VGPRs " << resources.registers << ", AGPRs "
                             << resources.agprs.value_or(0);
  EXPECT_LE(kernel.code.vgprs, static_cast<int>(resources.registers));
  EXPECT_LE(kernel.code.agprs, static_cast<int>(resources.agprs.value_or(0)));
}

} // namespace kjit::ops::amd_code_object
