// gemm_mfma proven from its code objects, with no AMD GPU: for gfx942 and gfx950, in half and
// bfloat16, in the variants kjit::ops::gemm picks, the kernel that hiprtc built
// - issues the expected number of v_mfma per K-step (BLOCK_K) and no other MFMA: the code holds
//   one copy of the K-step's body, (wave tile / 32 x 32) * BLOCK_K / K MFMAs of the target's form
//   (v_mfma_f32_32x32x8_* on gfx942, K = 8; v_mfma_f32_32x32x16_* on gfx950, K = 16);
// - uses no scratch and spills nothing;
// - fits two waves per SIMD: VGPRs (aligned to 4) plus AGPRs at most 256 of the 512 a SIMD lane
//   holds (counting both, whether or not .vgpr_count already includes the AGPRs);
// - fits two blocks' LDS in a compute unit (64 KiB on gfx942, 160 KiB on gfx950);
// - reads global memory 16 bytes at a time (global_load_dwordx4 or buffer_load_dwordx4), at
//   least once per chunk of the staged tiles.
// The counts come from llvm-objdump's disassembly. Where hiprtc cannot compile for the target
// (ROCm 5.2) or no llvm-objdump is found, the test skips with the reason; `tools/test --rocm 6.4`
// runs it against ROCm 6.4. What this cannot prove without the GPU: the results (see
// tests/ops/emulated_gemm_mfma.hpp for the CPU emulation), the speed, and occupancy in practice.
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

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

