// The tuning table's records for the operators' variants, on the CPU: the variant each wrapper
// builds is the one the functions below return for the Runtime's lookup (detail::tuning_lookup),
// so a lookup of a temporary table and a named device shows what a record changes with no GPU.
// Each record is planted under a key built here, not by the wrappers' helpers, so the key
// conventions (problem, extents, device, compiler) are pinned as well:
// - moe_gemm_fp8 (fused_moe's FP8 grouped GEMM, sm_90a) and moe_gemm_mfma (its 16-bit grouped
//   GEMM on gfx942 and gfx950): problem {GATED, T}, extents experts, k, m (the pairs' bucket), n,
//   as moe_gemm_wgmma's;
// - gemm_fp8 (sm_90a) and gemm_fp8_mfma (gfx942, gfx950): problem {SCALING}, extents k, m (the
//   rows' bucket), n.
// Without a record each gives today's heuristic variant, value for value (the values below are
// those the wrappers hard-coded before their records were read); a record whose winner the
// template refuses is ignored with one warning and the heuristic's variant is used.
#include "kjit/templates/library.hpp"
#include "ops/src/gemm_fp8_mfma.hpp"
#include "ops/src/moe_gemm.hpp"
#include "ops/src/plans.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <string>

namespace kjit::ops {
namespace {

// A tuning table in a temporary directory, and lookups of it for named devices.
class TunedVariants : public ::testing::Test {
protected:
  // A compiler identity of this test's own: a refused record is warned about once per key and
  // process, and no other test (or repetition) shares its keys.
  detail::TuningLookup lookup(const std::string &target, int compute_units) const {
    return {{target, compute_units, "a device under test"}, compiler_, table_};
  }
  void plant(const detail::TuningLookup &on, const std::string &tmpl, const ParamValues &problem,
             const ParamValues &extents, const ParamValues &winner) const {
    table_.store({TuningKey::of(templates::find(tmpl), problem, extents, on.device, on.compiler),
                  {winner, 1.0},
                  {},
                  0});
  }

private:
  static inline int tests_ = 0;
  kjit::testing::TempDir root_;
  TuningTable table_{root_.path()};
  std::string compiler_ = "a compiler under test, " + std::to_string(++tests_);
};

// fused_moe's FP8 grouped GEMMs on sm_90a: STAGES 6 and GROUP_M by the experts' tiles of rows (16
// at 65536 pairs over 8 experts) without a record; a record's STAGES and GROUP_M with one, for its
// own GEMM (gate-up or down), element type and bucket of pairs.
TEST_F(TunedVariants, AMoeGemmFp8RecordSetsTheGemmsStagesAndGroupM) {
  const detail::TuningLookup sm90a = lookup("sm_90a", 132);
  constexpr int experts = 8, pairs = 65536, hidden = 512, inter = 256;
  const auto gate_up = [&](int with_pairs) {
    return detail::moe_fp8_gemm_variant<BFloat16>(sm90a, true, with_pairs, experts, inter, hidden);
  };
  const auto down = [&] {
    return detail::moe_fp8_gemm_variant<BFloat16>(sm90a, false, pairs, experts, hidden, inter);
  };
  const ParamValues today_gate_up = {
      {"T", "bfloat16"}, {"STAGES", 6}, {"GATED", 1}, {"GROUP_M", 16}};
  const ParamValues today_down = {{"T", "bfloat16"}, {"STAGES", 6}, {"GATED", 0}, {"GROUP_M", 16}};
  EXPECT_EQ(gate_up(pairs).tmpl->name(), "moe_gemm_fp8");
  EXPECT_EQ(gate_up(pairs).params, today_gate_up);
  EXPECT_EQ(down().params, today_down);

  plant(sm90a, "moe_gemm_fp8", {{"GATED", 1}, {"T", "bfloat16"}},
        {{"experts", experts}, {"k", hidden}, {"m", pairs}, {"n", inter}},
        {{"STAGES", 4}, {"GROUP_M", 2}});
  EXPECT_EQ(gate_up(pairs).params,
            (ParamValues{{"T", "bfloat16"}, {"STAGES", 4}, {"GATED", 1}, {"GROUP_M", 2}}));
  EXPECT_EQ(gate_up(40000).integer("STAGES"), 4) << "40000 pairs are in 65536's bucket";
  EXPECT_EQ(gate_up(20000).integer("STAGES"), 6) << "20000 pairs are in another bucket";
  EXPECT_EQ(down().params, today_down) << "the down GEMM (GATED 0) has records of its own";
  EXPECT_EQ(detail::moe_fp8_gemm_variant<Half>(sm90a, true, pairs, experts, inter, hidden)
                .integer("STAGES"),
            6)
      << "half has records of its own";
  EXPECT_EQ(detail::moe_fp8_gemm_variant<BFloat16>(lookup("sm_90a", 114), true, pairs, experts,
                                                   inter, hidden)
                .integer("STAGES"),
            6)
      << "a device of 114 multiprocessors has records of its own";

  // A tunable the record leaves out takes the template's default (GROUP_M 8), as the variant the
  // tuner timed did, not the heuristic's 16 (with_winner).
  plant(sm90a, "moe_gemm_fp8", {{"GATED", 0}, {"T", "bfloat16"}},
        {{"experts", experts}, {"k", inter}, {"m", pairs}, {"n", hidden}}, {{"STAGES", 3}});
  EXPECT_EQ(down().params,
            (ParamValues{{"T", "bfloat16"}, {"STAGES", 3}, {"GATED", 0}, {"GROUP_M", 8}}));
}

// A winner moe_gemm_fp8 refuses (STAGES 7; GATED, a problem parameter of the key) is ignored with
// one warning, and the heuristic's variant is built: the table is untrusted input.
TEST_F(TunedVariants, AMoeGemmFp8RecordTheTemplateRefusesLeavesTheHeuristic) {
  const detail::TuningLookup sm90a = lookup("sm_90a", 132);
  constexpr int experts = 8, pairs = 65536, hidden = 512;
  const ParamValues today = {{"T", "bfloat16"}, {"STAGES", 6}, {"GATED", 1}, {"GROUP_M", 16}};
  int inter = 256; // a shape each: one warning per key
  for (const ParamValues &winner :
       {ParamValues{{"STAGES", 7}, {"GROUP_M", 2}}, ParamValues{{"STAGES", 4}, {"GATED", 0}}}) {
    SCOPED_TRACE(winner.to_string());
    inter += 128;
    plant(sm90a, "moe_gemm_fp8", {{"GATED", 1}, {"T", "bfloat16"}},
          {{"experts", experts}, {"k", hidden}, {"m", pairs}, {"n", inter}}, winner);
    const kjit::testing::LogCapture log;
    EXPECT_EQ(
        detail::moe_fp8_gemm_variant<BFloat16>(sm90a, true, pairs, experts, inter, hidden).params,
        today);
    EXPECT_EQ(log.warnings(), 1) << log.text();
    EXPECT_NE(log.text().find("ignoring the tuning record"), std::string::npos) << log.text();
  }
}

// fused_moe's grouped GEMM on gfx942 and gfx950 (moe_gemm_mfma): BLOCK_N 64 at 64 pairs and 128
// at 65536 on 304 compute units without a record; a record's BLOCK_N with one, found for its own
// target only; a BLOCK_N the template refuses leaves the heuristic's.
TEST_F(TunedVariants, AMoeGemmMfmaRecordSetsTheTileWidthOnItsTarget) {
  constexpr int experts = 8, hidden = 4096, inter = 1024, units = 304;
  for (const std::string target : {"gfx942", "gfx950"}) {
    SCOPED_TRACE(target);
    const detail::TuningLookup amd = lookup(target, units);
    const auto gate_up = [&](int pairs) {
      return detail::grouped_gemm_variant<Half>(amd, true, false, pairs, experts, inter, hidden);
    };
    EXPECT_EQ(gate_up(64).tmpl->name(), "moe_gemm_mfma");
    EXPECT_EQ(gate_up(64).params, (ParamValues{{"T", "half"}, {"BLOCK_N", 64}, {"GATED", 1}}));
    EXPECT_EQ(gate_up(65536).params, (ParamValues{{"T", "half"}, {"BLOCK_N", 128}, {"GATED", 1}}));
    const auto plant_for = [&](int pairs, int block_n) {
      plant(amd, "moe_gemm_mfma", {{"GATED", 1}, {"T", "half"}},
            {{"experts", experts}, {"k", hidden}, {"m", pairs}, {"n", inter}},
            {{"BLOCK_N", block_n}});
    };
    plant_for(64, 128);
    EXPECT_EQ(gate_up(64).params, (ParamValues{{"T", "half"}, {"BLOCK_N", 128}, {"GATED", 1}}));
    EXPECT_EQ(detail::grouped_gemm_variant<Half>(amd, false, false, 64, experts, hidden, inter)
                  .integer("BLOCK_N"),
              64)
        << "the down GEMM has records of its own";
    const kjit::testing::LogCapture log;
    plant_for(65536, 256);
    EXPECT_EQ(gate_up(65536).integer("BLOCK_N"), 128);
    EXPECT_EQ(log.warnings(), 1) << log.text();
  }
  // gfx950 found none of gfx942's records above; nor does a device of other compute units.
  const detail::TuningLookup other = lookup("gfx942", 228);
  EXPECT_EQ(detail::grouped_gemm_variant<Half>(other, true, false, 64, experts, inter, hidden)
                .integer("BLOCK_N"),
            64);
}

// The same lookup on sm_90a is moe_gemm_wgmma's, under the same key.
TEST_F(TunedVariants, TheGroupedGemmLookupOnSm90aIsMoeGemmWgmmas) {
  const detail::TuningLookup sm90a = lookup("sm_90a", 132);
  const auto variant = [&] {
    return detail::grouped_gemm_variant<BFloat16>(sm90a, true, false, 5000, 8, 320, 256);
  };
  EXPECT_EQ(variant().tmpl->name(), "moe_gemm_wgmma");
  EXPECT_EQ(variant().integer("STAGES"), 4);
  plant(sm90a, "moe_gemm_wgmma", {{"GATED", 1}, {"T", "bfloat16"}},
        {{"experts", 8}, {"k", 256}, {"m", 8192}, {"n", 320}}, {{"BLOCK_N", 64}, {"STAGES", 5}});
  EXPECT_EQ(variant().integer("STAGES"), 5);
}

// gemm_fp8_mfma (gemm_fp8_blockscale and gemm_fp8_scaled on gfx942 and gfx950): 64 x 64 tiles for
// few of them, 128 x 128 for many, without a record; a record's tile with one, for its own
// scaling and bucket of rows; a tile the template refuses leaves the heuristic's.
TEST_F(TunedVariants, AGemmFp8MfmaRecordSetsTheTile) {
  for (const std::string target : {"gfx942", "gfx950"}) {
    SCOPED_TRACE(target);
    const detail::TuningLookup amd = lookup(target, 304);
    const auto variant = [&](int scaling, int m, int n, int k) {
      return detail::gemm_fp8_mfma_variant(amd, scaling, m, n, k);
    };
    EXPECT_EQ(variant(2, 200, 256, 1024).tmpl->name(), "gemm_fp8_mfma");
    EXPECT_EQ(variant(2, 200, 256, 1024).params,
              (ParamValues{{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"SCALING", 2}}));
    EXPECT_EQ(variant(1, 4096, 4096, 1024).params,
              (ParamValues{{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"SCALING", 1}}));
    plant(amd, "gemm_fp8_mfma", {{"SCALING", 2}}, {{"k", 1024}, {"m", 256}, {"n", 256}},
          {{"BLOCK_M", 128}, {"BLOCK_N", 64}});
    EXPECT_EQ(variant(2, 200, 256, 1024).params,
              (ParamValues{{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"SCALING", 2}}));
    EXPECT_EQ(variant(2, 129, 256, 1024).integer("BLOCK_M"), 128) << "256's bucket";
    EXPECT_EQ(variant(2, 100, 256, 1024).integer("BLOCK_M"), 64) << "another bucket";
    EXPECT_EQ(variant(0, 200, 256, 1024).integer("BLOCK_M"), 64) << "another scaling";
    EXPECT_EQ(variant(2, 200, 256, 2048).integer("BLOCK_M"), 64) << "another k";

    const kjit::testing::LogCapture log;
    plant(amd, "gemm_fp8_mfma", {{"SCALING", 1}}, {{"k", 1024}, {"m", 4096}, {"n", 4096}},
          {{"BLOCK_M", 64}, {"BLOCK_N", 96}});
    EXPECT_EQ(variant(1, 4096, 4096, 1024).params,
              (ParamValues{{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"SCALING", 1}}));
    EXPECT_EQ(log.warnings(), 1) << log.text();
  }
}

// gemm_fp8 on sm_90a (which read its records before gemm_fp8_mfma did): the heuristic's variant at
// the rows' bucket without a record, the record's tunables with one, the heuristic's for a winner
// the template refuses.
TEST_F(TunedVariants, AGemmFp8RecordSetsTheVariantOnSm90a) {
  const detail::TuningLookup sm90a = lookup("sm_90a", 132);
  constexpr int scaling = 2, m = 100, n = 4096, k = 7168;
  const detail::ChosenVariant heuristic = detail::gemm_fp8_variant(true, false, 128, n);
  EXPECT_EQ(detail::gemm_fp8_variant(sm90a, scaling, m, n, k).params, heuristic.params);
  const ParamValues winner = {{"BLOCK_N", 256},   {"STAGES", 4},   {"GROUP_M", 4},
                              {"CLUSTER_M", 1},   {"PINGPONG", 0}, {"OVERLAP", 0},
                              {"A_REGISTERS", 1}, {"EPILOGUE", 1}};
  plant(sm90a, "gemm_fp8", {{"SCALING", scaling}}, {{"k", k}, {"m", 128}, {"n", n}}, winner);
  ParamValues tuned = winner;
  tuned.add("SCALING", scaling);
  EXPECT_EQ(detail::gemm_fp8_variant(sm90a, scaling, m, n, k).params, tuned);
  EXPECT_NE(tuned, heuristic.params);

  const kjit::testing::LogCapture log;
  plant(sm90a, "gemm_fp8", {{"SCALING", scaling}}, {{"k", k}, {"m", 128}, {"n", n}},
        {{"BLOCK_N", 100}, {"STAGES", 4}});
  EXPECT_EQ(detail::gemm_fp8_variant(sm90a, scaling, m, n, k).params, heuristic.params);
  EXPECT_EQ(log.warnings(), 1) << log.text();
}

} // namespace
} // namespace kjit::ops
