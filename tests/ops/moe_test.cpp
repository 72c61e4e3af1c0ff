// The mixture-of-experts operators without a GPU: the references on cases worked out by hand
// (ties as torch.topk breaks them), the argument checks (each a clear Error(bad_argument) before
// any device is touched), and the templates compiling (the grouped GEMM with wgmma neither
// serialised nor spilling). The device kernels of the routing run on the CPU emulator in
// moe_emulated_test.cpp.
#include "kjit/error.hpp"
#include "kjit/ops/moe.hpp"
#include "kjit/ops/quant.hpp"
#include "ops/src/moe_gemm.hpp"
#include "tests/ops/compile_support.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <vector>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

std::vector<float> floats(std::initializer_list<double> values) {
  std::vector<float> out;
  for (double v : values)
    out.push_back(static_cast<float>(v));
  return out;
}

TEST(MoeTopkReference, EqualLogitsGoToTheLowerIndexFirst) {
  const std::vector<float> logits(2 * 6, 0.5f); // every expert ties
  const reference::Routing routing = reference::moe_topk<float>(logits, {}, 2, 6, 3);
  EXPECT_EQ(routing.ids, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  for (double w : routing.weights)
    EXPECT_DOUBLE_EQ(w, 1.0 / 3); // renormalised
}

TEST(MoeTopkReference, SoftmaxPicksTheLargestAndKeepsTheirProbabilitiesUnlessRenormalised) {
  // Softmax of {0, ln 2, ln 3, ln 2}: {1, 2, 3, 2} / 8; top 2: expert 2 (3/8), then expert 1
  // (2/8, the lower of the tied 1 and 3).
  const std::vector<float> logits = floats({0, std::log(2.0), std::log(3.0), std::log(2.0)});
  const reference::Routing raw =
      reference::moe_topk<float>(logits, {}, 1, 4, 2, {.renormalize = false});
  EXPECT_EQ(raw.ids, (std::vector<int>{2, 1}));
  EXPECT_NEAR(raw.weights[0], 3.0 / 8, 1e-7);
  EXPECT_NEAR(raw.weights[1], 2.0 / 8, 1e-7);
  const reference::Routing renormalised = reference::moe_topk<float>(logits, {}, 1, 4, 2);
  EXPECT_NEAR(renormalised.weights[0], 0.6, 1e-7);
  EXPECT_NEAR(renormalised.weights[1], 0.4, 1e-7);
}

TEST(MoeTopkReference, GroupedSigmoidWithBiasRanksGroupsByTheirTwoBestAndWeighsWithoutTheBias) {
  // 8 experts in 4 groups of 2, 2 groups chosen, top 2. Logits 0: every score 1/2, so the bias
  // alone ranks: the groups' two choices sum to 1.1, 1, 1.35 and 1.4: groups 3 and 2 are chosen;
  // their choices are 0.8, 0.55, 0.7 and 0.7: expert 4, then 6 (0.7, the lower of 6 and 7).
  // Weights: the scores (1/2 each, without the bias), renormalised, times 2.5.
  const std::vector<float> logits(8, 0.0f);
  const std::vector<float> bias = floats({0.1, 0, 0, 0, 0.3, 0.05, 0.2, 0.2});
  const TopkOptions deepseek{.scoring = TopkOptions::Scoring::sigmoid,
                             .groups = 4,
                             .top_groups = 2,
                             .renormalize = true,
                             .scale = 2.5f};
  const reference::Routing routing = reference::moe_topk<float>(logits, bias, 1, 8, 2, deepseek);
  EXPECT_EQ(routing.ids, (std::vector<int>{4, 6}));
  EXPECT_DOUBLE_EQ(routing.weights[0], 1.25);
  EXPECT_DOUBLE_EQ(routing.weights[1], 1.25);
}

TEST(MoeAlignReference, SortsStablyByExpertPadsEachRunAndSkipsExpertsWithoutPairs) {
  // Pairs 0..6 to experts 3, 0, 3, 3, 0, 3, 3; experts 1 and 2 get none.
  const std::vector<int> ids = {3, 0, 3, 3, 0, 3, 3};
  const reference::Alignment a = reference::moe_align(ids, 4, 4);
  EXPECT_EQ(a.sorted_pairs, (std::vector<int>{1, 4, -1, -1, 0, 2, 3, 5, 6, -1, -1, -1}));
  EXPECT_EQ(a.block_experts, (std::vector<int>{0, 3, 3}));
  EXPECT_EQ(a.pair_positions, (std::vector<int>{4, 0, 5, 6, 1, 7, 8}));
  EXPECT_LE(a.sorted_pairs.size(), moe_align_rows(7, 4, 4));
}

TEST(MoeAlignReference, AnExpertIdOutOfRangeIsABadArgument) {
  const std::vector<int> ids = {0, 4};
  try {
    reference::moe_align(ids, 4, 16);
    ADD_FAILURE() << "no error";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    EXPECT_EQ(error.summary(), "kjit::ops::moe_align: expert id 4 of pair 1 is outside [0, 4)");
  }
}

TEST(MoeAlignRows, BoundsEveryExpertsRunRoundedUp) {
  EXPECT_EQ(moe_align_rows(0, 8, 128), 0u);
  EXPECT_EQ(moe_align_rows(1, 8, 128), 256u);      // one block used; the bound allows two
  EXPECT_EQ(moe_align_rows(6, 64, 128), 7u * 128); // six experts of one pair each, at most
  // Every split of 300 pairs over 3 experts fits: 100 each takes 3 blocks, the bound 3 + 3.
  EXPECT_GE(moe_align_rows(300, 3, 128), 3u * 128);
}

TEST(MoeLayerReference, SumsTheWeightedExpertsAndGivesZeroToATokenRoutedNowhere) {
  // hidden 1, inter 1: expert e's gate g_e, up u_e, down d_e; expert(v) = d silu(g v) (u v).
  const std::vector<float> x = {2, 3};
  const std::vector<float> w13 = {1, 1, 0.5f, 2}; // expert 0: g 1 u 1; expert 1: g 0.5 u 2
  const std::vector<float> w2 = {3, -1};
  const std::vector<float> weights = {0.25f, 0.75f, 1, 1};
  const std::vector<int> ids = {0, 1, -1, 7}; // token 1: routed nowhere
  const auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  const std::vector<double> out =
      reference::fused_moe<float>(x, weights, ids, 2, w13, w2, 2, 1, 1, {}).out;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NEAR(out[0], 0.25 * 3 * silu(2) * 2 + 0.75 * -1 * silu(1) * 4, 1e-12);
  EXPECT_EQ(out[1], 0.0);
}

// One token on two experts of hidden 128, inter 128: each 128 x 128 block of the weights has its
// own scale (gate, up and down blocks of both experts), and x's block has amax 448 (scale 1), so
// its one value e4m3 cannot hold (3.3) is the only one quantised (to 3.25). The FP8 reference
// equals the reference on the weights decoded times their blocks' scales and that x.
TEST(MoeLayerReference, Fp8ScalesEachBlockAndQuantisesXPerBlockOf128) {
  constexpr int hidden = 128, inter = 128, experts = 2;
  std::vector<float> x(hidden), x_quantised(hidden);
  for (int h = 0; h < hidden; ++h)
    x[h] = x_quantised[h] = static_cast<float>((h % 7 - 3) * 0.5);
  x[0] = x_quantised[0] = 448;
  x[1] = 3.3f;
  x_quantised[1] = 3.25f;
  const auto byte = [](int e, int r, int c) {
    return static_cast<std::uint8_t>(((r + c + e) % 2 ? 0x80 : 0) | ((r * 5 + c * 3 + e) % 0x50));
  };
  const std::vector<float> w13_scales = {0.5f, 0.25f, 2, 4}, w2_scales = {0.125f, 3};
  std::vector<std::uint8_t> w13, w2;
  std::vector<float> w13_values, w2_values;
  for (int e = 0; e < experts; ++e) {
    for (int r = 0; r < 2 * inter; ++r)
      for (int c = 0; c < hidden; ++c) {
        w13.push_back(byte(e, r, c));
        w13_values.push_back(
            static_cast<float>(decode_e4m3(w13.back()) * w13_scales[e * 2 + r / 128]));
      }
    for (int r = 0; r < hidden; ++r)
      for (int c = 0; c < inter; ++c) {
        w2.push_back(byte(e, r + 1, c));
        w2_values.push_back(static_cast<float>(decode_e4m3(w2.back()) * w2_scales[e]));
      }
  }
  const std::vector<float> weights = {0.25f, 0.75f};
  const std::vector<int> ids = {1, 0};
  const reference::Layer fp8 = reference::fused_moe_fp8<float>(
      x, weights, ids, 2, w13, w13_scales, w2, w2_scales, experts, hidden, inter, {});
  const reference::Layer decoded = reference::fused_moe<float>(
      x_quantised, weights, ids, 2, w13_values, w2_values, experts, hidden, inter, {});
  ASSERT_EQ(fp8.out.size(), decoded.out.size());
  for (std::size_t i = 0; i < fp8.out.size(); ++i)
    ASSERT_NEAR(fp8.out[i], decoded.out[i], 1e-9 * decoded.magnitude[i]) << i;
}

void expect_bad_argument(const std::function<void()> &call, const std::string &summary) {
  try {
    call();
    ADD_FAILURE() << "no kjit::Error thrown; expected '" << summary << "'";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument) << error.what();
    EXPECT_EQ(error.summary(), summary);
  }
}

