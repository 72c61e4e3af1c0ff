// What the code object says about every built-in template's variants in the shapes the wrappers
// launch (the level-1 "core" set, which tests/ops/variants_in_sets_test.cpp checks against the
// wrappers): on each AMD target kjit serves, no spills, no scratch, and the wavefront size the
// kernel was built for is the KJIT_WARP_SIZE kjit compiled it with. A target the loaded hiprtc
// cannot compile for (ROCm 5.2 lacks gfx942, gfx950, gfx1100 and gfx1201) skips with the reason;
// `tools/test --rocm` runs this test against the newer releases.
#include "kjit/jit/compiler.hpp"
#include "kjit/jit/kernel_resources.hpp"
#include "kjit/kjit.hpp"
#include "kjit/runtime/prebuild.hpp"
#include "kjit/templates/sets.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <gtest/gtest.h>
#include <optional>

namespace kjit::ops {
namespace {

class BuiltinResources : public ::testing::TestWithParam<const char *> {};

// The core set's AMD variants for `target`, as kjit prebuild lists them.
std::vector<prebuild::TargetedInstance> core_variants(const jit::Target &target) {
  std::vector<prebuild::TargetedInstance> variants;
  for (const templates::VariantSet &set : templates::builtin_sets()) {
    if (set.name() != "core")
      continue;
    for (const templates::SetVariant &variant : set.variants())
      if (variant.for_target(target.vendor(), target.arch()))
        variants.push_back({variant.tmpl->bind(variant.params), target});
  }
  return variants;
}

TEST_P(BuiltinResources, CoreVariantsNeitherSpillNorUseScratchAndMatchTheWarpSize) {
  kjit::testing::TempDir dir;
  const jit::Target target = jit::Target::parse(GetParam());
  std::optional<prebuild::Compilers> compilers;
  try {
    compilers.emplace(std::vector<jit::Target>{target});
  } catch (const Error &error) {
    if (error.code() != Errc::compiler_unavailable && error.code() != Errc::unsupported_target)
      throw;
    GTEST_SKIP() << error.summary();
  }
  const jit::Compiler &compiler = compilers->of(Vendor::amd);

  // Compiled as kjit prebuild compiles them, several variants to a program (one compiler start
  // for each batch, not each variant), into a prebuilt tier...
  const std::vector<prebuild::TargetedInstance> variants = core_variants(target);
  ASSERT_GT(variants.size(), 50u) << "the core set's AMD variants";
  const std::filesystem::path tier = dir / "prebuilt";
  for (const prebuild::Batch &batch : prebuild::make_batches(variants)) {
    const prebuild::BatchResult built = prebuild::build(batch, *compilers, tier);
    ASSERT_TRUE(built.failures.empty()) << built.failures.front().what;
  }
  prebuild::finish_tier(*compilers, {Vendor::amd}, tier);
  // ...which a Runtime that never compiles then serves: each variant's entry holds its batch's
  // code object, whose metadata must describe the variant's own kernel.
  Config config = kjit::testing::private_config(dir);
  config.mode = Mode::prebuilt;
  config.prebuilt_dir = tier;
  Runtime runtime{config};
  for (const prebuild::TargetedInstance &variant : variants) {
    const std::string name = variant.describe();
    const CodeObject &object =
        runtime.compile(variant.instance.source_template(), variant.instance.values(), target);
    const auto resources = jit::read_kernel_resources(object.code());
    ASSERT_TRUE(resources) << name << ": no metadata in the code object";
    const auto kernel = std::find_if(resources->begin(), resources->end(), [&](const auto &each) {
      return each.symbol == object.lowered_name();
    });
    ASSERT_NE(kernel, resources->end()) << name << ": no metadata for " << object.lowered_name();
    EXPECT_EQ(kernel->spills.value_or(~0u), 0u) << name << " spills";
    EXPECT_EQ(kernel->scratch_bytes, 0u) << name << " uses scratch";
    EXPECT_EQ(kernel->wavefront_size.value_or(0), unsigned(target.warp_size())) << name;
  }
  std::printf("checked %zu core variants for %s with %s\n", variants.size(), target.arch().c_str(),
              compiler.identity().c_str());
}

INSTANTIATE_TEST_SUITE_P(Amd, BuiltinResources,
                         ::testing::Values("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"));

} // namespace
} // namespace kjit::ops
