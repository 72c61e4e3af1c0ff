// flash_attention_mfma proven from its code objects, with no AMD GPU: for gfx942 and gfx950, in
// half and bfloat16, head dim 64 and 128, causal and not, k and v contiguous or paged, in the
// variants kjit::ops::flash_attention and flash_attention_paged launch there, the kernel that
// hiprtc built
// - issues, per tile of keys, the MFMAs of S^T = K Q^T and O^T += V^T P^T and no other MFMA: the
//   key loop is not unrolled, so the code holds one tile's, (HEAD_DIM / K) x (BLOCK_N / 32) plus
//   (BLOCK_N / K) x (HEAD_DIM / 32) of the target's 32 x 32 form (v_mfma_f32_32x32x8_* on gfx942,
//   K = 8; v_mfma_f32_32x32x16_* on gfx950, K = 16);
// - computes its softmax with v_exp_f32 (exp2) and no other exponential;
// - uses no scratch and spills nothing, on 64-lane wavefronts, within two waves per SIMD (VGPRs
//   and AGPRs at most 256);
// - uses the LDS its tuning rule declares, and two blocks' of it fit a compute unit (64 KiB on
//   gfx942, 160 KiB on gfx950);
// - stages k and v with 16-byte global loads, at least one per chunk a thread stages per tile.
// Where hiprtc cannot compile for the target (ROCm 5.2) or no llvm-objdump is found, the test
// skips with the reason; `tools/test --rocm 6.4` (and 7.2) runs it. What this cannot prove without
// the GPU: the results (tests/ops/emulated_flash_attention_mfma.hpp runs the kernel on the CPU),
// the speed and occupancy in practice.
#include "kjit/ops/flash_attention.hpp"
#include "ops/src/flash_attention_mfma.hpp"
#include "ops/src/flash_attention_variant.hpp"
#include "tests/ops/compile_support.hpp"
#include "tests/ops/mfma_code_object.hpp"

#include <cstdio>
#include <gtest/gtest.h>
#include <string>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

struct Case {
  std::string target;
  std::string type; // "half" or "bfloat16"
  int head_dim;
  bool causal;
  bool paged; // flash_attention_paged's variant (PAGED 1)
};

std::string describe(const Case &c) {
  return c.target + "_" + c.type + "_" + std::to_string(c.head_dim) +
         (c.causal ? "_causal" : "_full") + (c.paged ? "_paged" : "");
}

AttentionShape shape_of(const Case &c) {
  return {.batch = 1,
          .total_q = 1,
          .total_k = 1,
          .max_seqlen_q = 1,
          .q_heads = 1,
          .kv_heads = 1,
          .head_dim = c.head_dim,
          .causal = c.causal,
          .scale = 0.125f};
}

class FlashAttentionMfmaCodeObject : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttentionMfmaCodeObject, HasOneTilesMfmasExp2NoSpillsTwoWavesPerSimdAndWideLoads) {
  const Case &c = GetParam();
  const jit::Target target = jit::Target::parse(c.target);
  // What the wrappers launch on this target (flash_attention_paged's for pages of either size).
  const auto chosen = [&]<Element T>() {
    return c.paged ? detail::flash_attention_paged_variant<T>(shape_of(c), 16, target)
                   : detail::flash_attention_variant<T>(target, shape_of(c));
  };
  const detail::ChosenVariant variant =
      c.type == "half" ? chosen.operator()<Half>() : chosen.operator()<BFloat16>();
  ASSERT_EQ(variant.tmpl->name(), "flash_attention_mfma");
  const mfma_code_object::Inspection inspection = mfma_code_object::inspect(variant, target);
  if (!inspection.skip.empty())
    GTEST_SKIP() << inspection.skip;
  EXPECT_TRUE(mfma_code_object::two_blocks_fit_without_spills(inspection, target));
  const jit::KernelResources &resources = inspection.resources;
  const mfma_code_object::Disassembly &code = inspection.code;
  EXPECT_EQ(static_cast<std::int64_t>(resources.shared_bytes),
            variant.tmpl->tuning().shared_bytes(variant.tmpl->bind(variant.params)));

  const int block_n = variant.integer("BLOCK_N"), waves = variant.integer("WAVES");
  const int k_per_mfma = c.target == "gfx950" ? 16 : 8;
  const std::string form =
      "v_mfma_f32_32x32x" + std::to_string(k_per_mfma) + (c.type == "half" ? "_f16" : "_bf16");
  const int scores_mfmas = (c.head_dim / k_per_mfma) * (block_n / 32);
  const int output_mfmas = (block_n / k_per_mfma) * (c.head_dim / 32);
  EXPECT_EQ(code.count_starting(form), scores_mfmas + output_mfmas) << form;
  EXPECT_EQ(code.count_starting("v_mfma"), scores_mfmas + output_mfmas) << "MFMAs of another form";
  EXPECT_GE(code.count_starting("v_exp_f32"), 1);
  EXPECT_EQ(code.count_starting("v_exp"), code.count_starting("v_exp_f32"));

