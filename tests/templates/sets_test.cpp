// Variant sets: the built-in ones parse and bind; the format expands lists, "@values" and
// "@model fields"; a bad file is one clear error naming it.
#include "kjit/error.hpp"
#include "kjit/templates/library.hpp"
#include "kjit/templates/sets.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <set>

namespace kjit {
namespace {

using templates::VariantSet;

std::set<std::string> bound(const VariantSet &set) {
  std::set<std::string> all;
  for (const auto &variant : set.variants())
    all.insert(variant.tmpl->name() + " " + variant.tmpl->bind(variant.params).canonical_params());
  return all;
}

TEST(SetsTest, BuiltInSetsCoverEachLevelAndEveryVariantBinds) {
  std::map<int, std::size_t> per_level;
  for (const VariantSet &set : templates::builtin_sets())
    per_level[set.level()] += bound(set).size(); // binding checks every value against the schema
  EXPECT_GE(per_level[1], 48u) << "the core set is what the prebuild measurement compiles";
  EXPECT_GT(per_level[2], 0u);
  EXPECT_GT(per_level[3], 0u);
  EXPECT_LT(per_level[3], per_level[1]) << "minimal is smaller than core";
}

TEST(SetsTest, TheInferenceSetHoldsTheModelsSizes) {
  const auto &sets = templates::builtin_sets();
  auto inference = std::find_if(sets.begin(), sets.end(),
                                [](const VariantSet &set) { return set.level() == 2; });
  ASSERT_NE(inference, sets.end());
  const std::set<std::string> variants = bound(*inference);
  for (const char *expected : {"scale N=4096,T=half", "scale N=14336,T=bfloat16",
                               "scale N=8192,T=float", "scale N=3584,T=half"})
    EXPECT_TRUE(variants.count(expected)) << expected;
  EXPECT_FALSE(variants.count("scale N=14336,T=float")) << "intermediate sizes in half/bf16 only";
}

TEST(SetsTest, ListsNamedValuesAndModelFieldsExpandToEveryCombination) {
  const VariantSet set = VariantSet::parse(R"({
    "name": "t", "level": 2,
    "models": {"a": {"hidden": 2048}, "b": {"hidden": 1024}, "c": {"hidden": 2048}},
    "values": {"types": ["half", "float"]},
    "variants": [{"template": "scale", "params": {"T": "@types", "N": "@hidden"}},
                 {"template": "axpy", "params": {"ITEMS": [1, 8]}}]})",
                                           "t.json", {});
  EXPECT_EQ(set.name(), "t");
  EXPECT_EQ(set.level(), 2);
  EXPECT_EQ(bound(set), (std::set<std::string>{"scale N=1024,T=half", "scale N=2048,T=half",
                                               "scale N=1024,T=float", "scale N=2048,T=float",
                                               "axpy ITEMS=1,T=float", "axpy ITEMS=8,T=float"}));
}

TEST(SetsTest, AnItemsVendorsLimitItsVariantsToThoseTargets) {
  const VariantSet set = VariantSet::parse(
      R"({"name": "t", "level": 1,
          "variants": [{"template": "scale", "params": {"N": [1, 2]}, "vendors": ["nvidia"]},
                       {"template": "axpy", "vendors": ["amd", "nvidia"]},
                       {"template": "axpy", "params": {"ITEMS": 8}}]})",
      "t.json", {});
  ASSERT_EQ(set.variants().size(), 4u);
  for (std::size_t i : {0u, 1u}) {
    EXPECT_TRUE(set.variants()[i].for_vendor(Vendor::nvidia));
    EXPECT_FALSE(set.variants()[i].for_vendor(Vendor::amd)) << "scale is for nvidia only";
  }
  for (std::size_t i : {2u, 3u})
    for (Vendor vendor : {Vendor::amd, Vendor::nvidia})
      EXPECT_TRUE(set.variants()[i].for_vendor(vendor)) << i << " " << to_string(vendor);
}

TEST(SetsTest, AnItemsProcessorsLimitItsVariantsToTargetsOfThoseProcessors) {
  const VariantSet set = VariantSet::parse(
      R"({"name": "t", "level": 1,
          "variants": [{"template": "axpy", "processors": ["gfx942", "gfx950"]},
                       {"template": "scale", "vendors": ["amd"], "processors": ["sm_90"]}]})",
      "t.json", {});
  ASSERT_EQ(set.variants().size(), 2u);
  EXPECT_TRUE(set.variants()[0].for_target(Vendor::amd, "gfx942"));
  EXPECT_TRUE(set.variants()[0].for_target(Vendor::amd, "gfx950"));
  EXPECT_FALSE(set.variants()[0].for_target(Vendor::amd, "gfx90a"));
  EXPECT_FALSE(set.variants()[0].for_target(Vendor::amd, "gfx9-4-generic"));
  EXPECT_TRUE(set.variants()[0].for_vendor(Vendor::nvidia)) << "processors limit, vendors do not";
  EXPECT_FALSE(set.variants()[1].for_target(Vendor::amd, "gfx942"));
  EXPECT_FALSE(set.variants()[1].for_target(Vendor::nvidia, "sm_90")) << "both must hold";
}

