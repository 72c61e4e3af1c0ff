#include "kjit/ops/rotary.hpp"
#include "tests/ops/compile_support.hpp"

#include <gtest/gtest.h>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

TEST_F(OpsCompileTest, RotaryDefaultVariantsCompileForGfx90aAndSm90) {
  for (const char *target : {"gfx90a", "sm_90"}) {
    for (const char *type : {"float", "half", "bfloat16"})
      EXPECT_TRUE(compiles("rotary_embedding", {{"T", type}}, target)) << type;
    EXPECT_TRUE(compiles("rotary_embedding", {{"NEOX", 0}}, target)) << "GPT-J style";
    // An odd-ish head with a partial rotation, one pair per access, in both styles.
    for (int neox : {0, 1})
      EXPECT_TRUE(compiles(
          "rotary_embedding",
          {{"T", "half"}, {"HEAD_SIZE", 80}, {"ROTARY_DIM", 34}, {"NEOX", neox}, {"VEC", 1}},
          target));
  }
}

TEST_F(OpsCompileTest, RotaryTemplateRefusesARotationWiderThanTheHead) {
  EXPECT_TRUE(refuses_to_compile("rotary_embedding", {{"HEAD_SIZE", 64}, {"ROTARY_DIM", 128}},
                                 "sm_90", "ROTARY_DIM: even, <= HEAD_SIZE"));
}

TEST(RotaryArguments, BadOnesAreRefusedBeforeAnyDeviceIsTouched) {
  Runtime rt; // no device needed: the arguments are checked first
  std::int64_t positions[1] = {};
  float q[8] = {}, k[8] = {}, cache[8] = {};
  const auto code_and_message = [&](int head_size, int rotary_dim, int tokens) {
    try {
      rotary_embedding<float>(rt, positions, q, k, cache, 1, tokens, 1, 1, head_size, rotary_dim,
                              RotaryStyle::neox);
    } catch (const Error &error) {
      return std::make_pair(error.code(), error.summary());
    }
    return std::make_pair(Errc::bad_config, std::string("no error"));
  };
  auto [code, message] = code_and_message(8, 5, 1);
  EXPECT_EQ(code, Errc::bad_argument);
  EXPECT_EQ(message,
            "kjit::ops::rotary_embedding: rotary_dim 5 must be even and in [2, head_size = 8]");
  std::tie(code, message) = code_and_message(8, 16, 1);
  EXPECT_EQ(code, Errc::bad_argument) << message;
  std::tie(code, message) = code_and_message(2048, 16, 1);
  EXPECT_EQ(message, "kjit::ops::rotary_embedding: head_size 2048 is outside [2, 1024]");
  std::tie(code, message) = code_and_message(8, 8, 0);
  EXPECT_EQ(code, Errc::bad_argument) << message;
  EXPECT_THROW(rotary_embedding<float>(rt, positions, nullptr, k, cache, 1, 1, 1, 1, 8, 8,
                                       RotaryStyle::neox),
               Error);
}

// Position 1 of the cache rotates frequency 0 by 90 degrees (cos 0, sin 1) and frequency 1 by 180
// degrees (cos -1, sin 0); position 0 is the identity. Heads of 6 with rotary_dim 4: the last two
// elements of each head stay as they are.
const std::vector<float> cache = {1, 1, 0, 0, /* position 1 */ 0, -1, 1, 0};
const std::vector<float> head = {1, 2, 3, 4, 5, 6};

TEST(RotaryReference, NeoxRotatesHalvesByTheCachedAngles) {
  const std::vector<std::int64_t> positions = {1};
  EXPECT_EQ(reference::rotary_embedding<float>(positions, head, cache, 1, 6, 4, RotaryStyle::neox),
            (std::vector<double>{-3, -2, 1, -4, 5, 6}));
}

TEST(RotaryReference, GptjRotatesAdjacentPairsByTheCachedAngles) {
  const std::vector<std::int64_t> positions = {1};
  EXPECT_EQ(reference::rotary_embedding<float>(positions, head, cache, 1, 6, 4, RotaryStyle::gptj),
            (std::vector<double>{-2, 1, -3, -4, 5, 6}));
}

TEST(RotaryReference, PositionZeroAndPositionsOutsideTheCacheLeaveTheHeadAsItIs) {
  const std::vector<double> unchanged(head.begin(), head.end());
  for (std::int64_t position : {0, 2, -1}) {
    const std::vector<std::int64_t> positions = {position};
    EXPECT_EQ(
        reference::rotary_embedding<float>(positions, head, cache, 1, 6, 4, RotaryStyle::neox),
        unchanged)
        << position;
  }
}

} // namespace
} // namespace kjit::ops
