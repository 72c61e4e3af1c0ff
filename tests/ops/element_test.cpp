#include "kjit/ops/element.hpp"

#include <cmath>
#include <gtest/gtest.h>

namespace kjit::ops {
namespace {

TEST(Element, HalfDecodesKnownBitPatterns) {
  EXPECT_EQ(to_double(Half{0x3c00}), 1.0);
  EXPECT_EQ(to_double(Half{0xc000}), -2.0);
  EXPECT_EQ(to_double(Half{0x7bff}), 65504.0);
  EXPECT_EQ(to_double(Half{0x0001}), 0x1p-24); // the smallest subnormal
  EXPECT_TRUE(std::isinf(to_double(Half{0x7c00})));
  EXPECT_TRUE(std::isnan(to_double(Half{0x7e00})));
}

TEST(Element, HalfRoundsToNearestEven) {
  EXPECT_EQ(from_double<Half>(1.0).bits, 0x3c00);
  EXPECT_EQ(from_double<Half>(1.0 + 0x1p-11).bits, 0x3c00);     // halfway: down to even
  EXPECT_EQ(from_double<Half>(1.0 + 3 * 0x1p-11).bits, 0x3c02); // halfway: up to even
  EXPECT_EQ(from_double<Half>(2047.5 * 0x1p-10).bits, 0x4000);  // carries into the next binade
  EXPECT_EQ(from_double<Half>(0x1p-25 * 3).bits, 0x0002);       // subnormal, rounded
  EXPECT_EQ(from_double<Half>(-65519.0).bits, 0xfbff);
  EXPECT_EQ(from_double<Half>(65520.0).bits, 0x7c00);
}

TEST(Element, EveryFiniteHalfSurvivesARoundTrip) {
  for (unsigned bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00)
      continue; // infinities and NaNs
    ASSERT_EQ(from_double<Half>(to_double(Half{static_cast<std::uint16_t>(bits)})).bits, bits);
  }
}

TEST(Element, BFloat16IsTheTopHalfOfAFloatRoundedToNearestEven) {
  EXPECT_EQ(to_double(BFloat16{0x3f80}), 1.0);
  EXPECT_EQ(from_double<BFloat16>(1.0).bits, 0x3f80);
  EXPECT_EQ(from_double<BFloat16>(1.0 + 0x1p-8).bits, 0x3f80);     // halfway: down to even
  EXPECT_EQ(from_double<BFloat16>(1.0 + 3 * 0x1p-8).bits, 0x3f82); // halfway: up to even
  EXPECT_EQ(from_double<BFloat16>(-3.0).bits, 0xc040);
  EXPECT_TRUE(std::isnan(to_double(from_double<BFloat16>(NAN))));
}

TEST(Element, NamesAreTheTemplateTypeValues) {
  EXPECT_EQ(element_name<float>(), "float");
  EXPECT_EQ(element_name<Half>(), "half");
  EXPECT_EQ(element_name<BFloat16>(), "bfloat16");
}

} // namespace
} // namespace kjit::ops