TEST(SetsTest, BadSetsAreOneClearErrorNamingTheFile) {
  const std::pair<const char *, const char *> cases[] = {
      {"{", "not a JSON object"},
      {R"({"name": "x", "variants": []})", "\"level\""},
      {R"({"name": "x", "level": 4, "variants": []})", "\"level\""},
      {R"({"name": "x", "level": 1})", "\"variants\""},
      {R"({"name": "x", "level": 1, "variants": [{"template": "nope"}]})", "unknown template"},
      {R"({"name": "x", "level": 1, "variants": [{"template": "scale", "params": {"N": "@n"}}]})",
       "\"@n\""},
      {R"({"name": "x", "level": 1, "variants": [{"template": "scale", "params": {"N": []}}]})",
       "no values"},
      {R"({"name": "x", "level": 1, "variants": [{"template": "scale", "params": {"N": 1.5}}]})",
       "neither a type nor an integer"},
      {R"({"name": "x", "level": 1, "variants": [{"template": "scale", "vendors": ["intel"]}]})",
       "\"vendors\": intel is neither"},
      {R"({"name": "x", "level": 1, "variants": [{"template": "scale", "vendors": []}]})",
       "\"vendors\" must list"},
      {R"({"name": "x", "level": 1, "variants": [{"template": "scale", "processors": "gfx942"}]})",
       "\"processors\" must list"},
      {R"({"name": "x", "level": 1, "variants": [{"template": "scale", "processors": [942]}]})",
       "\"processors\": 942 is not"},
      {R"({"name": "x", "level": 1,
           "templates": [{"name": "k", "source": "missing.hip", "params": ["N"]}],
           "variants": [{"template": "k", "params": {"N": 1}}]})",
       "cannot read template source"},
  };
  for (const auto &[text, fragment] : cases) {
    try {
      VariantSet::parse(text, "my.json", "/nonexistent");
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error &error) {
      EXPECT_EQ(error.summary().rfind("my.json:", 0), 0u) << error.summary();
      EXPECT_NE(error.summary().find(fragment), std::string::npos) << error.summary();
    }
  }
}

// A library's set: a template with its own header folder, a header file and options, as its C++
// Template declares them.
class LibrarySetTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::filesystem::create_directories(dir / "include/mylib");
    std::filesystem::create_directories(dir / "kernels");
    write("include/mylib/math.h",
          "#pragma once\ntemplate <typename T> T twice(T x) { return x + x; }\n");
    write("extra.h", "#define EXTRA 1\n");
    write("kernels/k.hip", "#include \"mylib/math.h\"\n"
                           "template <typename T, int HIDDEN> __global__ void k_kernel(T *x) {}\n");
  }
  void write(const std::string &name, const std::string &text) const {
    std::ofstream(dir / name) << text;
  }
  // The set with `variants` and an optional extra member of the template item.
  std::string set(const std::string &variants, const std::string &template_extra = "") const {
    return R"({"name": "mylib", "level": 1,
  "templates": [{"name": "k", "source": "kernels/k.hip", "kernel": "k_kernel",
                 "params": ["T", "HIDDEN"],
                 "headers": ["include", "extra.h"],
                 "compile_options": ["-DMYLIB_FAST=1"])" +
           template_extra + R"(}],
  "variants": [)" +
           variants + "]}";
  }
  VariantSet parse(const std::string &text) const {
    return VariantSet::parse(text, "my.json", dir.path());
  }
  // The error parsing `text` gives.
  std::string error_of(const std::string &text) const {
    try {
      parse(text);
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_parameter) << error.summary();
      return error.summary();
    }
    ADD_FAILURE() << "no error for " << text;
    return "";
  }
  testing::TempDir dir;
};

