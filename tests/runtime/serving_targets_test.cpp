// A device's lookups before it compiles: its exact target, then the same processor with fewer
// features, then its generic family (gfx1101 -> gfx11-generic), in the prebuilt and user tiers.
// Against a fake compiler that counts compiles and whose code names the target it was built for.
#include "kjit/kjit.hpp"
#include "tests/runtime/fake_compiler.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>

namespace kjit {
namespace {

using testing::TempDir;

const Template scale("scale", R"(template <typename T, int N> __global__ void scale(T *x) {})",
                     {{"T", ParamSchema::type({"float", "half"})},
                      {"N", ParamSchema::integer(1, 1 << 20)}});
const ParamValues half_4096 = {{"T", "half"}, {"N", 4096}};

std::string code_text(const CodeObject &object) {
  return {reinterpret_cast<const char *>(object.code().data()), object.code().size()};
}

class ServingTargetsTest : public ::testing::Test {
protected:
  void SetUp() override {
    compiler.targets = {{"gfx90a", {"sramecc", "xnack"}},
                        {"gfx942", {"sramecc", "xnack"}},
                        {"gfx1030", {"cumode", "wavefrontsize64"}},
                        {"gfx1101", {"cumode", "wavefrontsize64"}},
                        {"gfx9-4-generic", {"sramecc", "xnack"}},
                        {"gfx11-generic", {"cumode", "wavefrontsize64"}}};
  }
  // Fills the prebuilt tier with scale<half, 4096> built for each of `targets` (rebuilding, so
  // that a gfx1101 entry is compiled even where a gfx11-generic one would serve it).
  void prebuild(std::initializer_list<const char *> targets) {
    Config filler = testing::private_config(dir);
    filler.cache_dir = dir / "prebuilt";
    filler.rebuild = true;
    filler.compilers = [this](Vendor) -> const jit::Compiler & { return compiler; };
    Runtime rt(filler);
    for (const char *target : targets)
      ASSERT_EQ(rt.compile(scale, half_4096, jit::Target::parse(target)).origin(),
                Origin::compiled);
    compiler.compiles = 0;
  }
  Config reader() {
    Config config = testing::private_config(dir);
    config.prebuilt_dir = dir / "prebuilt";
    config.compilers = [this](Vendor) -> const jit::Compiler & { return compiler; };
    return config;
  }

  testing::FakeCompiler compiler;
  TempDir dir;
};

TEST_F(ServingTargetsTest, AProcessorUsesItsGenericFamilysPrebuiltEntryWithoutCompiling) {
  prebuild({"gfx11-generic"});
  Runtime rt(reader());
  const CodeObject &object = rt.compile(scale, half_4096, jit::Target::parse("gfx1101"));
  EXPECT_EQ(object.origin(), Origin::prebuilt);
  EXPECT_EQ(compiler.compiles, 0);
  EXPECT_EQ(rt.counters().prebuilt_hits, 1u);
  EXPECT_EQ(object.target().id(), "gfx1101") << "the code object is the device's";
  EXPECT_TRUE(code_text(object).starts_with("gfx11-generic")) << code_text(object);
  EXPECT_NE(object.entry_path().string().find("gfx11-generic"), std::string::npos)
      << object.entry_path();
}

TEST_F(ServingTargetsTest, AProcessorWhoseFamilyHasNoEntryCompilesForItsExactTarget) {
  prebuild({"gfx11-generic"});
  Runtime rt(reader());
  for (const char *device : {"gfx1030", "gfx90a:sramecc+:xnack-"}) {
    const CodeObject &object = rt.compile(scale, half_4096, jit::Target::parse(device));
    EXPECT_EQ(object.origin(), Origin::compiled) << device;
    EXPECT_TRUE(code_text(object).starts_with(device)) << code_text(object);
  }
  EXPECT_EQ(compiler.compiles, 2);
}

TEST_F(ServingTargetsTest, TheExactTargetComesBeforeTheGenericFamily) {
  prebuild({"gfx11-generic", "gfx1101"});
  Runtime rt(reader());
  const CodeObject &object = rt.compile(scale, half_4096, jit::Target::parse("gfx1101"));
  EXPECT_EQ(object.origin(), Origin::prebuilt);
  EXPECT_TRUE(code_text(object).starts_with("gfx1101")) << code_text(object);
}

// Code built for a feature setting runs only under that setting; built for none, under either.
TEST_F(ServingTargetsTest, AGenericEntryServesOnlyTheFeatureSettingsItWasBuiltFor) {
  prebuild({"gfx9-4-generic:sramecc+:xnack-"});
  Runtime rt(reader());
  const CodeObject &same =
      rt.compile(scale, half_4096, jit::Target::parse("gfx942:sramecc+:xnack-"));
  EXPECT_EQ(same.origin(), Origin::prebuilt);
  EXPECT_TRUE(code_text(same).starts_with("gfx9-4-generic:sramecc+:xnack-")) << code_text(same);
  for (const char *device : {"gfx942:sramecc+:xnack+", "gfx942"})
    EXPECT_EQ(rt.compile(scale, half_4096, jit::Target::parse(device)).origin(), Origin::compiled)
        << device;
  EXPECT_EQ(compiler.compiles, 2);
}

TEST_F(ServingTargetsTest, AGenericEntryForNoFeatureSettingServesEverySetting) {
  prebuild({"gfx9-4-generic"});
  Runtime rt(reader());
  for (const char *device : {"gfx942:sramecc+:xnack-", "gfx942:sramecc-:xnack+", "gfx942"})
    EXPECT_EQ(rt.compile(scale, half_4096, jit::Target::parse(device)).origin(), Origin::prebuilt)
        << device;
  EXPECT_EQ(compiler.compiles, 0);
}

// An entry for the generic family in the user tier (a compile for gfx11-generic there) serves too.
TEST_F(ServingTargetsTest, TheUserTierIsSearchedByFamilyToo) {
  Config config = reader();
  Runtime(config).compile(scale, half_4096, jit::Target::parse("gfx11-generic"));
  compiler.compiles = 0;
  Runtime rt(config);
  EXPECT_EQ(rt.compile(scale, half_4096, jit::Target::parse("gfx1101")).origin(),
            Origin::user_cache);
  EXPECT_EQ(compiler.compiles, 0);
}

} // namespace
} // namespace kjit
