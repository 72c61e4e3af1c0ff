// A device's lookups before it compiles: its exact target, then the same processor with fewer
// features, then its generic family (gfx1101 -> gfx11-generic), in the prebuilt and user tiers.
// Against a fake compiler that counts compiles and whose code names the target it was built for.
#include "kjit/jit/elf.hpp"
#include "kjit/kjit.hpp"
#include "tests/runtime/fake_compiler.hpp"
#include "tests/support/log_capture.hpp"
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

const ParamValues half_2048 = {{"T", "half"}, {"N", 2048}};

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
  void prebuild(std::initializer_list<const char *> targets,
                std::initializer_list<ParamValues> variants = {half_4096}) {
    Config filler = testing::private_config(dir);
    filler.cache_dir = dir / "prebuilt";
    filler.rebuild = true;
    filler.compilers = [this](Vendor) -> const jit::Compiler & { return compiler; };
    Runtime rt(filler);
    for (const char *target : targets)
      for (const ParamValues &variant : variants)
        ASSERT_EQ(rt.compile(scale, variant, jit::Target::parse(target)).origin(),
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

// A generic target's code object is version 6, which a HIP runtime older than ROCm 6.4 cannot
// load: there the family's entries are misses, with one warning for them all, and the device's own
// target is compiled (as version 5). A runtime that loads version 6 uses them.
TEST_F(ServingTargetsTest, AGenericEntryTheRuntimeCannotLoadIsAMissWithOneWarning) {
  compiler.code_object_version = 6;
  prebuild({"gfx11-generic"}, {half_4096, half_2048});
  compiler.code_object_version = 5;
  Config config = reader();
  config.newest_code_object_version = 5;
  testing::LogCapture log;
  {
    Runtime rt(config);
    for (const ParamValues &variant : {half_4096, half_2048}) {
      const CodeObject &object = rt.compile(scale, variant, jit::Target::parse("gfx1101"));
      EXPECT_EQ(object.origin(), Origin::compiled);
      EXPECT_EQ(object.code()[8], std::byte{3}) << "the device's own code object, version 5";
    }
    EXPECT_EQ(compiler.compiles, 2);
  }
  EXPECT_EQ(log.warnings(), 1) << log.text();
  EXPECT_NE(log.text().find("for gfx11-generic: its code object is version 6, and the device's "
                            "runtime loads up to version 5"),
            std::string::npos)
      << log.text();

  config.newest_code_object_version = 6;
  compiler.compiles = 0;
  Runtime loads_six(config);
  // gfx1102, which the user tier has no entry of.
  EXPECT_EQ(loads_six.compile(scale, half_4096, jit::Target::parse("gfx1102")).origin(),
            Origin::prebuilt);
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

// The same rules with code objects hiprtc made (Debian's ROCm 6.4 and 7.2 with their device
// library; skipped where the compiler builds no generic target): a prebuilt tier of gfx11-generic
// and gfx12-generic entries serves gfx1100, gfx1101 and gfx1201 without a compile, with the
// family's code; a runtime that loads only version 5 finds them too new and compiles its own.
TEST(ServingTargetsWithHiprtc, GenericEntriesTheCompilerMadeServeTheirFamilies) {
  TempDir dir;
  Config filler = testing::private_config(dir);
  filler.cache_dir = dir / "prebuilt";
  Runtime builder(filler);
  const Template &scale = templates::find("scale");
  try {
    for (const char *generic : {"gfx11-generic", "gfx12-generic"})
      ASSERT_EQ(builder.compile(scale, half_4096, jit::Target::parse(generic)).origin(),
                Origin::compiled);
  } catch (const Error &error) {
    if (error.code() != Errc::compiler_unavailable && error.code() != Errc::unsupported_target)
      throw;
    GTEST_SKIP() << error.summary();
  }
  Config reader = testing::private_config(dir);
  reader.prebuilt_dir = dir / "prebuilt";
  Runtime rt(reader);
  const std::pair<const char *, std::uint32_t> devices[] = {
      {"gfx1100", 0x054}, {"gfx1101", 0x054}, {"gfx1201", 0x059}}; // EF_AMDGPU_MACH_*_GENERIC
  for (const auto &[device, generic_mach] : devices) {
    const CodeObject &object = rt.compile(scale, half_4096, jit::Target::parse(device));
    EXPECT_EQ(object.origin(), Origin::prebuilt) << device;
    const std::optional<jit::ElfSummary> elf = jit::read_elf(object.code());
    ASSERT_TRUE(elf) << device;
    EXPECT_EQ(elf->flags & 0xff, generic_mach) << device << ": the family's code object";
    EXPECT_EQ(jit::amdgpu_code_object_version(*elf), 6) << device;
  }
  EXPECT_EQ(rt.counters().compiled, 0u);

  reader.newest_code_object_version = 5;
  testing::LogCapture log;
  Runtime loads_five(reader);
  EXPECT_EQ(loads_five.compile(scale, half_4096, jit::Target::parse("gfx1101")).origin(),
            Origin::compiled);
  EXPECT_NE(log.text().find("for gfx11-generic: its code object is version 6, and the device's "
                            "runtime loads up to version 5"),
            std::string::npos)
      << log.text();
}

} // namespace
} // namespace kjit