  // Each thread stages ceil(BLOCK_N x HEAD_DIM / 8 / threads) 16-byte chunks of k and of v.
  const int chunks = (block_n * c.head_dim / 8 + 64 * waves - 1) / (64 * waves);
  const int wide_loads =
      code.count_starting("global_load_dwordx4") + code.count_starting("buffer_load_dwordx4");
  EXPECT_GE(wide_loads, 2 * chunks);

  // For BENCHMARKS.md: what the code object holds, in one line.
  std::printf("[ figures  ] %s flash_attention_mfma<%s, %d, %d, %d, %d, %d>: %d + %d x %s per key "
              "tile, v_exp_f32 %d, VGPRs %u (the code names %d), AGPRs %u (names %d), SGPRs %u, "
              "LDS %llu bytes, scratch %llu, spills %u, 16-byte global loads %d, "
              "LDS reads ds_read_b64 %d, ds_read_b128 %d, ds_read2* %d\n",
              c.target.c_str(), c.type.c_str(), c.head_dim, c.causal ? 1 : 0, block_n, waves,
              variant.integer("PAGED"), scores_mfmas, output_mfmas, form.c_str(),
              code.count_starting("v_exp_f32"), resources.registers, code.vgprs,
              resources.agprs.value_or(0), code.agprs, resources.sgprs.value_or(0),
              static_cast<unsigned long long>(resources.shared_bytes),
              static_cast<unsigned long long>(resources.scratch_bytes),
              resources.spills.value_or(0), wide_loads, code.count_starting("ds_read_b64"),
              code.count_starting("ds_read_b128"), code.count_starting("ds_read2"));
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const char *target : {"gfx942", "gfx950"})
    for (const char *type : {"half", "bfloat16"})
      for (int head_dim : {64, 128})
        for (bool causal : {false, true})
          for (bool paged : {false, true})
            all.push_back({target, type, head_dim, causal, paged});
  return all;
}

INSTANTIATE_TEST_SUITE_P(WrapperVariants, FlashAttentionMfmaCodeObject,
                         ::testing::ValuesIn(cases()),
                         [](const auto &info) { return describe(info.param); });

// The tuning rule lets a tuner try only the tiles that fit a thread's registers (the next test
// compiles those).
TEST(FlashAttentionMfmaTunables, TheRuleRefusesTilesThatWouldSpill) {
  const Template &tmpl = templates::find("flash_attention_mfma");
  const auto why = [&](int head_dim, int block_n, int waves) {
    return tmpl.tuning().fits(
        tmpl.bind({{"HEAD_DIM", head_dim}, {"BLOCK_N", block_n}, {"WAVES", waves}}), "gfx942");
  };
  EXPECT_EQ(why(64, 32, 1), "");
  EXPECT_EQ(why(64, 64, 2), "");
  EXPECT_EQ(why(128, 32, 2), "");
  EXPECT_EQ(why(128, 64, 4), "head dim 128 takes BLOCK_N 32: 64-key tiles spill");
  EXPECT_EQ(why(64, 64, 1), "a thread would stage 8 16-byte chunks of k and of v, more than 4 "
                            "(more WAVES or a smaller BLOCK_N)");
  EXPECT_NE(why(128, 32, 1), "");
  EXPECT_NE(why(128, 64, 2), "");
}

