#include "kjit/error.hpp"
#include "kjit/templates/library.hpp"
#include "runtime/src/signature.hpp"

#include <gtest/gtest.h>

namespace kjit {
namespace {

TEST(Signature, FollowsTheDeclaredArgumentsWithTypeParametersBound) {
  const Template &axpy = templates::find("axpy");
  const Instance instance = axpy.bind({{"T", "half"}});
  EXPECT_EQ(instance.argument_types(),
            (std::vector<std::string>{"const half*", "half*", "float", "int"}));
  const KernelSignature signature = signature_of(instance);
  ASSERT_EQ(signature.parameters().size(), 4u);
  EXPECT_EQ(signature.parameters()[0].size, sizeof(void *));
  EXPECT_EQ(signature.parameters()[2].size, 4u);
  EXPECT_NO_THROW((signature.check<const short *, short *, float, int>("axpy")));
  EXPECT_THROW((signature.check<const short *, short *, double, int>("axpy")), Error);
}

TEST(Signature, ByValueElementTypesTakeTheirOwnSize) {
  const Template fill("fill", "", {{"T", Param::type({"half", "float", "double"})}},
                      {.arguments = {"T* __restrict__", "T"}});
  EXPECT_EQ(signature_of(fill.bind({{"T", "half"}})).parameters()[1].size, 2u);
  EXPECT_EQ(signature_of(fill.bind({{"T", "double"}})).parameters()[1].size, 8u);
  EXPECT_EQ(signature_of(fill.bind({{"T", "double"}})).parameters()[0].type, "double*");
}

TEST(Signature, OnlyWholeIdentifiersAreReplaced) {
  const Template tiles("tiles", "", {{"T", Param::type({"float"})}}, {.arguments = {"Tile*", "T"}});
  EXPECT_EQ(tiles.bind({{"T", "float"}}).argument_types(),
            (std::vector<std::string>{"Tile*", "float"}));
}

TEST(Signature, UnknownByValueTypesAndUndeclaredArgumentsAreClearErrors) {
  const Template by_struct("by_struct", "", {}, {.arguments = {"Params"}});
  try {
    signature_of(by_struct.bind({}));
    FAIL() << "a struct argument was sized";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    EXPECT_NE(error.summary().find("cannot size kernel argument type 'Params'"), std::string::npos);
  }
  const Template undeclared("undeclared", "", {});
  EXPECT_THROW(signature_of(undeclared.bind({})), Error);
  EXPECT_THROW(Template("bad", "", {}, {.arguments = {"int; evil"}}), Error);
}

} // namespace
} // namespace kjit