class MoeArguments : public ::testing::Test {
protected:
  MoeArguments() : rt_(kjit::testing::private_config(dir_)) {}
  kjit::testing::TempDir dir_;
  Runtime rt_;
  // Never dereferenced: the checks come first.
  template <typename U> U *at(std::uintptr_t address = 0x10000) {
    return reinterpret_cast<U *>(address);
  }
};

TEST_F(MoeArguments, TopkRefusesMoreExpertsThanThereAreAndBadGroups) {
  const auto topk = [&](int experts, int top_k, TopkOptions options = {}) {
    return [=, this] {
      moe_topk<BFloat16>(rt_, at<float>(), at<int>(), at<BFloat16>(), nullptr, 4, experts, top_k,
                         options);
    };
  };
  expect_bad_argument(topk(8, 9),
                      "kjit::ops::moe_topk: top_k is 9, must be in [1, 8] (8 experts in the "
                      "chosen groups)");
  expect_bad_argument(topk(256, 33, {.groups = 8, .top_groups = 4}),
                      "kjit::ops::moe_topk: top_k is 33, must be in [1, 32] (128 experts in the "
                      "chosen groups)");
  expect_bad_argument(topk(64, 8, {.groups = 8, .top_groups = 0}),
                      "kjit::ops::moe_topk: top_groups is 0, must be in [1, 8]");
  expect_bad_argument(topk(10, 2, {.groups = 4}),
                      "kjit::ops::moe_topk: 4 groups do not divide 10 experts");
  expect_bad_argument(topk(513, 2), "kjit::ops::moe_topk: experts is 513, must be in [1, 512]");
  expect_bad_argument(
      [&] { moe_topk<Half>(rt_, at<float>(), nullptr, at<Half>(), nullptr, 1, 8, 2); },
      "kjit::ops::moe_topk: ids is null");
}