// The newest llvm-objdump of ROCm (/opt/rocm/llvm) or of Debian's LLVM packages
// (/usr/lib/llvm-N), or "" when there is none.
std::string find_llvm_objdump() {
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

Disassembly parse(const std::string &text) {
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

struct Case {
  std::string target;
  std::string type; // "half" or "bfloat16"
  int mn;           // C is mn x mn: 256 picks 64 x 64 tiles, 4096 picks 128 x 128
};

std::string describe(const Case &c) { return c.target + "_" + c.type + "_" + std::to_string(c.mn); }

class GemmMfmaCodeObject : public ::testing::TestWithParam<Case> {};

TEST_P(GemmMfmaCodeObject, HasTheExpectedMfmasNoSpillsTwoWavesPerSimdAndWideLoads) {
  const Case &c = GetParam();
  const jit::Target target = jit::Target::parse(c.target);
  const detail::ChosenVariant variant = c.type == "half"
                                            ? detail::gemm_mfma_variant<Half>(c.mn, c.mn)
                                            : detail::gemm_mfma_variant<BFloat16>(c.mn, c.mn);
  kjit::testing::TempDir dir;
  Runtime runtime{kjit::testing::private_config(dir)};
  std::optional<CodeObject> object;
  try {
    object.emplace(runtime.compile(*variant.tmpl, variant.params, target));
  } catch (const Error &error) {
    if (error.code() != Errc::compiler_unavailable && error.code() != Errc::unsupported_target)
      throw;
    GTEST_SKIP() << "no hiprtc that compiles for " << c.target << ": " << error.summary();
  }
  const std::string objdump = find_llvm_objdump();
  if (objdump.empty())
    GTEST_SKIP() << "no llvm-objdump found (looked in /opt/rocm/llvm/bin and /usr/lib/llvm-*/bin)";
  ASSERT_TRUE(compile_testing::holds_its_kernel(*object, target));

  // The code object's own record of its resources.
  const auto all = jit::read_kernel_resources(object->code());
  ASSERT_TRUE(all.has_value()) << "no AMDGPU metadata in the code object";
  const auto found = std::find_if(all->begin(), all->end(), [&](const jit::KernelResources &r) {
    return r.symbol == object->lowered_name();
  });
  ASSERT_NE(found, all->end()) << "no metadata for " << object->lowered_name();
  const jit::KernelResources &resources = *found;
  EXPECT_EQ(resources.scratch_bytes, 0u);
  ASSERT_TRUE(resources.spills.has_value());
  EXPECT_EQ(*resources.spills, 0u);
  EXPECT_EQ(resources.wavefront_size, std::optional<std::uint32_t>(64));
  const std::uint32_t registers = (resources.registers + 3) / 4 * 4 + resources.agprs.value_or(0);
  EXPECT_LE(registers, 256u) << "VGPRs " << resources.registers << ", AGPRs "
                             << resources.agprs.value_or(0);
  const std::uint64_t lds_per_compute_unit = c.target == "gfx950" ? 160 * 1024 : 64 * 1024;
  EXPECT_LE(2 * resources.shared_bytes, lds_per_compute_unit);

  // The instructions.
  const auto file = dir / "kernel.co";
  std::ofstream(file, std::ios::binary)
      .write(reinterpret_cast<const char *>(object->code().data()),
             static_cast<std::streamsize>(object->code().size()));
  const std::string command =
      objdump + " -d --mcpu=" + target.arch() + " " + file.string() + " 2>&1";
  std::string text;
  if (FILE *pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      text.append(buffer, got);
    ASSERT_EQ(::pclose(pipe), 0) << command << ":\n" << text.substr(0, 2000);
  }
  const Disassembly code = parse(text);
  // The metadata's counts cover every register the code names.
  EXPECT_LE(code.vgprs, static_cast<int>(resources.registers));
  EXPECT_LE(code.agprs, static_cast<int>(resources.agprs.value_or(0)));

  const int block_m = variant.integer("BLOCK_M"), block_n = variant.integer("BLOCK_N");
  const int block_k = variant.integer("BLOCK_K"), waves_m = variant.integer("WAVES_M");
  const int waves_n = variant.integer("WAVES_N");
  const int k_per_mfma = c.target == "gfx950" ? 16 : 8;
  const std::string form =
      "v_mfma_f32_32x32x" + std::to_string(k_per_mfma) + (c.type == "half" ? "_f16" : "_bf16");
  const int expected_mfmas =
      (block_m / waves_m / 32) * (block_n / waves_n / 32) * (block_k / k_per_mfma);
  EXPECT_EQ(code.count_starting(form), expected_mfmas) << form;
  EXPECT_EQ(code.count_starting("v_mfma"), expected_mfmas) << "MFMAs of another form";

  // Each thread stages ceil(rows x columns / 8 / threads) 16-byte chunks of each tile.
  const int threads = 64 * waves_m * waves_n;
  const auto chunks = [&](int rows, int columns) {
    return (rows * columns / 8 + threads - 1) / threads;
  };
  const int wide_loads =
      code.count_starting("global_load_dwordx4") + code.count_starting("buffer_load_dwordx4");
  EXPECT_GE(wide_loads, chunks(block_m, block_k) + chunks(block_k, block_n));

  // For BENCHMARKS.md: what the code object holds, in one line.
  std::printf("[ figures  ] %s gemm_mfma<%s, %d, %d, %d, %d, %d>: %d x %s per K-step, "
              "VGPRs %u (the code names %d), AGPRs %u (names %d), LDS %llu bytes, scratch %llu, "
              "spills %u, 16-byte global loads %d, LDS reads ds_read_b64 %d, ds_read_b128 %d, "
              "ds_read2* %d\n",
              c.target.c_str(), c.type.c_str(), block_m, block_n, block_k, waves_m, waves_n,
              expected_mfmas, form.c_str(), resources.registers, code.vgprs,
              resources.agprs.value_or(0), code.agprs,
              static_cast<unsigned long long>(resources.shared_bytes),
              static_cast<unsigned long long>(resources.scratch_bytes), *resources.spills,
              wide_loads, code.count_starting("ds_read_b64"), code.count_starting("ds_read_b128"),
              code.count_starting("ds_read2"));
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const char *target : {"gfx942", "gfx950"})
    for (const char *type : {"half", "bfloat16"})
      for (int mn : {256, 4096})
        all.push_back({target, type, mn});
  return all;
}

INSTANTIATE_TEST_SUITE_P(WrapperVariants, GemmMfmaCodeObject, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return describe(info.param); });

// The template names the targets it is written for, rather than compiling something wrong.
TEST_F(OpsCompileTest, GemmMfmaNamesWhyNotForOtherTargets) {
  for (const char *target : {"gfx90a", "gfx9-4-generic", "sm_90"})
    EXPECT_TRUE(refused_before_compiling("gemm_mfma", target, "gfx942 or gfx950")) << target;
}

} // namespace
} // namespace kjit::ops
