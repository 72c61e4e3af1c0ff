#pragma once
// For the tests that prove AMD matrix-core kernels from their code objects, with no AMD GPU
// (gemm_mfma_test.cpp, fp8_moe_mfma_code_object_test.cpp): a variant compiled by hiprtc through a
// Runtime with a private cache, its AMDGPU metadata read back, and llvm-objdump's disassembly
// counted by mnemonic and register.
#include "kjit/jit/kernel_resources.hpp"
#include "ops/src/variants.hpp"
#include "tests/ops/compile_support.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kjit::ops::mfma_code_object {

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

// A compiled variant as its code object records it: the kernel's resources and its instructions.
// `skip` says why there is none where that is no defect: no hiprtc that compiles for the target
// (ROCm 5.2 for gfx942 and gfx950), no llvm-objdump.
struct Inspection {
  std::string skip;
  jit::KernelResources resources;
  Disassembly code;
};

// Compiles `variant` for `target`; throws std::runtime_error for what is a defect (no kernel in
// the code object, no metadata for it, llvm-objdump failing).
inline Inspection inspect(const detail::ChosenVariant &variant, const jit::Target &target) {
  kjit::testing::TempDir dir;
  Runtime runtime{kjit::testing::private_config(dir)};
  std::optional<CodeObject> object;
  Inspection inspection;
  try {
    object.emplace(runtime.compile(*variant.tmpl, variant.params, target));
  } catch (const Error &error) {
    if (error.code() != Errc::compiler_unavailable && error.code() != Errc::unsupported_target)
      throw;
    inspection.skip = "no hiprtc that compiles for " + target.id() + ": " + error.summary();
    return inspection;
  }
  const std::string objdump = find_llvm_objdump();
  if (objdump.empty()) {
    inspection.skip =
        "no llvm-objdump found (looked in /opt/rocm/llvm/bin and /usr/lib/llvm-*/bin)";
    return inspection;
  }
  if (const auto held = compile_testing::holds_its_kernel(*object, target); !held)
    throw std::runtime_error(held.message());
  const auto all = jit::read_kernel_resources(object->code());
  if (!all)
    throw std::runtime_error("no AMDGPU metadata in the code object");
  const auto found = std::find_if(all->begin(), all->end(), [&](const jit::KernelResources &r) {
    return r.symbol == object->lowered_name();
  });
  if (found == all->end())
    throw std::runtime_error("no metadata for " + object->lowered_name());
  inspection.resources = *found;

  const auto file = dir / "kernel.co";
  std::ofstream(file, std::ios::binary)
      .write(reinterpret_cast<const char *>(object->code().data()),
             static_cast<std::streamsize>(object->code().size()));
  const std::string command =
      objdump + " -d --mcpu=" + target.arch() + " " + file.string() + " 2>&1";
  std::string text;
  FILE *pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr)
    throw std::runtime_error("cannot run " + command);
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    text.append(buffer, got);
  if (::pclose(pipe) != 0)
    throw std::runtime_error(command + ":\n" + text.substr(0, 2000));
  inspection.code = parse(text);
  return inspection;
}

// Passes when the kernel uses no scratch and spills nothing, runs 64-lane waves, its VGPRs
// (aligned to 4) plus AGPRs are at most `registers` (256: two waves per SIMD; 512: one), counting
// both whether or not .vgpr_count already includes the AGPRs, and its metadata's register counts
// cover every register the code names.
inline ::testing::AssertionResult no_spills_on_wave64(const Inspection &inspection,
                                                      std::uint32_t registers) {
  const jit::KernelResources &r = inspection.resources;
  const std::uint32_t used = (r.registers + 3) / 4 * 4 + r.agprs.value_or(0);
  std::string wrong;
  if (r.scratch_bytes != 0)
    wrong += " scratch " + std::to_string(r.scratch_bytes) + " bytes;";
  if (!r.spills || *r.spills != 0)
    wrong += r.spills ? " " + std::to_string(*r.spills) + " spills;" : " no spill count;";
  if (r.wavefront_size != std::optional<std::uint32_t>(64))
    wrong += " not 64-lane waves;";
  if (used > registers)
    wrong += " VGPRs " + std::to_string(r.registers) + " and AGPRs " +
             std::to_string(r.agprs.value_or(0)) + " exceed " + std::to_string(registers) + ";";
  if (inspection.code.vgprs > static_cast<int>(r.registers) ||
      inspection.code.agprs > static_cast<int>(r.agprs.value_or(0)))
    wrong += " the code names more registers than the metadata counts;";
  if (wrong.empty())
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << wrong;
}

// Bytes of LDS a compute unit of `target` holds: 64 KiB on gfx942, 160 KiB on gfx950.
inline std::uint64_t lds_per_compute_unit(const jit::Target &target) {
  return target.arch() == "gfx950" ? 160 * 1024 : 64 * 1024;
}

// no_spills_on_wave64 with two waves per SIMD (256 registers), and two blocks' LDS fitting a
// compute unit.
inline ::testing::AssertionResult two_blocks_fit_without_spills(const Inspection &inspection,
                                                                const jit::Target &target) {
  ::testing::AssertionResult fits = no_spills_on_wave64(inspection, 256);
  const std::uint64_t lds = inspection.resources.shared_bytes;
  if (2 * lds > lds_per_compute_unit(target))
    return ::testing::AssertionFailure()
           << target.id() << ": LDS " << lds << " bytes exceeds half a compute unit's;"
           << (fits ? "" : fits.message());
  if (!fits)
    return ::testing::AssertionFailure() << target.id() << ":" << fits.message();
  return fits;
}

} // namespace kjit::ops::mfma_code_object