TEST_F(MoeArguments, AlignRefusesBlocksItHasNoVariantFor) {
  const MoeAlignment out{at<int>(), at<int>(), at<int>(), at<int>()};
  expect_bad_argument([&] { moe_align(rt_, out, at<int>(), 8, 8, 100); },
                      "kjit::ops::moe_align: block_m is 100, not 16, 32, 64 or 128");
  expect_bad_argument([&] { moe_align(rt_, out, at<int>(), 8, 257, 128); },
                      "kjit::ops::moe_align: experts is 257, must be in [1, 256]");
}

TEST_F(MoeArguments, FusedMoeRefusesBadShapesAlignmentsAndWorkspaces) {
  const MoeWeights<BFloat16> layer{at<BFloat16>(0x20000), at<BFloat16>(0x30000), 8, 64, 128};
  const std::size_t bytes = fused_moe_workspace_bytes(4, 2, layer);
  const auto call = [&](BFloat16 *out, int top_k, const MoeWeights<BFloat16> &weights,
                        std::uintptr_t workspace, std::size_t workspace_bytes) {
    return [=, this] {
      fused_moe<BFloat16>(rt_, out, at<BFloat16>(0x40000), at<float>(), at<int>(), 4, top_k,
                          weights, at<void>(workspace), workspace_bytes);
    };
  };
  BFloat16 *out = at<BFloat16>(0x50000);
  expect_bad_argument(call(out, 9, layer, 0x100000, bytes),
                      "kjit::ops::fused_moe: top_k is 9, must be in [1, 8]");
  MoeWeights<BFloat16> ragged = layer;
  ragged.inter = 100;
  expect_bad_argument(call(out, 2, ragged, 0x100000, bytes),
                      "kjit::ops::fused_moe: inter is 100, must be a positive multiple of 8");
  MoeWeights<BFloat16> misaligned = layer;
  misaligned.w2 = at<BFloat16>(0x30008);
  expect_bad_argument(call(out, 2, misaligned, 0x100000, bytes),
                      "kjit::ops::fused_moe: w2 is not 16-byte aligned");
  expect_bad_argument(call(out, 2, layer, 0x100010, bytes),
                      "kjit::ops::fused_moe: workspace is not 256-byte aligned");
  expect_bad_argument(call(out, 2, layer, 0x100000, bytes - 1),
                      "kjit::ops::fused_moe: the workspace holds " + std::to_string(bytes - 1) +
                          " bytes; fused_moe_workspace_bytes asks for " + std::to_string(bytes));
  expect_bad_argument(call(at<BFloat16>(0x40000 + 64), 2, layer, 0x100000, bytes),
                      "kjit::ops::fused_moe: out and x overlap");
}

