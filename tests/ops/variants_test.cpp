// The variants the operators choose (ops/src/variants.hpp): reading their launch geometry.
#include "ops/src/variants.hpp"

#include "kjit/error.hpp"

#include <gtest/gtest.h>

namespace kjit::ops::detail {
namespace {

TEST(ChosenVariant, ReadsAnIntegerParameterByName) {
  const ChosenVariant variant{&templates::find("rms_norm"),
                              {{"T", "half"}, {"HIDDEN", 4096}, {"VEC", 8}, {"THREADS", 512}}};
  EXPECT_EQ(variant.integer("VEC"), 8);
  EXPECT_EQ(variant.integer("THREADS"), 512);
}

// It once dereferenced the end of the list, undefined behaviour, for a name the variant lacks.
TEST(ChosenVariant, AParameterItLacksIsAnErrorNamingIt) {
  const ChosenVariant variant{&templates::find("rms_norm"), {{"T", "half"}, {"VEC", 8}}};
  try {
    variant.integer("THREADS");
    FAIL() << "read THREADS from a variant without it";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_parameter);
    EXPECT_NE(error.summary().find("'THREADS'"), std::string::npos) << error.summary();
  }
}

} // namespace
} // namespace kjit::ops::detail
