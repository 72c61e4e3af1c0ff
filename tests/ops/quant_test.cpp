#include "kjit/ops/quant.hpp"
#include "tests/ops/compile_support.hpp"

#include <cmath>
#include <gtest/gtest.h>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

TEST_F(OpsCompileTest, QuantDefaultVariantsCompileForGfx90aAndSm90) {
  for (const char *type : {"float", "half", "bfloat16"}) {
    for (const char *target : {"gfx90a", "sm_90"})
      EXPECT_TRUE(compiles("dynamic_per_token_quant_int8", {{"T", type}}, target)) << type;
    EXPECT_TRUE(compiles("dynamic_per_token_quant_fp8", {{"T", type}}, "sm_90")) << type;
  }
  // A row the packs do not fill evenly, one element per access.
  EXPECT_TRUE(compiles("dynamic_per_token_quant_int8",
                       {{"HIDDEN", 4097}, {"VEC", 1}, {"THREADS", 1024}}, "gfx90a"));
}

TEST_F(OpsCompileTest, TheFp8TemplateNamesWhyItDoesNotCompileForAmd) {
  EXPECT_TRUE(refused_before_compiling("dynamic_per_token_quant_fp8", "gfx90a", "NVIDIA targets"));
}

TEST(QuantFp8, OnlyNvidiaSm89AndNewerHaveE4m3) {
  for (const char *target : {"gfx90a", "gfx908", "gfx1030", "sm_80", "sm_86"})
    EXPECT_FALSE(has_fp8_e4m3(jit::Target::parse(target))) << target;
  for (const char *target : {"sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"})
    EXPECT_TRUE(has_fp8_e4m3(jit::Target::parse(target))) << target;
}

TEST(QuantFp8, TheOperatorRefusesATargetWithoutE4m3NamingIt) {
  try {
    require_fp8_e4m3(jit::Target::parse("gfx90a"));
    FAIL() << "accepted gfx90a";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::unsupported_target);
    EXPECT_NE(error.summary().find("gfx90a"), std::string::npos) << error.summary();
  }
  EXPECT_NO_THROW(require_fp8_e4m3(jit::Target::parse("sm_90")));
}

TEST(QuantFp8, E4m3DecodesKnownCodes) {
  EXPECT_EQ(decode_e4m3(0x38), 1.0);
  EXPECT_EQ(decode_e4m3(0xb8), -1.0);
  EXPECT_EQ(decode_e4m3(0x7e), 448.0);
  EXPECT_EQ(decode_e4m3(0x01), 0x1p-9); // the smallest subnormal
  EXPECT_EQ(decode_e4m3(0x08), 0x1p-6); // the smallest normal
  EXPECT_TRUE(std::isnan(decode_e4m3(0x7f)));
  EXPECT_TRUE(std::isnan(decode_e4m3(0xff)));
}

TEST(QuantFp8, E4m3RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(encode_e4m3(0.3), 0x2a);     // 0.3125, the nearest
  EXPECT_EQ(encode_e4m3(17.0), 0x58);    // halfway between 16 and 18: down to even
  EXPECT_EQ(encode_e4m3(19.0), 0x5a);    // halfway between 18 and 20: up to even (20)
  EXPECT_EQ(encode_e4m3(15.0), 0x57);    // exact
  EXPECT_EQ(encode_e4m3(15.5), 0x58);    // halfway between 15 and 16: to even (16)
  EXPECT_EQ(encode_e4m3(15.9), 0x58);    // carries into the next binade (16)
  EXPECT_EQ(encode_e4m3(1000.0), 0x7e);  // saturates to 448
  EXPECT_EQ(encode_e4m3(-1000.0), 0xfe); // and to -448
  EXPECT_EQ(encode_e4m3(0x1p-10), 0x00); // halfway to the smallest subnormal: even (zero)
  EXPECT_EQ(encode_e4m3(NAN), 0x7f);
}

TEST(QuantFp8, EveryCodeSurvivesARoundTrip) {
  for (unsigned bits = 0; bits < 256; ++bits) {
    if ((bits & 0x7f) == 0x7f)
      continue; // NaN
    EXPECT_EQ(encode_e4m3(decode_e4m3(static_cast<std::uint8_t>(bits))), bits);
  }
}

TEST(QuantReference, Int8ScalesByTheRowMaximumAndRoundsToNearestEven) {
  const std::vector<float> rows = {127,
                                   -63.5,
                                   0.4,
                                   -0.6,
                                   /* zeros */ 0,
                                   0,
                                   0,
                                   0,
                                   /* max 2.54 */ 1.27f,
                                   -2.54f,
                                   0,
                                   0};
  const auto q = reference::dynamic_per_token_quant_int8<float>(rows, 3, 4);
  EXPECT_EQ(q.values, (std::vector<std::int8_t>{127, -64, 0, -1, 0, 0, 0, 0, 64, -127, 0, 0}));
  EXPECT_EQ(q.scales[0], 1.0);
  EXPECT_EQ(q.scales[1], 0.0) << "a zero row has scale 0 and zero output, no division by zero";
  EXPECT_DOUBLE_EQ(q.scales[2], static_cast<double>(2.54f) / 127);
}

TEST(QuantReference, Fp8ScalesTheRowMaximumTo448) {
  const std::vector<float> rows = {448, -1, 0.3f, 17, /* zeros */ 0, 0, 0, 0};
  const auto q = reference::dynamic_per_token_quant_fp8<float>(rows, 2, 4);
  EXPECT_EQ(q.values, (std::vector<std::uint8_t>{0x7e, 0xb8, 0x2a, 0x58, 0, 0, 0, 0}));
  EXPECT_EQ(q.scales, (std::vector<double>{1.0, 0.0}));
}

TEST(QuantArguments, BadOnesAreRefusedBeforeAnyDeviceIsTouched) {
  Runtime rt;
  std::int8_t out[4];
  float scales[1], input[4] = {};
  try {
    dynamic_per_token_quant_int8<float>(rt, out, scales, input, 1, 70000);
    FAIL() << "accepted hidden 70000";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    EXPECT_EQ(error.summary(),
              "kjit::ops::dynamic_per_token_quant_int8: hidden 70000 is outside [1, 65536]");
  }
  EXPECT_THROW(dynamic_per_token_quant_int8<float>(rt, out, scales, input, 0, 4), Error);
  EXPECT_THROW(dynamic_per_token_quant_int8<float>(rt, out, nullptr, input, 1, 4), Error);
}

} // namespace
} // namespace kjit::ops
