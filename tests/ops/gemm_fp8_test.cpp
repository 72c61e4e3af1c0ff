// The FP8 GEMM and linear_splitk on the CPU: their variants compile for sm_90a through NVRTC
// with nothing serialised, ignored or spilled; the double-precision reference; the wrappers'
// refusals of bad input before any device is touched; the heuristic's split of K.
#include "kjit/ops/gemm_fp8.hpp"
#include "kjit/ops/quant.hpp"
#include "ops/src/variants.hpp"
#include "tests/ops/compile_support.hpp"

#include <gtest/gtest.h>
#include <memory>
#include <regex>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

// ptxas's -v report for `params` of the built-in `name` on sm_90a, compiled as kjit compiles it;
// nullopt where NVRTC is not installed.
std::optional<std::string> ptxas_report(const std::string &name, const ParamValues &params) {
  std::unique_ptr<jit::Compiler> nvrtc;
  try {
    nvrtc = jit::load_compiler(Vendor::nvidia);
  } catch (const Error &) {
    return std::nullopt;
  }
  return compile_testing::ptxas_report(*nvrtc, templates::find(name).bind(params),
                                       jit::Target::parse("sm_90a"));
}

// ptxas warns without failing when it serialises wgmma (C7510) or ignores setmaxnreg (C7508),
// and names spills only in its -v report.
void expect_clean_report(const std::string &log) {
  EXPECT_EQ(log.find("C7510"), std::string::npos) << "wgmma serialised";
  EXPECT_EQ(log.find("instructions are serialized"), std::string::npos)
      << "wgmma serialised (C7514: registers of one in flight read)";
  EXPECT_EQ(log.find("C7508"), std::string::npos) << "setmaxnreg ignored";
  static const std::regex spills(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::smatch found;
  ASSERT_TRUE(std::regex_search(log, found, spills)) << "no ptxas -v report";
  EXPECT_EQ(found[1].str(), "0");
  EXPECT_EQ(found[2].str(), "0");
}

TEST(GemmFp8Compile, EveryScalingAndTileWidthCompilesCleanForSm90a) {
  struct Shape {
    int scaling, block_n, stages, cluster_m, pingpong, overlap = 0, a_registers = 0, epilogue = 0;
  };
  // Every width block scales take (two blocks of B's scales a tile from 96 up, the widest
  // promoted sums at 160, 256 in halves, A from shared memory or registers), with and without
  // clusters and turns, two k-blocks' sums at once (OVERLAP) at the widths that take it, and the
  // other forms' extremes; D through shared memory and the copy engine (EPILOGUE 1) beside each.
  // clang-format off
  for (const Shape shape : {Shape{2, 64, 7, 1, 1}, {2, 96, 7, 2, 0}, {2, 112, 7, 1, 1},
                            {2, 128, 6, 1, 1}, {2, 128, 5, 2, 0}, {2, 144, 6, 2, 1},
                            {2, 160, 6, 1, 0}, {2, 160, 6, 2, 1}, {2, 160, 5, 2, 1},
                            {1, 256, 4, 2, 1}, {1, 160, 6, 1, 1}, {0, 256, 4, 1, 1},
                            {0, 64, 6, 2, 1}, {2, 128, 6, 1, 1, 1}, {2, 128, 6, 2, 0, 1},
                            {2, 64, 7, 1, 1, 1}, {1, 176, 5, 2, 0}, {1, 240, 4, 2, 0},
                            {0, 224, 4, 1, 0}, {2, 256, 4, 2, 1}, {2, 256, 4, 1, 0},
                            {2, 256, 4, 2, 1, 0, 1}, {2, 256, 4, 1, 0, 0, 1},
                            {2, 256, 4, 1, 0, 0, 1, 1}, {2, 256, 4, 2, 0, 0, 1, 1},
                            {2, 256, 4, 1, 0, 0, 0, 1}, {2, 128, 6, 1, 1, 1, 0, 1},
                            {2, 64, 6, 2, 1, 1, 0, 1}, {0, 256, 4, 2, 0, 0, 0, 1},
                            {1, 192, 4, 1, 1, 0, 0, 1}}) {
    // clang-format on
    const std::optional<std::string> log =
        ptxas_report("gemm_fp8", {{"SCALING", shape.scaling},
                                  {"BLOCK_N", shape.block_n},
                                  {"STAGES", shape.stages},
                                  {"CLUSTER_M", shape.cluster_m},
                                  {"PINGPONG", shape.pingpong},
                                  {"OVERLAP", shape.overlap},
                                  {"A_REGISTERS", shape.a_registers},
                                  {"EPILOGUE", shape.epilogue}});
    if (!log)
      GTEST_SKIP() << "NVRTC is not available";
    SCOPED_TRACE("SCALING " + std::to_string(shape.scaling) + " BLOCK_N " +
                 std::to_string(shape.block_n) + " CLUSTER_M " + std::to_string(shape.cluster_m) +
                 " PINGPONG " + std::to_string(shape.pingpong) + " A_REGISTERS " +
                 std::to_string(shape.a_registers) + " EPILOGUE " + std::to_string(shape.epilogue) +
                 "\n" + *log);
    expect_clean_report(*log);
  }
}

// Every variant the heuristic picks is one the template's rules take (no OVERLAP beside wide
// tiles, stages that fit), whatever the form and shape.
TEST(GemmFp8Variant, TheHeuristicsVariantsFitTheTemplatesRules) {
  for (const auto &[block, row_wise] : {std::pair{true, false}, {false, false}, {false, true}})
    for (const int m : {1, 64, 128, 129, 512, 4096, 65536})
      for (const int n : {8, 136, 2112, 4096, 7168}) {
        const detail::ChosenVariant variant = detail::gemm_fp8_variant(block, row_wise, m, n);
        EXPECT_EQ(variant.tmpl->tuning().fits(variant.tmpl->bind(variant.params), "sm_90a"), "")
            << m << " x " << n << " block " << block;
      }
}

// Per tensor and row-wise, the width whose waves over 132 multiprocessors cost least (those that
// store through the copy engine at 0.9): 192 columns at 4096 x 2112 (176 made whole waves from
// registers, 256 left the third of three waves mostly idle), 256 where it makes nearly whole
// waves, the narrowest where one row of tiles is less than a wave.
TEST(GemmFp8Variant, ScaledFormsTakeTheTileWidthThatFillsTheWaves) {
  const auto width = [](bool row_wise, int m, int n) {
    return detail::gemm_fp8_variant(false, row_wise, m, n).integer("BLOCK_N");
  };
  for (const bool row_wise : {false, true}) {
    EXPECT_EQ(width(row_wise, 4096, 2112), 192); // 176 before EPILOGUE 1 (fp8f)
    EXPECT_EQ(width(row_wise, 4096, 7168), 256);
    EXPECT_EQ(width(row_wise, 4096, 4096), 256);
    EXPECT_EQ(width(row_wise, 64, 7168), 64);
    EXPECT_EQ(width(row_wise, 128, 2112), 64);
  }
}

// 256- and 192-column tiles store D through shared memory and the copy engine (EPILOGUE 1), every
// form; other widths from registers.
TEST(GemmFp8Variant, TilesOf192And256ColumnsStoreThroughTheCopyEngine) {
  for (const auto &[block, row_wise] : {std::pair{true, false}, {false, false}, {false, true}})
    for (const auto &[m, n] : {std::pair{4096, 7168}, {4096, 4096}, {4096, 2112}, {64, 7168}}) {
      const detail::ChosenVariant variant = detail::gemm_fp8_variant(block, row_wise, m, n);
      const std::int64_t block_n = variant.integer("BLOCK_N");
      EXPECT_EQ(variant.integer("EPILOGUE"), block_n == 256 || block_n == 192 ? 1 : 0)
          << m << " x " << n << " block " << block;
      if (m == 4096 && (n != 2112 || !block)) {
        EXPECT_EQ(variant.integer("EPILOGUE"), 1) << m << " x " << n << " block " << block;
      }
    }
}

TEST(LinearSplitkCompile, TheHeuristicsVariantsCompileWithoutSpillsForSm90a) {
  for (int m : {17, 32, 64, 128}) {
    const detail::ChosenVariant variant = detail::linear_splitk_variant<BFloat16>(m, 4096, 4096);
    const std::optional<std::string> log = ptxas_report("linear_splitk", variant.params);
    if (!log)
      GTEST_SKIP() << "NVRTC is not available";
    SCOPED_TRACE("m " + std::to_string(m) + "\n" + *log);
    expect_clean_report(*log);
  }
}

TEST_F(OpsCompileTest, Fp8AndSplitkRefuseTargetsWithoutTheirInstructions) {
  EXPECT_TRUE(refused_before_compiling("gemm_fp8", "sm_89", "sm_90a"));
  EXPECT_TRUE(refused_before_compiling("gemm_fp8", "gfx942", "sm_90a"));
  EXPECT_TRUE(refused_before_compiling("linear_splitk", "sm_80", "sm_90 and newer"));
}

TEST(LinearSplitkVariant, SplitsKUntilThereAreAbout2048PiecesOfWork) {
  const auto splits = [](int m, int n, int k) {
    return detail::linear_splitk_variant<Half>(m, n, k).integer("SPLITS");
  };
  // 8192 rows of W are 512 pieces of 16 rows: four splits make 2048.
  EXPECT_EQ(splits(32, 8192, 8192), 4);
  // 4096 rows: eight splits, the most.
  EXPECT_EQ(splits(64, 4096, 4096), 8);
  EXPECT_EQ(splits(128, 4096, 4096), 8);
  // A short K keeps two slices per block: 128 in slices of 64 splits in two, and at 16 tokens
  // (slices of 128) not at all.
  EXPECT_EQ(splits(64, 4096, 128), 2);
  EXPECT_EQ(splits(16, 4096, 128), 1);
  // 32 and 64 tokens take 32 rows of W per warp; from 32 tokens slices of 64.
  EXPECT_EQ(detail::linear_splitk_variant<Half>(33, 4096, 4096).integer("ROW_BLOCKS"), 2);
  EXPECT_EQ(detail::linear_splitk_variant<Half>(16, 4096, 4096).integer("K_SLICE"), 128);
  EXPECT_EQ(detail::linear_splitk_variant<Half>(32, 4096, 4096).integer("K_SLICE"), 64);
}

TEST(GemmFp8Reference, DecodesE4m3ExactlyAndAppliesEachFormsScales) {
  // 2 x 256 A and 2 x 256 B (n = 2, k = 256: two scale blocks along K).
  const int m = 2, n = 2, k = 256;
  std::vector<std::uint8_t> a(m * k, encode_e4m3(0)), b(n * k, encode_e4m3(0));
  a[0] = encode_e4m3(1.5);         // row 0, block 0
  a[200] = encode_e4m3(-0.015625); // row 0, block 1 (2^-6, exact)
  a[k + 3] = encode_e4m3(448);     // row 1, block 0 (e4m3's largest)
  b[0] = encode_e4m3(2);           // column 0
  b[200] = encode_e4m3(3);
  b[k + 3] = encode_e4m3(0.5); // column 1
  ASSERT_EQ(decode_e4m3(a[200]), -0.015625);
  // Block scales: scale_a [2, 2], scale_b [1, 2].
  const std::vector<float> block_a = {0.5f, 4.0f, 1.0f, 1.0f}, block_b = {0.25f, 8.0f};
  const std::vector<double> blocks = reference::gemm_fp8(a, block_a, b, block_b, m, n, k, true);
  EXPECT_EQ(blocks, (std::vector<double>{1.5 * 0.5 * 2 * 0.25 + -0.015625 * 4.0 * 3 * 8.0, 0, 0,
                                         448 * 0.5 * 0.25}));
  // Row-wise: scale_a [2, 1], scale_b [1, 2].
  const std::vector<float> rows_a = {2.0f, 0.5f}, columns_b = {1.0f, 3.0f};
  EXPECT_EQ(reference::gemm_fp8(a, rows_a, b, columns_b, m, n, k, false),
            (std::vector<double>{2.0 * (1.5 * 2 + -0.015625 * 3), 0, 0, 0.5 * 448 * 0.5 * 3.0}));
  // Per tensor.
  const std::vector<float> one_a = {0.5f}, one_b = {4.0f};
  EXPECT_EQ(reference::gemm_fp8(a, one_a, b, one_b, m, n, k, false),
            (std::vector<double>{2.0 * (1.5 * 2 + -0.015625 * 3), 0, 0, 2.0 * 448 * 0.5}));
}

// The summary of the error a call throws, checking it is bad_argument.
template <typename Call> std::string refusal(const Call &call) {
  try {
    call();
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument) << error.summary();
    return error.summary();
  }
  return "no error";
}

