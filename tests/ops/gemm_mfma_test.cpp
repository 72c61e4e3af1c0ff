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
#include "ops/src/variants.hpp"
#include "tests/ops/amd_code_object.hpp"
#include "tests/ops/compile_support.hpp"

#include <cstdio>
#include <gtest/gtest.h>
#include <string>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

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
  std::string skip;
  const auto kernel = amd_code_object::compile_and_read(variant, target, skip);
  if (!skip.empty())
    GTEST_SKIP() << skip;
  ASSERT_TRUE(kernel.has_value());
  amd_code_object::expect_no_spills_on_wave64(*kernel, 256);
  const jit::KernelResources &resources = kernel->resources;
  const amd_code_object::Disassembly &code = kernel->code;
  EXPECT_LE(2 * resources.shared_bytes, amd_code_object::lds_per_compute_unit(target));

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
