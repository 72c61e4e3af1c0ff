#include "kjit/ops/gemm.hpp"
#include "tests/ops/compile_support.hpp"

#include <gtest/gtest.h>
#include <memory>

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

// Every cluster shape with the shared-memory epilogue, and the register epilogue without
// clusters, through ptxas's report (compile_testing::wgmma_compiles_cleanly).
TEST(GemmWgmmaCompile, NoSerialisedWgmmaNoIgnoredSetmaxnregNoSpills) {
  std::unique_ptr<jit::Compiler> nvrtc;
  try {
    nvrtc = jit::load_compiler(Vendor::nvidia);
  } catch (const Error &error) {
    GTEST_SKIP() << "NVRTC is not available: " << error.summary();
  }
  const Template &tmpl = templates::find("gemm_wgmma");
  struct Layout {
    int cluster_m, cluster_n, epilogue;
  };
  for (const char *type : {"half", "bfloat16"})
    for (int block_n : {128, 256})
      for (int b_kmajor : {0, 1})
        for (const Layout layout : {Layout{1, 1, 0}, {1, 1, 1}, {2, 1, 1}, {1, 2, 1}})
          EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(
              *nvrtc, tmpl.bind({{"T", type},
                                 {"BLOCK_N", block_n},
                                 {"STAGES", block_n == 256 ? 4 : 5},
                                 {"B_KMAJOR", b_kmajor},
                                 {"CLUSTER_M", layout.cluster_m},
                                 {"CLUSTER_N", layout.cluster_n},
                                 {"EPILOGUE", layout.epilogue}})));
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
