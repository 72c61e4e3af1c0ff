#include "kjit/ops/gemm.hpp"
#include "ops/src/variants.hpp"
#include "tests/ops/compile_support.hpp"

#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <tuple>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

TEST_F(OpsCompileTest, GemmDefaultVariantsCompileForGfx90aAndSm90) {
  for (const char *target : {"gfx90a", "sm_90"}) {
    for (const char *type : {"float", "half", "bfloat16"})
      EXPECT_TRUE(compiles("gemm", {{"T", type}}, target)) << type;
    const GemmTiles small = gemm_tiles_for(17, 17, 17);
    EXPECT_TRUE(compiles("gemm",
                         {{"BLOCK_M", small.block_m},
                          {"BLOCK_N", small.block_n},
                          {"BLOCK_K", small.block_k},
                          {"THREAD_M", small.thread_m},
                          {"THREAD_N", small.thread_n}},
                         target));
  }
}

TEST_F(OpsCompileTest, GemmMmaCompilesForSm90AndNamesWhyNotForAmd) {
  for (const char *type : {"half", "bfloat16"}) {
    EXPECT_TRUE(compiles("gemm_mma", {{"T", type}}, "sm_90")) << type;
    EXPECT_TRUE(compiles("gemm_mma",
                         {{"T", type}, {"BLOCK_M", 64}, {"BLOCK_N", 64}, {"WARPS_N", 2}}, "sm_90"))
        << type;
  }
  EXPECT_TRUE(refused_before_compiling("gemm_mma", "gfx90a", "sm_80 and newer"));
}

TEST_F(OpsCompileTest, LinearSkinnyCompilesForSm80AndSm90AtEveryTokenTile) {
  for (const char *type : {"half", "bfloat16"})
    for (int m_tile : {8, 16, 32, 64})
      for (const char *target : {"sm_80", "sm_90a"})
        EXPECT_TRUE(compiles("linear_skinny",
                             {{"T", type}, {"M_TILE", m_tile}, {"UNROLL", m_tile >= 32 ? 2 : 4}},
                             target))
            << type << " " << m_tile << " " << target;
  EXPECT_TRUE(refused_before_compiling("linear_skinny", "gfx90a", "sm_80 and newer"));
}

// Every cluster shape with the shared-memory epilogue, the register epilogue without clusters,
// and K split over clusters of 2, 4 and 8 blocks (BLOCK_N 128); and linear()'s transposed
// variants at few rows (SWAP_AB: W as wgmma's A, BLOCK_N 16 to 64 rows of the activations) as
// the heuristic makes them for 16 to 128 rows of 4096 and 8192 rows of W, and with more splits
// than a thread has float4s of sums (BLOCK_N 16, SPLIT_K 8), and with tiles of 64 rows of W
// (BLOCK_M 64, one consumer) at every BLOCK_N, K whole or split; through ptxas's report
// (compile_testing::wgmma_compiles_cleanly).
TEST(GemmWgmmaCompile, NoSerialisedWgmmaNoIgnoredSetmaxnregNoSpills) {
  std::unique_ptr<jit::Compiler> nvrtc;
  try {
    nvrtc = jit::load_compiler(Vendor::nvidia);
  } catch (const Error &error) {
    GTEST_SKIP() << "NVRTC is not available: " << error.summary();
  }
  const Template &tmpl = templates::find("gemm_wgmma");
  struct Layout {
    int cluster_m, cluster_n, epilogue, split_k;
  };
  for (const char *type : {"half", "bfloat16"})
    for (int block_n : {128, 256})
      for (int b_kmajor : {0, 1})
        for (const Layout layout : {Layout{1, 1, 0, 1},
                                    {1, 1, 1, 1},
                                    {2, 1, 1, 1},
                                    {1, 2, 1, 1},
                                    {1, 1, 0, 2},
                                    {1, 1, 0, 4},
                                    {1, 1, 0, 8}})
          if (layout.split_k == 1 || block_n == 128) {
            EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(
                *nvrtc, tmpl.bind({{"T", type},
                                   {"BLOCK_N", block_n},
                                   {"STAGES", block_n == 256 ? 4 : 5},
                                   {"B_KMAJOR", b_kmajor},
                                   {"CLUSTER_M", layout.cluster_m},
                                   {"CLUSTER_N", layout.cluster_n},
                                   {"EPILOGUE", layout.epilogue},
                                   {"SPLIT_K", layout.split_k}})));
          }
  for (const auto &[m, n, k] : {std::tuple{16, 4096, 14336},
                                {32, 8192, 8192},
                                {64, 4096, 4096},
                                {128, 8192, 8192},
                                {128, 4096, 14336}}) {
    const detail::ChosenVariant variant = detail::gemm_wgmma_variant<BFloat16>(m, n, k, true);
    EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(*nvrtc, tmpl.bind(variant.params)));
  }
  const detail::ChosenVariant narrow = detail::gemm_wgmma_variant<Half>(9, 4096, 14336, true);
  ParamValues eight_splits = narrow.params;
  eight_splits.set("SPLIT_K", 8);
  EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(*nvrtc, tmpl.bind(eight_splits)));
  for (int block_n : {16, 32, 64, 128})
    for (int split_k : {1, 2}) {
      ParamValues half_tile = narrow.params;
      half_tile.set("BLOCK_M", 64);
      half_tile.set("BLOCK_N", block_n);
      half_tile.set("SPLIT_K", split_k);
      EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(*nvrtc, tmpl.bind(half_tile)))
          << block_n << " " << split_k;
    }
}

