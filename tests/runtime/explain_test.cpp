// Runtime::explain and the debug line of each compile: the key a lookup uses, what each tier holds
// under it, and for the nearest entries of the template and target, which key input differs, one
// test per kind of difference. Against a fake compiler, so it runs on every machine.
#include "kjit/kjit.hpp"
#include "tests/runtime/fake_compiler.hpp"
#include "tests/support/fake_remote.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <gtest/gtest.h>

namespace kjit {
namespace {

using cache::KeyInputKind;
using testing::TempDir;

constexpr const char *kSource = R"(template <typename T, int N> __global__ void scale(T *x) {})";
const std::vector<ParamDecl> kParams = {{"T", ParamSchema::type({"float", "half"})},
                                        {"N", ParamSchema::integer(1, 1 << 20)}};
const Template scale("scale", kSource, kParams);
const ParamValues half_4096 = {{"T", "half"}, {"N", 4096}};
const jit::Target gfx90a = jit::Target::parse("gfx90a");

class ExplainTest : public ::testing::Test {
protected:
  Config config(const jit::Compiler &with) {
    Config config = testing::private_config(dir);
    config.compilers = [&with](Vendor) -> const jit::Compiler & { return with; };
    return config;
  }
  // Compiles `tmpl` with `params` into the user tier, then explains `half_4096` of `scale`.
  Explanation after_compiling(const Template &tmpl, const ParamValues &params,
                              const jit::Compiler &built_with) {
    Runtime(config(built_with)).compile(tmpl, params, gfx90a);
    return Runtime(config(compiler)).explain(scale, half_4096, gfx90a);
  }
  // The one difference the nearest entry has, checked to be of `kind` and named `name`.
  static cache::KeyDifference only_difference(const Explanation &explained, KeyInputKind kind,
                                              const std::string &name) {
    EXPECT_FALSE(explained.found());
    EXPECT_EQ(explained.nearest.size(), 1u);
    if (explained.nearest.empty())
      return {};
    const std::vector<cache::KeyDifference> &differences = explained.nearest[0].differences;
    EXPECT_EQ(differences.size(), 1u) << explained.reason();
    EXPECT_EQ(differences.at(0).kind, kind) << explained.reason();
    EXPECT_EQ(differences.at(0).name, name) << explained.reason();
    EXPECT_NE(explained.reason().find(std::string(to_string(kind))), std::string::npos)
        << explained.reason();
    return differences.at(0);
  }