// Every combination of the tunables the rule lets a tuner try (BLOCK_N, WAVES), contiguous and
// paged, in bfloat16 under CAUSAL (the most registers of the wrapper's variants): no scratch, no
// spills, 64-lane waves, at most the 512 VGPRs and AGPRs a lane may have.
TEST(FlashAttentionMfmaTunables, NoneThatFitsSpills) {
  const Template &tmpl = templates::find("flash_attention_mfma");
  for (const char *name : {"gfx942", "gfx950"})
    for (int head_dim : {64, 128})
      for (int block_n : {32, 64})
        for (int waves : {1, 2, 4})
          for (int paged : {0, 1}) {
            const detail::ChosenVariant variant{&tmpl,
                                                {{"T", "bfloat16"},
                                                 {"HEAD_DIM", head_dim},
                                                 {"CAUSAL", 1},
                                                 {"BLOCK_N", block_n},
                                                 {"WAVES", waves},
                                                 {"PAGED", paged}}};
            if (!tmpl.tuning().fits(tmpl.bind(variant.params), name).empty())
              continue;
            SCOPED_TRACE(std::string(name) + ", head dim " + std::to_string(head_dim) +
                         ", BLOCK_N " + std::to_string(block_n) + ", WAVES " +
                         std::to_string(waves) + ", PAGED " + std::to_string(paged));
            const mfma_code_object::Inspection inspection =
                mfma_code_object::inspect(variant, jit::Target::parse(name));
            if (!inspection.skip.empty())
              GTEST_SKIP() << inspection.skip;
            EXPECT_TRUE(mfma_code_object::no_spills_on_wave64(inspection, 512));
            std::printf("[ figures  ] %s flash_attention_mfma<bfloat16, %d, 1, %d, %d, %d>: VGPRs "
                        "%u, AGPRs %u, LDS %llu bytes\n",
                        name, head_dim, block_n, waves, paged, inspection.resources.registers,
                        inspection.resources.agprs.value_or(0),
                        static_cast<unsigned long long>(inspection.resources.shared_bytes));
          }
}

// Every AMD target gets flash_attention_mfma, whose template names the two it builds for before
// compiling anything for another (issue 27 item 4).
TEST(FlashAttentionMfmaVariant, EveryAmdTargetGetsTheMfmaTemplate) {
  for (const char *target : {"gfx942", "gfx950", "gfx90a", "gfx1100"})
    for (bool causal : {false, true}) {
      const Case c{target, "half", 128, causal, false};
      const auto variant =
          detail::flash_attention_variant<Half>(jit::Target::parse(target), shape_of(c));
      EXPECT_EQ(variant.tmpl->name(), "flash_attention_mfma") << target;
      EXPECT_EQ(variant.integer("CAUSAL"), causal ? 1 : 0);
      EXPECT_EQ(variant.integer("BLOCK_N"), 32);
      EXPECT_EQ(variant.integer("WAVES"), 4);
      // The launch: 32 rows a wave, 64 lanes a wave.
      const detail::MfmaAttentionGeometry geometry = detail::flash_attention_mfma_geometry(variant);
      EXPECT_EQ(geometry.block_m, 128);
      EXPECT_EQ(geometry.block_n, 32);
      EXPECT_EQ(geometry.threads, 256);
    }
  const Case c{"gfx942", "bfloat16", 64, false, false};
  EXPECT_EQ(detail::flash_attention_variant<BFloat16>(jit::Target::parse("gfx942"), shape_of(c))
                .integer("BLOCK_N"),
            64);
}

// flash_attention_paged on every AMD target takes the same template and tiles with PAGED 1, for
// pages of 16 and 32 (a runtime argument); on NVIDIA the wgmma template's PAGED variants.
TEST(FlashAttentionMfmaVariant, EveryAmdTargetGetsTheMfmaTemplateForPagedPrefill) {
  for (const char *target : {"gfx942", "gfx950", "gfx90a", "gfx1100"})
    for (int page_size : {16, 32})
      for (int head_dim : {64, 128}) {
        const Case c{target, "bfloat16", head_dim, true, true};
        const auto paged = detail::flash_attention_paged_variant<BFloat16>(
            shape_of(c), page_size, jit::Target::parse(target));
        const auto contiguous =
            detail::flash_attention_variant<BFloat16>(jit::Target::parse(target), shape_of(c));
        EXPECT_EQ(paged.tmpl->name(), "flash_attention_mfma") << target;
        EXPECT_EQ(paged.integer("PAGED"), 1);
        EXPECT_EQ(contiguous.integer("PAGED"), 0);
        EXPECT_EQ(paged.integer("BLOCK_N"), contiguous.integer("BLOCK_N"));
        EXPECT_EQ(paged.integer("WAVES"), contiguous.integer("WAVES"));
        EXPECT_EQ(paged.integer("CAUSAL"), 1);
      }
  const Case c{"sm_90a", "half", 128, false, true};
  for (const char *target : {"sm_90a", "sm_80"})
    EXPECT_EQ(
        detail::flash_attention_paged_variant<Half>(shape_of(c), 32, jit::Target::parse(target))
            .tmpl->name(),
        "flash_attention");
}

TEST_F(OpsCompileTest, FlashAttentionMfmaNamesItsTargetsBeforeCompilingForOthers) {
  for (const char *target : {"gfx90a", "gfx1100", "gfx9-4-generic", "sm_80", "sm_90a"})
    EXPECT_TRUE(refused_before_compiling("flash_attention_mfma", target, "gfx942 or gfx950"))
        << target;
}

} // namespace
} // namespace kjit::ops