// Why gemm_wgmma's rules refuse `params` on sm_90a, or "".
std::string gemm_wgmma_refusal(const ParamValues &params) {
  const Template &wgmma = templates::find("gemm_wgmma");
  return wgmma.tuning().fits(wgmma.bind(params), "sm_90a");
}

// SPLIT_K's clusters take one tile, its sums the register epilogue and tiles of 128 columns or
// fewer: the rules refuse the other layouts before anything is compiled.
TEST(GemmWgmmaRules, SplitKTakesNoOtherClusterNorTheBoxEpilogueNor256Columns) {
  const Template &wgmma = templates::find("gemm_wgmma");
  const auto fits = [](int split_k, int cluster_m, int epilogue, int block_n) {
    return gemm_wgmma_refusal({{"T", "bfloat16"},
                               {"SPLIT_K", split_k},
                               {"CLUSTER_M", cluster_m},
                               {"EPILOGUE", epilogue},
                               {"BLOCK_N", block_n}});
  };
  const std::string refusal =
      "SPLIT_K > 1 takes CLUSTER_M = CLUSTER_N = 1, EPILOGUE 0 and BLOCK_N 128 or less";
  for (int split_k : {2, 4, 8}) {
    EXPECT_EQ(fits(split_k, 1, 0, 128), "") << split_k;
    EXPECT_EQ(fits(split_k, 1, 0, 64), "") << split_k;
    EXPECT_EQ(fits(split_k, 2, 0, 128), refusal) << split_k;
    EXPECT_EQ(fits(split_k, 1, 1, 128), refusal) << split_k;
    EXPECT_EQ(fits(split_k, 1, 0, 256), refusal) << split_k;
  }
  EXPECT_EQ(fits(1, 2, 1, 256), "");
  EXPECT_TRUE(wgmma.param("SPLIT_K")->param.is_tunable());
}

