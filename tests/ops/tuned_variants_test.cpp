// The tuning table's records for the operators' variants, on the CPU: the variant each wrapper
// builds is the one the functions below return for the Runtime's lookup (detail::tuning_lookup),
// so a lookup of a temporary table and a named device shows what a record changes with no GPU.
// Each record is planted under a key built here, not by the wrappers' helpers, so the key
// conventions (problem, extents, device, compiler) are pinned as well:
// - moe_gemm_wgmma (fused_moe's grouped GEMM on sm_90a): problem {GATED, T}, extents experts,
//   k, m (the pairs' bucket), n;
// - gemm_fp8 (sm_90a): problem {SCALING}, extents k, m (the rows' bucket), n.
// Without a record each gives today's heuristic variant, value for value (the values below are
// those the wrappers hard-coded before their records were read); a record whose winner the
// template refuses is ignored with one warning and the heuristic's variant is used.
#include "kjit/templates/library.hpp"
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
