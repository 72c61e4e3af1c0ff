// gemm_fp8_mfma and moe_gemm_mfma proven from their code objects, with no AMD GPU: for gfx942 and
// gfx950, in the variants kjit::ops::gemm_fp8_* and fused_moe pick, the kernel hiprtc built
// - issues the expected number of MFMAs per staged step of K, all of the expected form, and no
//   other: gemm_fp8_mfma (wave tile / 32 x 32) * 64 / 16 v_mfma_f32_32x32x16_fp8_fp8 on both
//   targets (the ISA reads its bytes as e4m3fnuz on gfx942, OCP e4m3 on gfx950);
//   moe_gemm_mfma twice that for the gated form (gate and up), v_mfma_f32_32x32x8_{f16,bf16} on
//   gfx942 and v_mfma_f32_32x32x16_{f16,bf16} on gfx950, per 32 of K;
// - uses no scratch, spills nothing, runs 64-lane waves and fits two waves per SIMD and two
//   blocks' LDS per compute unit (mfma_code_object::two_blocks_fit_without_spills);
// - reads global memory 16 bytes at a time, at least once per chunk of the staged tiles.
// Where hiprtc cannot compile for the target (ROCm 5.2) or no llvm-objdump is found, the test
// skips with the reason; `tools/test --rocm 6.4` and `--rocm 7.2` run it. The results are proven
// on the CPU emulator (tests/ops/emulated_fp8_moe_mfma.hpp), not here.
#include "ops/src/gemm_fp8_mfma.hpp"
#include "ops/src/moe_mfma.hpp"
#include "tests/ops/mfma_code_object.hpp"

#include <cstdio>
#include <gtest/gtest.h>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

struct Case {
  std::string target;
  std::string kernel; // "fp8": gemm_fp8_mfma; "half" or "bfloat16": moe_gemm_mfma
  int variant;        // fp8: SCALING; moe: GATED
  bool large;         // the wrapper's wide tiles (many rows), or its narrow ones
};

std::string describe(const Case &c) {
  return c.target + "_" + c.kernel + "_" + std::to_string(c.variant) +
         (c.large ? "_large" : "_small");
}

detail::ChosenVariant variant_of(const Case &c) {
  if (c.kernel == "fp8")
    return detail::gemm_fp8_mfma_variant(c.variant, c.large ? 4096 : 256, c.large ? 4096 : 256);
  // 304 compute units (an MI300X): 64 pairs take BLOCK_N 64, 65536 take 128.
  const int pairs = c.large ? 65536 : 64;
  return c.kernel == "half"
             ? detail::moe_mfma_variant<Half>(c.variant == 1, pairs, 8, 4096, 304)
             : detail::moe_mfma_variant<BFloat16>(c.variant == 1, pairs, 8, 4096, 304);
}

class Fp8MoeMfmaCodeObject : public ::testing::TestWithParam<Case> {};

TEST_P(Fp8MoeMfmaCodeObject, HasTheExpectedMfmasNoSpillsTwoWavesPerSimdAndWideLoads) {
  const Case &c = GetParam();
  const jit::Target target = jit::Target::parse(c.target);
  const detail::ChosenVariant variant = variant_of(c);
  const mfma_code_object::Inspection inspection = mfma_code_object::inspect(variant, target);
  if (!inspection.skip.empty())
    GTEST_SKIP() << inspection.skip;
  EXPECT_TRUE(mfma_code_object::two_blocks_fit_without_spills(inspection, target));
  const mfma_code_object::Disassembly &code = inspection.code;

  constexpr int threads = 256; // 2 x 2 waves
  // Each thread stages ceil(rows x k / 16 bytes / threads) chunks of each tile.
  const auto chunks = [](int rows, int k_bytes) {
    return (rows * k_bytes / 16 + threads - 1) / threads;
  };
  std::string form;
  int mfmas = 0, staged_chunks = 0;
  if (c.kernel == "fp8") {
    const int block_m = variant.integer("BLOCK_M"), block_n = variant.integer("BLOCK_N");
    form = "v_mfma_f32_32x32x16_fp8_fp8";
    mfmas = (block_m / 64) * (block_n / 64) * (64 / 16); // a step is 64 bytes of K
    staged_chunks = chunks(block_m, 64) + chunks(block_n, 64);
  } else {
    const int block_n = variant.integer("BLOCK_N"), halves = c.variant == 1 ? 2 : 1;
    const int k_per_mfma = c.target == "gfx950" ? 16 : 8;
    form =
        "v_mfma_f32_32x32x" + std::to_string(k_per_mfma) + (c.kernel == "half" ? "_f16" : "_bf16");
    mfmas = halves * 2 * (block_n / 64) * (32 / k_per_mfma); // a step is 32 elements of K
    staged_chunks = chunks(128, 64) + halves * chunks(block_n, 64);
  }
  EXPECT_EQ(code.count_starting(form), mfmas) << form;
  EXPECT_EQ(code.count_starting("v_mfma"), mfmas) << "MFMAs of another form";
  const int wide_loads =
      code.count_starting("global_load_dwordx4") + code.count_starting("buffer_load_dwordx4");
  EXPECT_GE(wide_loads, staged_chunks);

  // For BENCHMARKS.md: what the code object holds, in one line.
  const jit::KernelResources &resources = inspection.resources;
  std::printf(
      "[ figures  ] %s %s: %d x %s per step, VGPRs %u (the code names %d), AGPRs %u "
      "(names %d), SGPRs %u, LDS %llu bytes, scratch %llu, spills %u, wave %u, 16-byte "
      "global loads %d, ds_read_b64 %d\n",
      c.target.c_str(), variant.tmpl->bind(variant.params).expression(Vendor::amd).c_str(), mfmas,
      form.c_str(), resources.registers, code.vgprs, resources.agprs.value_or(0), code.agprs,
      resources.sgprs.value_or(0), static_cast<unsigned long long>(resources.shared_bytes),
      static_cast<unsigned long long>(resources.scratch_bytes), resources.spills.value_or(0),
      resources.wavefront_size.value_or(0), wide_loads, code.count_starting("ds_read_b64"));
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const char *target : {"gfx942", "gfx950"}) {
    for (int scaling : {0, 1, 2})
      for (bool large : {false, true})
        all.push_back({target, "fp8", scaling, large});
    for (const char *type : {"half", "bfloat16"})
      for (int gated : {0, 1})
        for (bool large : {false, true})
          all.push_back({target, type, gated, large});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(WrapperVariants, Fp8MoeMfmaCodeObject, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return describe(info.param); });

// The templates name the targets they are written for, rather than compiling something wrong:
// the fp8 encoding is the target's, so no other target may take them.
TEST_F(OpsCompileTest, Fp8AndMoeMfmaNameWhyNotForOtherTargets) {
  for (const char *name : {"gemm_fp8_mfma", "moe_gemm_mfma"})
    for (const char *target : {"gfx90a", "gfx9-4-generic", "gfx1100", "sm_90a"})
      EXPECT_TRUE(refused_before_compiling(name, target, "gfx942 or gfx950"))
          << name << " " << target;
}

} // namespace
} // namespace kjit::ops