// Tiles narrower than 64 columns and SWAP_AB store C from registers and read a K-major B; a
// block's shared memory holds the stages, the split's sums and the barriers.
TEST(GemmWgmmaRules, NarrowTilesAndSwapAbTakeTheRegisterEpilogueAndAKMajorB) {
  const Template &wgmma = templates::find("gemm_wgmma");
  const auto fits = [](int block_n, int swap_ab, int epilogue, int b_kmajor) {
    return gemm_wgmma_refusal({{"T", "half"},
                               {"BLOCK_N", block_n},
                               {"SWAP_AB", swap_ab},
                               {"EPILOGUE", epilogue},
                               {"B_KMAJOR", b_kmajor}});
  };
  const std::string refusal = "BLOCK_N below 64 and SWAP_AB take EPILOGUE 0 and B_KMAJOR 1";
  for (int block_n : {16, 32}) {
    EXPECT_EQ(fits(block_n, 0, 0, 1), "") << block_n;
    EXPECT_EQ(fits(block_n, 1, 0, 1), "") << block_n;
    EXPECT_EQ(fits(block_n, 0, 1, 1), refusal) << block_n;
    EXPECT_EQ(fits(block_n, 0, 0, 0), refusal) << block_n;
  }
  EXPECT_EQ(fits(64, 0, 1, 0), "");
  EXPECT_EQ(fits(128, 1, 0, 1), "");
  EXPECT_EQ(fits(128, 1, 1, 1), refusal);
  EXPECT_EQ(fits(128, 1, 0, 0), refusal);
  EXPECT_TRUE(wgmma.param("SWAP_AB")->param.is_tunable());
  // 5 stages of 128 + 64 rows of 64, the sums of 128 x 64 floats and their barriers, the
  // alignment's slack, a full and an empty barrier per stage.
  EXPECT_EQ(wgmma.tuning().shared_bytes(wgmma.bind({{"T", "half"},
                                                    {"BLOCK_N", 64},
                                                    {"STAGES", 5},
                                                    {"EPILOGUE", 0},
                                                    {"B_KMAJOR", 1},
                                                    {"SPLIT_K", 2}})),
            5 * 192 * 128 + 128 * 64 * 4 + 16 + 1024 + 5 * 16);
}

// Tiles of 64 rows (BLOCK_M 64, one consumer) serve SWAP_AB alone, also in pairs along N (which
// share A's tile in halves of 32 rows); their stages and sums hold 64 rows.
TEST(GemmWgmmaRules, HalfTilesTakeSwapAb) {
  const Template &wgmma = templates::find("gemm_wgmma");
  const auto params = [](int swap_ab, int cluster_n) {
    return ParamValues{{"T", "half"},        {"BLOCK_M", 64},          {"BLOCK_N", 32},
                       {"STAGES", 12},       {"EPILOGUE", 0},          {"B_KMAJOR", 1},
                       {"SWAP_AB", swap_ab}, {"CLUSTER_N", cluster_n}, {"SPLIT_K", 1}};
  };
  const std::string refusal = "BLOCK_M 64 takes SWAP_AB 1";
  EXPECT_EQ(gemm_wgmma_refusal(params(1, 1)), "");
  EXPECT_EQ(gemm_wgmma_refusal(params(1, 2)), "");
  EXPECT_EQ(gemm_wgmma_refusal(params(0, 1)), refusal);
  EXPECT_EQ(gemm_wgmma_refusal(params(0, 2)), refusal);
  EXPECT_TRUE(wgmma.param("BLOCK_M")->param.is_tunable());
  ParamValues split = params(1, 1);
  split.set("SPLIT_K", 2);
  EXPECT_EQ(wgmma.tuning().shared_bytes(wgmma.bind(split)),
            12 * 96 * 128 + 64 * 32 * 4 + 16 + 1024 + 12 * 16);
}