// What FusedMoeOptions::validate checks on the host copy of the ids: -1 routes a slot nowhere;
// any other id outside [0, experts) is named by its token and slot.
TEST(MoeExpertIds, MinusOneRoutesNowhereAndAnyOtherIdOutOfRangeIsABadArgument) {
  EXPECT_NO_THROW(check_expert_ids(std::vector<int>{0, 7, -1, -1, 3, 5}, 2, 8));
  EXPECT_NO_THROW(check_expert_ids(std::vector<int>{}, 6, 64));
  expect_bad_argument(
      [] {
        check_expert_ids(std::vector<int>{0, 7, -1, 3, 8, 1}, 2, 8);
      },
      "kjit::ops::fused_moe: ids[2][0] is 8, outside [0, 8) (-1 routes a slot nowhere)");
  expect_bad_argument(
      [] {
        check_expert_ids(std::vector<int>{0, 1, 2, -2, 3, 4}, 3, 8);
      },
      "kjit::ops::fused_moe: ids[1][0] is -2, outside [0, 8) (-1 routes a slot nowhere)");
  expect_bad_argument(
      [] {
        check_expert_ids(std::vector<int>{0, 1, 2, 3, 4}, 2, 8);
      },
      "kjit::ops::fused_moe: 5 ids are not a whole number of tokens of 2");
  expect_bad_argument([] { check_expert_ids(std::vector<int>{0}, 0, 8); },
                      "kjit::ops::fused_moe: top_k is 0, must be positive");
}