  TempDir dir;
  testing::FakeCompiler compiler;
};

const TierLookup &tier_named(const Explanation &explained, const std::string &name) {
  for (const TierLookup &tier : explained.tiers)
    if (tier.tier == name)
      return tier;
  throw std::runtime_error("no tier " + name);
}

TEST_F(ExplainTest, NoEntryOfTheTemplateSaysSoAndNamesEveryTier) {
  Runtime rt(config(compiler));
  const Explanation explained = rt.explain(scale, half_4096, gfx90a);
  EXPECT_FALSE(explained.found());
  EXPECT_TRUE(explained.nearest.empty());
  EXPECT_EQ(explained.reason(), "no entry of scale for gfx90a");
  EXPECT_EQ(tier_named(explained, "memory").state, TierLookup::State::missing);
  EXPECT_EQ(tier_named(explained, "user").state, TierLookup::State::missing);
  EXPECT_EQ(compiler.compiles, 0) << "explaining compiles nothing";
  // The key is the one a compile then uses.
  EXPECT_EQ(rt.compile(scale, half_4096, gfx90a).key(), explained.key);
  EXPECT_EQ(cache::key_of(explained.key_inputs), explained.key);
}

TEST_F(ExplainTest, AHeldVariantNamesItsTiers) {
  Runtime rt(config(compiler));
  const CodeObject &object = rt.compile(scale, half_4096, gfx90a);
  const Explanation explained = rt.explain(scale, half_4096, gfx90a);
  EXPECT_TRUE(explained.found());
  EXPECT_EQ(tier_named(explained, "memory").state, TierLookup::State::holds);
  EXPECT_EQ(tier_named(explained, "user").state, TierLookup::State::holds);
  EXPECT_EQ(tier_named(explained, "user").path, object.entry_path().string());
  EXPECT_EQ(explained.reason(), "held by the memory tier");
  EXPECT_TRUE(explained.nearest.empty()) << "an entry with the same key is no near miss";
}

TEST_F(ExplainTest, AParameterThatDiffers) {
  const Explanation explained = after_compiling(scale, {{"T", "half"}, {"N", 2048}}, compiler);
  const cache::KeyDifference difference =
      only_difference(explained, KeyInputKind::parameter, "param:N");
  EXPECT_EQ(difference.wanted, "int:4096");
  EXPECT_EQ(difference.found, "int:2048");
  EXPECT_EQ(describe(difference), "parameter N (int:4096, entry int:2048)");
}

TEST_F(ExplainTest, TheSourceDigestThatDiffers) {
  const Template edited("scale", std::string(kSource) + "\n// edited\n", kParams);
  only_difference(after_compiling(edited, half_4096, compiler), KeyInputKind::source, "source");
}

TEST_F(ExplainTest, AHeaderThatDiffers) {
  const Template with_header("scale", kSource, kParams, {.headers = {{"tile.h", "int tile;"}}});
  const Template with_other("scale", kSource, kParams, {.headers = {{"tile.h", "long tile;"}}});
  Runtime(config(compiler)).compile(with_other, half_4096, gfx90a);
  const Explanation explained = Runtime(config(compiler)).explain(with_header, half_4096, gfx90a);
  only_difference(explained, KeyInputKind::header, "header:tile.h");
}

TEST_F(ExplainTest, AnOptionThatDiffers) {
  const Template fast("scale", kSource, kParams, {.compile_options = {"-ffast-math"}});
  const cache::KeyDifference difference =
      only_difference(after_compiling(fast, half_4096, compiler), KeyInputKind::option, "option");
  EXPECT_EQ(difference.wanted, std::nullopt) << "the entry has an option the lookup does not";
  EXPECT_EQ(difference.found, "-ffast-math");
  EXPECT_EQ(describe(difference), "option -ffast-math (entry only)");
}

TEST_F(ExplainTest, TheCompilerBuildThatDiffers) {
  testing::FakeCompiler older("fake 0.9");
  const cache::KeyDifference difference =
      only_difference(after_compiling(scale, half_4096, older), KeyInputKind::compiler, "compiler");
  EXPECT_EQ(difference.wanted, "fake 1.0");
  EXPECT_EQ(difference.found, "fake 0.9");
}

TEST_F(ExplainTest, TheCompilerEnvironmentThatDiffers) {
  testing::FakeCompiler elsewhere("fake 1.0", {{"HIP_DEVICE_LIB_PATH", "/opt/bitcode"}});
  only_difference(after_compiling(scale, half_4096, elsewhere), KeyInputKind::environment,
                  "env:HIP_DEVICE_LIB_PATH");
}

TEST_F(ExplainTest, TheNearestEntriesComeFirst) {
  Runtime filler(config(compiler));
  filler.compile(scale, {{"T", "float"}, {"N", 2048}}, gfx90a);          // two differences
  filler.compile(scale, {{"T", "half"}, {"N", 2048}}, gfx90a);           // one
  filler.compile(scale, half_4096, jit::Target::parse("gfx90a:xnack+")); // another target
  const Explanation explained = Runtime(config(compiler)).explain(scale, half_4096, gfx90a);
  ASSERT_EQ(explained.nearest.size(), 2u) << "an entry for another target is not near";
  EXPECT_EQ(explained.nearest[0].differences.size(), 1u);
  EXPECT_EQ(explained.nearest[1].differences.size(), 2u);
}

TEST_F(ExplainTest, AnEntryOfAServingTargetIsNamedWithItsTarget) {
  Runtime(config(compiler)).compile(scale, half_4096, gfx90a);
  const Explanation explained =
      Runtime(config(compiler))
          .explain(scale, half_4096, jit::Target::parse("gfx90a:sramecc+:xnack-"));
  EXPECT_TRUE(explained.found());
  EXPECT_EQ(explained.reason(), "held by the user tier as an entry for gfx90a");
}

// The key explained is the one a lookup of this Runtime computes: with the Runtime's include
// directories (KJIT_INCLUDE_PATH) among its inputs.
TEST_F(ExplainTest, TheRuntimesIncludeDirectoriesAreAmongTheKeysInputs) {
  TempDir library;
  Config with_library = config(compiler);
  with_library.include_dirs = {library.path().string()};
  const Explanation explained = Runtime(with_library).explain(scale, half_4096, gfx90a);
  EXPECT_NE(std::find(explained.key_inputs.begin(), explained.key_inputs.end(),
                      cache::KeyField{"include-dirs", "1"}),
            explained.key_inputs.end());
  EXPECT_NE(explained.key, Runtime(config(compiler)).explain(scale, half_4096, gfx90a).key);
}

TEST_F(ExplainTest, ARemoteIsAskedWithoutCountingAMiss) {
  auto remote = std::make_shared<testing::FakeRemote>();
  Config with_remote = config(compiler);
  with_remote.remote_urls = {testing::fake_remote_url(remote)};
  const std::string tier = "remote " + with_remote.remote_urls.front();
  Runtime rt(with_remote);
  EXPECT_EQ(tier_named(rt.explain(scale, half_4096, gfx90a), tier).state,
            TierLookup::State::missing);
  remote->fail_with(cache::RemoteFault{cache::RemoteFailure::timeout, "stalled"});
  const Explanation explained = rt.explain(scale, half_4096, gfx90a);
  const TierLookup &down = tier_named(explained, tier);
  EXPECT_EQ(down.state, TierLookup::State::unreachable);
  EXPECT_EQ(down.detail, "stalled");
}

TEST_F(ExplainTest, EveryCompileLogsWhyAtDebugLevel) {
  Runtime(config(compiler)).compile(scale, {{"T", "half"}, {"N", 2048}}, gfx90a);
  const auto level = log().level();
  log().set_level(spdlog::level::debug);
  testing::LogCapture captured;
  Runtime rt(config(compiler));
  rt.compile(scale, half_4096, gfx90a);
  rt.compile(scale, {{"T", "half"}, {"N", 1024}}, jit::Target::parse("gfx90a:xnack+"));
  log().set_level(level);
  const std::string text = captured.text();
  EXPECT_NE(
      text.find("debug: compiling scale (N=4096,T=half) for gfx90a: the nearest entry (user, "),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("differs in parameter N (int:4096, entry int:2048)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("for gfx90a:xnack+: no entry of scale for gfx90a:xnack+"), std::string::npos)
      << text;
}

} // namespace
} // namespace kjit