// The variants linear() takes per m on sm_90a where no tuning record says otherwise: the
// fastest of each kernel's sweep on an H200 (BENCHMARKS.md, "linear at every m") and, for
// gemm_wgmma at 9 to 128 rows, on an H100 ("linear at 16 to 128 rows with 64-row tiles of W").
TEST(LinearHeuristic, TheVariantsPerRowCountAreTheSweepsFastest) {
  for (int m : {1, 2, 4, 8}) {
    // 8192 rows of W: two blocks of 8 warps a multiprocessor, not one of 16.
    const detail::ChosenVariant many = detail::linear_skinny_variant<BFloat16>(m, 8192, 8192);
    EXPECT_EQ(many.integer("M_TILE"), 8) << m;
    EXPECT_EQ(many.integer("WARPS"), 8) << m;
    EXPECT_EQ(many.integer("UNROLL"), 4) << m;
    // 4096 rows: 16 warps of 8 chunks a step.
    const detail::ChosenVariant few = detail::linear_skinny_variant<BFloat16>(m, 4096, 14336);
    EXPECT_EQ(few.integer("WARPS"), 16) << m;
    EXPECT_EQ(few.integer("UNROLL"), 8) << m;
  }
  // 16 tokens: 32 rows of W per warp.
  const detail::ChosenVariant splitk = detail::linear_splitk_variant<BFloat16>(16, 8192, 8192);
  EXPECT_EQ(splitk.integer("ROW_BLOCKS"), 2);
  EXPECT_EQ(splitk.integer("SPLITS"), 4);
  // Which kernel: gemm_wgmma at every row count of every weight where it serves (linear_skinny
  // up to 8 rows before the H200's sweep), else linear_skinny up to 8 rows and linear_splitk
  // beyond.
  const auto kernel = [](int m, int n, int k, bool wgmma_serves) {
    return detail::heuristic_gemm_variant<BFloat16>(m, n, k, true, m <= 64, true, wgmma_serves)
        .tmpl->name();
  };
  for (const auto &[n, k] : {std::pair{4096, 4096}, {8192, 8192}, {4096, 14336}}) {
    EXPECT_EQ(kernel(1, n, k, true), "gemm_wgmma") << n << " x " << k;
    EXPECT_EQ(kernel(8, n, k, true), "gemm_wgmma") << n << " x " << k;
    EXPECT_EQ(kernel(16, n, k, true), "gemm_wgmma") << n << " x " << k;
    EXPECT_EQ(kernel(128, n, k, true), "gemm_wgmma") << n << " x " << k;
    EXPECT_EQ(kernel(8, n, k, false), "linear_skinny") << n << " x " << k;
    EXPECT_EQ(kernel(16, n, k, false), "linear_splitk") << n << " x " << k;
  }
  EXPECT_EQ(detail::heuristic_gemm_variant<BFloat16>(4096, 4096, 4096, false, false, false, true)
                .integer("SWAP_AB"),
            0);
  // W's rows as wgmma's 64-row side (SWAP_AB) up to 128 rows of A, 64 rows of W a tile; the
  // rows of A in one tile of 16, 32 or 64. At 128 rows: where 2 x W's 64-row tiles are 132 or
  // fewer, K split in two where it has 128 or more steps, else two tiles of 64 rows of A run by
  // pairs of blocks sharing W's tile (CLUSTER_N 2, cuBLAS's layout there); with more tiles of W,
  // such pairs sharing 128-row tiles of W (cuBLAS's layout at 8192 x 8192). K split in two also
  // for 33 or fewer tiles of W and 128 or more steps of K; the deepest ring up to 12 stages that
  // shared memory holds.
  struct Expected {
    int m, n, k, block_n, split_k, stages, cluster_m = 1, cluster_n = 1, block_m = 64;
  };
  for (const Expected &e : {Expected{9, 4096, 4096, 16, 1, 12},
                            {16, 4096, 14336, 16, 1, 12},
                            {20, 8192, 8192, 32, 1, 12},
                            {64, 8192, 8192, 64, 1, 12},
                            {64, 4096, 4096, 64, 1, 12},
                            {64, 4096, 14336, 64, 1, 12},
                            {128, 4096, 4096, 64, 1, 12, 1, 2},
                            {128, 8192, 8192, 64, 1, 8, 1, 2, 128},
                            {128, 8192, 4096, 64, 1, 8, 1, 2, 128},
                            {128, 4096, 14336, 128, 2, 8},
                            {100, 2048, 8192, 128, 2, 8},
                            {100, 2048, 8128, 64, 1, 12, 1, 2}}) {
    const detail::ChosenVariant wgmma = detail::gemm_wgmma_variant<Half>(e.m, e.n, e.k, true);
    SCOPED_TRACE(::testing::Message() << e.m << " x " << e.n << " x " << e.k);
    EXPECT_EQ(wgmma.integer("SWAP_AB"), 1);
    EXPECT_EQ(wgmma.integer("BLOCK_M"), e.block_m);
    EXPECT_EQ(wgmma.integer("BLOCK_N"), e.block_n);
    EXPECT_EQ(wgmma.integer("SPLIT_K"), e.split_k);
    EXPECT_EQ(wgmma.integer("STAGES"), e.stages);
    EXPECT_EQ(wgmma.integer("EPILOGUE"), 0);
    EXPECT_EQ(wgmma.integer("CLUSTER_M"), e.cluster_m);
    EXPECT_EQ(wgmma.integer("CLUSTER_N"), e.cluster_n);
  }
  EXPECT_EQ(detail::gemm_wgmma_variant<Half>(129, 8192, 8192, true).integer("SWAP_AB"), 0);
  EXPECT_EQ(detail::gemm_wgmma_variant<Half>(64, 8192, 8192, false).integer("SWAP_AB"), 0);
  EXPECT_EQ(detail::gemm_wgmma_variant<Half>(129, 8192, 8192, true).integer("BLOCK_M"), 128);
  // Enough tiles, or too short a K (fewer than 32 steps of 64): no split.
  EXPECT_EQ(detail::gemm_wgmma_variant<Half>(4096, 4096, 4096, false).integer("SPLIT_K"), 1);
  EXPECT_EQ(detail::gemm_wgmma_variant<Half>(1024, 8192, 8192, true).integer("SPLIT_K"), 1);
  EXPECT_EQ(detail::gemm_wgmma_variant<Half>(256, 4096, 1984, true).integer("SPLIT_K"), 1);
  EXPECT_EQ(detail::gemm_wgmma_variant<Half>(256, 4096, 2048, true).integer("SPLIT_K"), 2);
  // 128 rows of a 4096-row weight with K of 128 steps: one tile of A, K split in two.
  EXPECT_EQ(detail::gemm_wgmma_variant<Half>(128, 4096, 8192, true).integer("SPLIT_K"), 2);
}