TEST_F(MoeArguments, FusedMoeFp8RefusesScalesOfAnotherShapeUnscaledSizesAndMisalignedWeights) {
  const MoeWeightsFp8 layer{at<std::uint8_t>(0x20000),
                            at<std::uint8_t>(0x30000),
                            {at<float>(0x60000), 8, 4, 2},
                            {at<float>(0x70000), 8, 2, 2},
                            8,
                            256,
                            256};
  const std::size_t bytes = fused_moe_workspace_bytes<BFloat16>(4, 2, layer);
  const auto call = [&](const MoeWeightsFp8 &weights) {
    return [=, this] {
      fused_moe<BFloat16>(rt_, at<BFloat16>(0x50000), at<BFloat16>(0x40000), at<float>(), at<int>(),
                          4, 2, weights, at<void>(0x100000), bytes);
    };
  };
  MoeWeightsFp8 bad = layer;
  bad.w13_scales.rows = 3;
  expect_bad_argument(call(bad),
                      "kjit::ops::fused_moe: w13_scales is [8, 3, 2], must be [8, 4, 2]");
  bad = layer;
  bad.w2_scales.experts = 7;
  expect_bad_argument(call(bad), "kjit::ops::fused_moe: w2_scales is [7, 2, 2], must be [8, 2, 2]");
  bad = layer;
  bad.inter = 200;
  expect_bad_argument(
      call(bad),
      "kjit::ops::fused_moe: inter is 200, must be a positive multiple of 128 (the scale block)");
  bad = layer;
  bad.hidden = 192;
  expect_bad_argument(
      call(bad),
      "kjit::ops::fused_moe: hidden is 192, must be a positive multiple of 128 (the scale block)");
  bad = layer;
  bad.w13 = at<std::uint8_t>(0x20008);
  expect_bad_argument(call(bad), "kjit::ops::fused_moe: w13 is not 16-byte aligned");
  bad = layer;
  bad.w13_scales.data = at<float>(0x60002);
  expect_bad_argument(call(bad), "kjit::ops::fused_moe: w13_scales is not 4-byte aligned");
  bad = layer;
  bad.w2_scales.data = nullptr;
  expect_bad_argument(call(bad), "kjit::ops::fused_moe: w2_scales is null");
  expect_bad_argument(
      [&] {
        fused_moe<Half>(rt_, at<Half>(0x50000), at<Half>(0x40000), at<float>(), at<int>(), 4, 2,
                        layer, at<void>(0x100000), bytes - 1);
      },
      "kjit::ops::fused_moe: the workspace holds " + std::to_string(bytes - 1) +
          " bytes; fused_moe_workspace_bytes asks for " + std::to_string(bytes));
}

TEST_F(OpsCompileTest, MoeRoutingKernelsCompileForGfx90aAndSm90) {
  for (const char *target : {"gfx90a", "sm_90"}) {
    for (const char *type : {"float", "half", "bfloat16"}) {
      EXPECT_TRUE(compiles("moe_topk", {{"T", type}, {"EXPERTS", 64}, {"TOPK", 6}}, target));
      EXPECT_TRUE(compiles("moe_gather", {{"T", type}}, target)) << type;
      EXPECT_TRUE(compiles("moe_gather", {{"T", type}, {"ROWS", 16}, {"CACHE", 1}}, target))
          << type;
      EXPECT_TRUE(compiles("moe_combine", {{"T", type}}, target)) << type;
      EXPECT_TRUE(compiles("moe_decode_gate_up", {{"T", type}}, target)) << type;
      EXPECT_TRUE(compiles("moe_decode_down", {{"T", type}}, target)) << type;
    }
    EXPECT_TRUE(compiles(
        "moe_topk",
        {{"EXPERTS", 256}, {"TOPK", 8}, {"SCORING", 1}, {"GROUPS", 8}, {"TOPK_GROUP", 4}}, target));
    EXPECT_TRUE(compiles("moe_align", {{"EXPERTS", 256}}, target));
  }
  EXPECT_TRUE(refused_before_compiling("moe_gemm_wgmma", "gfx942", "sm_90a"));
  EXPECT_TRUE(refused_before_compiling("moe_gemm_fp8", "gfx942", "sm_90a"));
}

