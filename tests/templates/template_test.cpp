#include "kjit/error.hpp"
#include "kjit/templates/library.hpp"
#include "kjit/templates/template.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

namespace kjit {
namespace {

Template make_scale(std::string source = "template <typename T, int N> __global__ void scale();") {
  return Template("scale", std::move(source),
                  {{"T", ParamSchema::type({"float", "half", "bfloat16"})},
                   {"N", ParamSchema::integer(1, 1 << 20, 256)}});
}

// The error's code and a fragment its message must contain.
void expect_error(const std::function<void()> &action, Errc code, const std::string &fragment) {
  try {
    action();
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), code) << error.what();
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

// Looked up while this file's statics are initialised, in an order the library does not control:
// the built-in templates must already be whole then (a user's namespace-scope reference does this).
const Template &axpy_found_at_static_initialisation = templates::find("axpy");

TEST(Library, BuiltinTemplatesCanBeFoundDuringStaticInitialisation) {
  EXPECT_EQ(axpy_found_at_static_initialisation.name(), "axpy");
  EXPECT_EQ(axpy_found_at_static_initialisation.bind({{"T", "half"}}).canonical_params(),
            "ITEMS=4,T=half");
}

TEST(Template, BindsInDeclarationOrderAndSpellsUnderlyingTypes) {
  const Template scale = make_scale();
  const Instance instance = scale.bind({{"N", 4096}, {"T", "half"}});
  EXPECT_EQ(instance.expression(Vendor::amd), "scale<__half, 4096>");
  EXPECT_EQ(instance.expression(Vendor::nvidia), "scale<__half, 4096>");
  EXPECT_EQ(scale.bind({{"T", "bfloat16"}, {"N", 8}}).expression(Vendor::amd),
            "scale<kjit::bfloat16, 8>");
  EXPECT_EQ(scale.bind({{"T", "bfloat16"}, {"N", 8}}).expression(Vendor::nvidia),
            "scale<__nv_bfloat16, 8>");
  EXPECT_EQ(instance.canonical_params(), "N=4096,T=half");
}

TEST(Template, FillsDefaults) {
  const Template scale = make_scale(); // outlives the Instance, which refers to it
  const Instance instance = scale.bind({{"T", "float"}});
  EXPECT_EQ(instance.expression(Vendor::amd), "scale<float, 256>");
}

TEST(Template, RejectsBadParameters) {
  const Template scale = make_scale();
  expect_error([&] { scale.bind({{"N", 16}}); }, Errc::bad_parameter, "'T' is missing");
  expect_error(
      [&] {
        scale.bind({{"T", "double"}});
      },
      Errc::bad_parameter, "T = double is not allowed; T is a type, one of float, half, bfloat16");
  expect_error(
      [&] {
        scale.bind({{"T", "float"}, {"N", 0}});
      },
      Errc::bad_parameter, "N = 0 is out of range; N is an integer in [1, 1048576]");
  expect_error([&] { scale.bind({{"T", 4}}); }, Errc::bad_parameter, "expected a type");
  expect_error(
      [&] {
        scale.bind({{"T", "float"}, {"N", "float"}});
      },
      Errc::bad_parameter, "expected an integer");
  expect_error(
      [&] {
        scale.bind({{"T", "float"}, {"M", 1}});
      },
      Errc::bad_parameter, "unknown parameter 'M'; its parameters are T, N");
  expect_error(
      [&] {
        scale.bind({{"T", "float"}, {"T", "half"}});
      },
      Errc::bad_parameter, "given twice");
}

TEST(Template, OneOfAcceptsOnlyItsValues) {
  const Template tiled("gemm", "", {{"TILE", ParamSchema::one_of({64, 128, 256})}});
  EXPECT_EQ(tiled.bind({{"TILE", 128}}).expression(Vendor::amd), "gemm<128>");
  expect_error(
      [&] {
        tiled.bind({{"TILE", 100}});
      },
      Errc::bad_parameter, "an integer, one of 64, 128, 256");
}

TEST(Template, RejectsMalformedSchemas) {
  expect_error([] { Template("bad name", "", {}); }, Errc::bad_parameter, "not an identifier");
  expect_error(
      [] {
        Template("t", "", {{"T", ParamSchema::type({})}});
      },
      Errc::bad_parameter, "allows no type");
  expect_error(
      [] {
        Template("t", "", {{"T", ParamSchema::type({"float; evil()"})}});
      },
      Errc::bad_parameter, "not a C++ type name");
  expect_error(
      [] {
        Template("t", "", {{"N", ParamSchema::integer(5, 1)}});
      },
      Errc::bad_parameter, "empty range");
  expect_error(
      [] {
        Template("t", "", {{"N", ParamSchema::integer(1, 4, 9)}});
      },
      Errc::bad_parameter, "default 9 is out of range");
  expect_error(
      [] {
        Template("t", "", {{"N", ParamSchema::integer(1, 4)}, {"N", ParamSchema::integer(1, 4)}});
      },
      Errc::bad_parameter, "declared twice");
  expect_error([] { ParamSchema::one_of({}); }, Errc::bad_parameter, "at least one value");
  // A source name is a #line directive's file name, which a line break would end.
  expect_error([] { Template("t", "", {}, {.source_name = "kernels/t.hip\n#define X"}); },
               Errc::bad_parameter, "t: its source name has a control character");
}

TEST(Template, NamesItsSourceAsItsAuthorDoes) {
  EXPECT_EQ(Template("t", "", {}).source_name(), "t.hip");
  EXPECT_EQ(Template("t", "", {}, {.source_name = "kernels/t.hip"}).source_name(), "kernels/t.hip");
  EXPECT_NE(Template("t", "", {}, {.source_name = "kernels/t.hip"}).fingerprint(),
            Template("t", "", {}).fingerprint());
}

TEST(Template, FingerprintFollowsEverythingThatDefinesIt) {
  const auto base = make_scale().fingerprint();
  EXPECT_EQ(make_scale().fingerprint(), base);
  EXPECT_NE(make_scale("// edited\n").fingerprint(), base);
  EXPECT_NE(Template("scale", "template <typename T, int N> __global__ void scale();",
                     {{"T", ParamSchema::type({"float", "half"})},
                      {"N", ParamSchema::integer(1, 1 << 20, 256)}})
                .fingerprint(),
            base);
  EXPECT_NE(Template("scale", "template <typename T, int N> __global__ void scale();",
                     {{"T", ParamSchema::type({"float", "half", "bfloat16"})},
                      {"N", ParamSchema::integer(1, 1 << 20, 256)}},
                     {.compile_options = {"-O2"}})
                .fingerprint(),
            base);
}

// The reproduction: a kernel including a header by absolute path compiled, the header
// changed, and the next compile hit the old code under the same key. Such a template is now
// refused before any lookup or compile.
TEST(Template, RefusesAFileTheKeyDoesNotHash) {
  const std::filesystem::path header =
      std::filesystem::temp_directory_path() / ("kjit-val-" + std::to_string(::getpid()) + ".h");
  std::ofstream(header) << "#define VAL 1\n";
  const std::string source = "#include \"" + header.string() +
                             "\"\ntemplate <int N> __global__ void k(int *x) { *x = VAL + N; }";
  expect_error(
      [&] {
        Template("k", source, {{"N", ParamSchema::integer(1, 4)}});
      },
      Errc::bad_parameter,
      "k: source line 1: #include \"" + header.string() + "\" names an absolute path");
  expect_error(
      [&] {
        Template("k", "#include \"val.h\"\ntemplate <int N> __global__ void k();",
                 {{"N", ParamSchema::integer(1, 4)}},
                 {.headers = {{"val.h", "#include \"" + header.string() + "\"\n"}}});
      },
      Errc::bad_parameter, "k: header 'val.h' line 1: #include");
  std::filesystem::remove(header);
  EXPECT_NO_THROW(Template("k", "#include \"val.h\"\ntemplate <int N> __global__ void k();",
                           {{"N", ParamSchema::integer(1, 4)}},
                           {.headers = {{"val.h", "#define VAL 1\n"}}}));
}

TEST(Library, ShipsThePreludeAndFindsTemplatesByName) {
  EXPECT_EQ(templates::prelude().name, "kjit/prelude.h");
  EXPECT_NE(templates::prelude().content.find("KJIT_WARP_SIZE"), std::string::npos);
  const Template &scale = templates::find("scale");
  EXPECT_NE(scale.source().find("__global__ void scale"), std::string::npos);
  std::string names; // every built-in template, in name order
  for (const Template &t : templates::builtin())
    names += (names.empty() ? "" : ", ") + t.name();
  EXPECT_TRUE(
      std::is_sorted(templates::builtin().begin(), templates::builtin().end(),
                     [](const Template &a, const Template &b) { return a.name() < b.name(); }))
      << names;
  EXPECT_NE(names.find("axpy, "), std::string::npos) << names;
  EXPECT_NE(names.find(", scale"), std::string::npos) << names;
  expect_error([] { templates::find("nope"); }, Errc::unknown_template,
               "unknown template 'nope'; known templates: " + names);
}

// A template's targets: vendors, processors, and NVIDIA architectures with every newer one.
TEST(TemplateTargets, BuildsForItsVendorsProcessorsAndNewerArchitectures) {
  const Template any = make_scale();
  EXPECT_TRUE(any.builds_for(Vendor::amd, "gfx90a"));
  EXPECT_TRUE(any.builds_for(Vendor::nvidia, "sm_75"));

  const Template some("some", "", {},
                      TemplateOptions{.targets = {"gfx942", "sm_80+", "amd", "sm_90a"}});
  EXPECT_TRUE(some.builds_for(Vendor::amd, "gfx90a")) << "every AMD target";
  EXPECT_TRUE(some.builds_for(Vendor::nvidia, "sm_80"));
  EXPECT_TRUE(some.builds_for(Vendor::nvidia, "sm_90a"));
  EXPECT_TRUE(some.builds_for(Vendor::nvidia, "sm_100f"));
  EXPECT_FALSE(some.builds_for(Vendor::nvidia, "sm_75"));

  const Template hopper("hopper", "", {}, TemplateOptions{.targets = {"sm_90a"}});
  EXPECT_TRUE(hopper.builds_for(Vendor::nvidia, "sm_90a"));
  EXPECT_FALSE(hopper.builds_for(Vendor::nvidia, "sm_90"));
  expect_error([&] { hopper.check_target(Vendor::nvidia, "sm_90"); }, Errc::unsupported_target,
               "template hopper builds only for sm_90a, not sm_90");
  const Template mfma("mfma", "", {}, TemplateOptions{.targets = {"gfx942", "gfx950", "sm_80+"}});
  EXPECT_FALSE(mfma.builds_for(Vendor::amd, "gfx9-4-generic")) << "a family is not its members";
  expect_error([&] { mfma.check_target(Vendor::amd, "gfx90a"); }, Errc::unsupported_target,
               "template mfma builds only for gfx942, gfx950 or sm_80 and newer, not gfx90a");
}

TEST(TemplateTargets, AnEntryThatNamesNoTargetIsRefused) {
  for (const char *entry : {"", "AMD", "sm_+", "sm_90a+", "x86", "sm_"})
    expect_error([&] { Template("t", "", {}, TemplateOptions{.targets = {entry}}); },
                 Errc::bad_parameter, "t: target '" + std::string(entry) + "' is not a vendor");
}

} // namespace
} // namespace kjit