TEST(GemmFp8Arguments, BadOnesAreRefusedInOneLineBeforeAnyDeviceIsTouched) {
  Runtime rt;
  alignas(16) static std::uint8_t a[16], b[16];
  alignas(16) static BFloat16 d[16];
  alignas(16) static float sa[16], sb[16];
  const int m = 256, n = 256, k = 512;
  const ScaleTensor good_a{sa, m, k / 128}, good_b{sb, 2, k / 128};
  const auto block = [&](const std::uint8_t *a_ptr, ScaleTensor scale_a, ScaleTensor scale_b,
                         int k_size) {
    return refusal([&] { gemm_fp8_blockscale(rt, d, a_ptr, scale_a, b, scale_b, m, n, k_size); });
  };
  EXPECT_EQ(block(a, good_a, good_b, 320),
            "kjit::ops::gemm_fp8_blockscale: k = 320 is not a multiple of 128 (the scale block)");
  EXPECT_EQ(block(a, {sa, m, 3}, good_b, k),
            "kjit::ops::gemm_fp8_blockscale: scale_a is [256, 3], must be [256, 4]");
  EXPECT_EQ(block(a, good_a, {sb, 1, 4}, k),
            "kjit::ops::gemm_fp8_blockscale: scale_b is [1, 4], must be [2, 4]");
  EXPECT_EQ(block(a + 8, good_a, good_b, k),
            "kjit::ops::gemm_fp8_blockscale: a is not 16-byte aligned");
  EXPECT_EQ(block(nullptr, good_a, good_b, k), "kjit::ops::gemm_fp8_blockscale: a is null");
  EXPECT_EQ(refusal([&] { gemm_fp8_blockscale(rt, d, a, good_a, b, good_b, m, 260, k); }),
            "kjit::ops::gemm_fp8_blockscale: n = 260 is not a multiple of 8");
  const auto scaled = [&](ScaleTensor scale_a, ScaleTensor scale_b, int k_size) {
    return refusal([&] { gemm_fp8_scaled(rt, d, a, scale_a, b + 4, scale_b, m, n, k_size); });
  };
  EXPECT_EQ(scaled({sa, 1, 1}, {sb, 1, 1}, 520),
            "kjit::ops::gemm_fp8_scaled: k = 520 is not a multiple of 16 (16-byte rows of a and "
            "b)");
  EXPECT_EQ(scaled({sa, 1, 1}, {sb, 1, 1}, k),
            "kjit::ops::gemm_fp8_scaled: b is not 16-byte aligned");
  EXPECT_EQ(refusal([&] {
              gemm_fp8_scaled(rt, d, a, {sa, m, 1}, b, {sb, n, 1}, m, n, k);
            }),
            "kjit::ops::gemm_fp8_scaled: scale_b is [256, 1], must be [1, 256]");
  EXPECT_EQ(refusal([&] {
              gemm_fp8_scaled(rt, d, a, {sa, 1, 1}, b, {sb, 1, n}, m, n, k);
            }),
            "kjit::ops::gemm_fp8_scaled: scale_a is [1, 1], must be [256, 1]");
}

} // namespace
} // namespace kjit::ops