TEST_F(LibrarySetTest, ATemplateItemDeclaresHeadersOptionsKernelAndParameterOrder) {
  // HIDDEN listed before T: the order is the declaration's, never the object's.
  const VariantSet parsed =
      parse(set(R"({"template": "k", "params": {"HIDDEN": [1024, 4096], "T": "half"}})"));
  ASSERT_EQ(parsed.templates().size(), 1u);
  const Template &k = *parsed.templates().front();
  ASSERT_EQ(k.params().size(), 2u);
  EXPECT_EQ(k.params()[0].name, "T");
  EXPECT_EQ(k.params()[1].name, "HIDDEN");
  EXPECT_EQ(k.kernel(), "k_kernel");
  EXPECT_EQ(k.source_name(), "kernels/k.hip") << "the compiler's log names it as the set does";
  EXPECT_EQ(k.compile_options(), std::vector<std::string>{"-DMYLIB_FAST=1"});
  EXPECT_EQ(
      k.headers(),
      (std::vector<HeaderFile>{
          {"mylib/math.h", "#pragma once\ntemplate <typename T> T twice(T x) { return x + x; }\n"},
          {"extra.h", "#define EXTRA 1\n"}}));
  ASSERT_EQ(parsed.variants().size(), 2u);
  EXPECT_EQ(k.bind(parsed.variants()[0].params).expression(Vendor::amd), "k_kernel<__half, 1024>");
}

TEST_F(LibrarySetTest, UnknownFieldsParametersAndTemplatesAreErrorsNamingFileAndLine) {
  const std::string variant = R"({"template": "k", "params": {"T": "half", "HIDDEN": 1}})";
  // The template item starts on line 2; the extra member is on line 6.
  EXPECT_EQ(error_of(set(variant, R"(,
      "argumnets": ["T*"])")),
            "my.json:6: unknown field \"argumnets\" in a templates item (its fields: name, "
            "source, kernel, params, arguments, headers, compile_options, include_dirs, tunable)");
  EXPECT_EQ(error_of(set(variant + R"(,
    {"template": "k", "params": {"T": "half",
                                 "HIDEN": [1, 2]}})")),
            "my.json:8: template k has no parameter HIDEN; its parameters: T, HIDDEN");
  const std::string typo = error_of(set(variant + R"(,
    {"template": "kk", "params": {}})"));
  EXPECT_EQ(typo.rfind("my.json:7: unknown template 'kk'; known templates: ", 0), 0u) << typo;
  EXPECT_TRUE(typo.ends_with("; this set's templates: k")) << typo;
  EXPECT_EQ(error_of(set(variant + R"(,
    {"template": "k", "params": {}, "vendor": ["amd"]})")),
            "my.json:7: unknown field \"vendor\" in a variants item (its fields: template, params, "
            "vendors, processors)");
  EXPECT_EQ(error_of(R"({"name": "x", "level": 1, "variants": [],
  "model": {}})"),
            "my.json:2: unknown field \"model\" in a set (its fields: name, level, description, "
            "values, models, templates, variants)");
  // A built-in template's parameters are checked too.
  EXPECT_EQ(error_of(R"({"name": "x", "level": 1, "variants": [
    {"template": "scale", "params": {"NN": 4}}]})"),
            "my.json:2: template scale has no parameter NN; its parameters: T, N");
}

TEST_F(LibrarySetTest, ATemplateItemMustDeclareItsParametersAndHeadersMustExist) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"name": "x", "level": 1,
  "templates": [{"name": "k", "source": "kernels/k.hip"}],
  "variants": [{"template": "k", "params": {"T": "half"}}]})",
       "my.json:2: template k needs \"params\""},
      {set(R"({"template": "k", "params": {"T": "half"}})"), "no variant gives parameter HIDDEN"},
      {R"({"name": "x", "level": 1,
  "templates": [{"name": "k", "source": "kernels/k.hip", "params": ["T"],
                 "headers": ["include", "missing"]}],
  "variants": [{"template": "k", "params": {"T": "half"}}]})",
       "my.json:3: header missing: no such file or folder"},
  };
  for (const auto &[text, fragment] : cases) {
    const std::string error = error_of(text);
    EXPECT_NE(error.find(fragment), std::string::npos) << error;
  }
}

TEST(SetsTest, TheBuiltInLevelOfAVariantIsTheLowestThatNamesIt) {
  const Template &scale = templates::find("scale");
  EXPECT_EQ(templates::builtin_level_of(scale.bind({{"T", "half"}, {"N", 4096}})), 1);
  EXPECT_EQ(templates::builtin_level_of(scale.bind({{"T", "half"}, {"N", 14336}})), 2);
  EXPECT_EQ(templates::builtin_level_of(scale.bind({{"T", "half"}, {"N", 4097}})), 0);
}

TEST(SetsTest, AnUnreadableSetFileIsAFileError) {
  try {
    VariantSet::read_file("/nonexistent/my.json");
    ADD_FAILURE() << "no error for a missing set file";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::file_io);
    EXPECT_NE(error.summary().find("/nonexistent/my.json"), std::string::npos) << error.summary();
  }
}

} // namespace
} // namespace kjit
