#include "kjit/error.hpp"
#include "kjit/templates/library.hpp"
#include "runtime/src/signature.hpp"

#include <cstddef>
#include <cstdint>
#include <gtest/gtest.h>
#include <vector>

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
  const Template fill("fill", "", {{"T", ParamSchema::type({"half", "float", "double"})}},
                      {.arguments = {"T* __restrict__", "T"}});
  EXPECT_EQ(signature_of(fill.bind({{"T", "half"}})).parameters()[1].size, 2u);
  EXPECT_EQ(signature_of(fill.bind({{"T", "double"}})).parameters()[1].size, 8u);
  EXPECT_EQ(signature_of(fill.bind({{"T", "double"}})).parameters()[0].type, "double*");
}

TEST(Signature, OnlyWholeIdentifiersAreReplaced) {
  const Template tiles("tiles", "", {{"T", ParamSchema::type({"float"})}},
                       {.arguments = {"Tile*", "T"}});
  EXPECT_EQ(tiles.bind({{"T", "float"}}).argument_types(),
            (std::vector<std::string>{"Tile*", "float"}));
}

// Every spelling of the scalar and vector types HIP and CUDA kernels take by value is sized as the
// host lays it out, which is what a launch copies.
TEST(Signature, ScalarAndVectorTypesOfBothVendorsAreSized) {
  struct Expected {
    const char *type;
    std::uint32_t size;
    std::uint32_t alignment;
  };
  const Expected cases[] = {{"unsigned long long", 8, 8},
                            {"long long int", 8, 8},
                            {"unsigned short int", 2, 2},
                            {"__nv_bfloat16", 2, 2},
                            {"__half2", 4, 4},
                            {"__nv_bfloat162", 4, 4},
                            {"char4", 4, 4},
                            {"uchar3", 3, 1},
                            {"short2", 4, 4},
                            {"float2", 8, 8},
                            {"float3", 12, 4},
                            {"float4", 16, 16},
                            {"int4", 16, 16},
                            {"uint2", 8, 8},
                            {"longlong2", 16, 16},
                            {"double4", 32, 16},
                            {"ulong1", 8, 8},
                            {"const float4", 16, 16}};
  for (const Expected &expected : cases) {
    const Template by_value("by_value", "", {}, {.arguments = {expected.type}});
    const KernelParameter parameter = signature_of(by_value.bind({})).parameters().at(0);
    EXPECT_EQ(parameter.size, expected.size) << expected.type;
    EXPECT_EQ(parameter.alignment, expected.alignment) << expected.type;
  }
  // Where the host has the type, the table agrees with it.
  const Template host("host", "", {}, {.arguments = {"unsigned long long", "size_t", "bool"}});
  const std::vector<KernelParameter> parameters = signature_of(host.bind({})).parameters();
  ASSERT_EQ(parameters.size(), 3u);
  EXPECT_EQ(parameters[0].size, sizeof(unsigned long long));
  EXPECT_EQ(parameters[1].size, sizeof(std::size_t));
  EXPECT_EQ(parameters[2].size, sizeof(bool));
}

TEST(Signature, UnknownByValueTypesAndUndeclaredArgumentsAreClearErrors) {
  const Template by_struct("by_struct", "", {}, {.arguments = {"ParamValues"}});
  try {
    signature_of(by_struct.bind({}));
    FAIL() << "a struct argument was sized";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    EXPECT_NE(error.summary().find("cannot size kernel argument type 'ParamValues'"),
              std::string::npos);
  }
  const Template undeclared("undeclared", "", {});
  try {
    signature_of(undeclared.bind({}));
    FAIL() << "a template without arguments was given a signature";
  } catch (const Error &error) {
    // The call the message names exists: Runtime::kernel(tmpl, params, KernelSignature).
    EXPECT_NE(error.summary().find("rt.kernel(tmpl, params, KernelSignature::of<"),
              std::string::npos)
        << error.summary();
  }
  EXPECT_THROW(Template("bad", "", {}, {.arguments = {"int; evil"}}), Error);
}

} // namespace
} // namespace kjit