TEST(GemmTensorCores, HalfAndBFloat16OnNvidiaSm80AndNewerAndOnAmdGfx942AndGfx950) {
  for (const char *target : {"sm_80", "sm_90a", "sm_100", "gfx942", "gfx950:sramecc+:xnack-"}) {
    const auto parsed = jit::Target::parse(target);
    EXPECT_TRUE(gemm_has_tensor_cores<Half>(parsed)) << target;
    EXPECT_TRUE(gemm_has_tensor_cores<BFloat16>(parsed)) << target;
    EXPECT_FALSE(gemm_has_tensor_cores<float>(parsed)) << target;
  }
  for (const char *target : {"sm_75", "gfx90a", "gfx1030", "gfx9-4-generic"})
    EXPECT_FALSE(gemm_has_tensor_cores<Half>(jit::Target::parse(target))) << target;
}

TEST(GemmReference, MultipliesATwoByThreeByAThreeByTwo) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {7, 8, 9, 10, 11, 12};
  EXPECT_EQ(reference::gemm<float>(a, b, 2, 2, 3), (std::vector<double>{58, 64, 139, 154}));
}

TEST(GemmTilesFor, LargeTilesOnlyWhereThereAreEnoughOfThem) {
  EXPECT_EQ(gemm_tiles_for(4096, 4096, 4096), (GemmTiles{128, 128, 16, 8, 8}));
  EXPECT_EQ(gemm_tiles_for(2048, 2048, 1), (GemmTiles{128, 128, 16, 8, 8}));
  EXPECT_EQ(gemm_tiles_for(1000, 1000, 1000), (GemmTiles{64, 64, 16, 4, 4}));
  EXPECT_EQ(gemm_tiles_for(1, 1, 1), (GemmTiles{64, 64, 16, 4, 4}));
}

TEST(GemmArguments, BadOnesAreRefusedBeforeAnyDeviceIsTouched) {
  Runtime rt;
  Half a[4] = {}, b[4] = {}, c[4] = {};
  const auto summary = [&](int m, const GemmTiles &tiles) {
    try {
      gemm<Half>(rt, c, a, b, m, 2, 2, tiles);
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument);
      return error.summary();
    }
    return std::string("no error");
  };
  EXPECT_EQ(summary(0, {64, 64, 16, 4, 4}),
            "kjit::ops::gemm: m, n and k must be positive, not 0, 2, 2");
  EXPECT_EQ(
      summary(2, {256, 256, 16, 1, 1}),
      "kjit::ops::gemm: tiles give 65536 threads per block; (block_m / thread_m) * (block_n / "
      "thread_n) must be in [32, 1024]");
  EXPECT_EQ(summary(2, {256, 256, 32, 8, 8}),
            "kjit::ops::gemm: tiles need more than 48 KiB of shared memory");
  EXPECT_EQ(summary(2, {64, 64, 16, 3, 4}),
            "kjit::ops::gemm: thread tiles must divide the block tiles");
}

} // namespace
} // namespace kjit::ops