// One token on NVIDIA takes the decode path (two row-by-row kernels); two tokens, and AMD at any
// count, the grouped GEMMs.
TEST(FusedMoeDecodes, OneTokenOnNvidiaOnly) {
  EXPECT_TRUE(detail::fused_moe_decodes(jit::Target::parse("sm_90a"), 1));
  EXPECT_FALSE(detail::fused_moe_decodes(jit::Target::parse("sm_90a"), 2));
  EXPECT_FALSE(detail::fused_moe_decodes(jit::Target::parse("gfx942"), 1));
  EXPECT_FALSE(detail::fused_moe_decodes(jit::Target::parse("gfx950"), 1));
}

// The grouped GEMM's width (132 multiprocessors, an H100's and H200's). Prefill and the
// Mixtral-like layer's decode keep the wide tiles; the fine-grained layer's gate-up GEMM at 256
// tokens (2048 pairs: 64 tiles of rows, 704 of 128 columns, 5.3 waves) takes 64 columns (10.7
// waves), its down GEMM at 16 tokens 128; where the wide tiles are fewer than the
// multiprocessors, half width, as before.
TEST(GroupedBlockN, HalfWidthWhereItFillsTheLastWaveOrTheMultiprocessors) {
  EXPECT_EQ(detail::grouped_block_n(2048, 64, 1408, 128, 132), 64);   // fine-grained gate-up
  EXPECT_EQ(detail::grouped_block_n(2048, 64, 2048, 256, 132), 256);  // and down
  EXPECT_EQ(detail::grouped_block_n(128, 64, 1408, 128, 132), 128);   // 16 tokens: 4.7 waves
  EXPECT_EQ(detail::grouped_block_n(128, 64, 2048, 256, 132), 128);   // 3.4 waves against 6.7
  EXPECT_EQ(detail::grouped_block_n(512, 8, 14336, 128, 132), 128);   // Mixtral-like gate-up
  EXPECT_EQ(detail::grouped_block_n(512, 8, 4096, 256, 132), 256);    // and down
  EXPECT_EQ(detail::grouped_block_n(32768, 64, 1408, 128, 132), 128); // prefill
  EXPECT_EQ(detail::grouped_block_n(2, 8, 384, 128, 132), 64);        // 3 x 3 wide tiles
}

// Every BLOCK_N of both projections, the gate-up one also gathering its rows (GATHER 1, what
// fused_moe launches), through ptxas's report (wgmma_compiles_cleanly).
// A tuner tries only the grouped GEMM's variants whose stages fit a block's 227 KiB: a wgmma of
// 256 columns holds 48 KiB a stage, so four stages, not five or six.
TEST(MoeGemmWgmmaRules, StagesPastTheSharedMemoryDoNotFit) {
  const Template &grouped = templates::find("moe_gemm_wgmma");
  const auto fits = [&](int block_n, int gated, int stages) {
    return grouped.tuning().fits(
        grouped.bind({{"BLOCK_N", block_n}, {"GATED", gated}, {"STAGES", stages}}), "sm_90a");
  };
  EXPECT_EQ(fits(128, 1, 4), "");
  EXPECT_EQ(fits(256, 0, 4), "");
  EXPECT_EQ(fits(128, 0, 6), "");
  EXPECT_EQ(fits(128, 1, 5), "the stages need more than 227 KiB of shared memory");
  EXPECT_EQ(fits(256, 0, 6), "the stages need more than 227 KiB of shared memory");
  // EPILOGUE 1's 32 KiB of boxes fit beside four stages of 48 KiB or six of 32 KiB.
  const auto fits_storing_through_shared = [&](int block_n, int gated, int stages) {
    const Instance instance =
        grouped.bind({{"BLOCK_N", block_n}, {"GATED", gated}, {"STAGES", stages}, {"EPILOGUE", 1}});
    EXPECT_EQ(grouped.tuning().shared_bytes(instance),
              grouped.tuning().shared_bytes(
                  grouped.bind({{"BLOCK_N", block_n}, {"GATED", gated}, {"STAGES", stages}})) +
                  32768);
    return grouped.tuning().fits(instance, "sm_90a");
  };
  EXPECT_EQ(fits_storing_through_shared(128, 1, 4), "");
  EXPECT_EQ(fits_storing_through_shared(256, 0, 4), "");
  EXPECT_EQ(fits_storing_through_shared(64, 1, 6), "");
}

// PINGPONG gives each consumer a whole tile of 128 rows: its accumulators for a wgmma of 256
// columns would outgrow its registers, so only 128 columns (gate-up BLOCK_N 64, down 128) fit.
TEST(MoeGemmWgmmaRules, PingpongFitsAWgmmaOf128ColumnsOnly) {
  const Template &grouped = templates::find("moe_gemm_wgmma");
  const auto fits = [&](int block_n, int gated) {
    return grouped.tuning().fits(
        grouped.bind({{"BLOCK_N", block_n}, {"GATED", gated}, {"STAGES", 4}, {"PINGPONG", 1}}),
        "sm_90a");
  };
  EXPECT_EQ(fits(64, 1), "");
  EXPECT_EQ(fits(128, 0), "");
  EXPECT_EQ(fits(128, 1), "PINGPONG takes a wgmma of 128 columns, not 256");
  EXPECT_EQ(fits(256, 0), "PINGPONG takes a wgmma of 128 columns, not 256");
}

TEST(MoeGemmWgmmaCompile, NoSerialisedWgmmaNoIgnoredSetmaxnregNoSpills) {
  std::unique_ptr<jit::Compiler> nvrtc;
  try {
    nvrtc = jit::load_compiler(Vendor::nvidia);
  } catch (const Error &error) {
    GTEST_SKIP() << "NVRTC is not available: " << error.summary();
  }
  const Template &tmpl = templates::find("moe_gemm_wgmma");
  for (const char *type : {"half", "bfloat16"})
    for (int gated : {0, 1})
      for (int block_n : {64, 128, 256}) {
        const int wgmma_n = block_n * (gated + 1);
        for (int stages : {3, 4, 6})
          for (int gather = 0; gather <= gated; ++gather)
            for (int pingpong = 0; pingpong <= (wgmma_n == 128 ? 1 : 0); ++pingpong)
              for (int epilogue : {0, 1})
                if ((wgmma_n == 256 && stages <= 4) || (wgmma_n == 128 && stages == 6)) {
                  const auto source = tmpl.bind({{"T", type},
                                                 {"BLOCK_N", block_n},
                                                 {"STAGES", stages},
                                                 {"GATED", gated},
                                                 {"GATHER", gather},
                                                 {"PINGPONG", pingpong},
                                                 {"EPILOGUE", epilogue},
                                                 {"SKIP_PADDING", 1}});
                  EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(*nvrtc, source));
                }
      }
}

// The FP8 layer's kernels: both projections of the grouped e4m3 GEMM at the stages fused_moe
// launches (6) and the fewest (3), and the activations' quantisation, through ptxas's report.
TEST(MoeGemmFp8Compile, NoSerialisedWgmmaNoIgnoredSetmaxnregNoSpills) {
  std::unique_ptr<jit::Compiler> nvrtc;
  try {
    nvrtc = jit::load_compiler(Vendor::nvidia);
  } catch (const Error &error) {
    GTEST_SKIP() << "NVRTC is not available: " << error.summary();
  }
  const Template &gemm = templates::find("moe_gemm_fp8");
  const Template &quantize = templates::find("moe_quantize_fp8");
  for (const char *type : {"half", "bfloat16"}) {
    for (int gated : {0, 1})
      EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(
          *nvrtc, gemm.bind({{"T", type}, {"STAGES", 6}, {"GATED", gated}})));
    EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(*nvrtc, quantize.bind({{"T", type}})));
  }
  EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(
      *nvrtc, gemm.bind({{"T", "bfloat16"}, {"STAGES", 3}, {"GATED", 1}, {"GROUP_M", 16}})));
}

} // namespace
} // namespace kjit::ops
