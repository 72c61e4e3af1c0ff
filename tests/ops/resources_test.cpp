// What the code object says about every built-in template's variants in the shapes the wrappers
// launch (the level-1 "core" set, which tests/ops/sets_test.cpp checks against the wrappers): on
// each AMD target kjit serves, no spills, no scratch, and the wavefront size the kernel was built
// for is the KJIT_WARP_SIZE kjit compiled it with. A target the loaded hiprtc cannot compile for
// (ROCm 5.2 lacks gfx942, gfx950, gfx1100 and gfx1201) skips with the reason; `tools/test --rocm`
// runs this test against the newer releases.
#include "kjit/jit/kernel_resources.hpp"
#include "kjit/kjit.hpp"
#include "kjit/templates/sets.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <cstdio>
#include <gtest/gtest.h>

namespace kjit::ops {
namespace {

class BuiltinResources : public ::testing::TestWithParam<const char *> {};

TEST_P(BuiltinResources, CoreVariantsNeitherSpillNorUseScratchAndMatchTheWarpSize) {
  kjit::testing::TempDir dir;
  Runtime runtime{kjit::testing::private_config(dir)};
  const jit::Target target = jit::Target::parse(GetParam());
  const jit::Compiler *compiler = nullptr;
  try {
    compiler = &runtime.compiler(Vendor::amd);
  } catch (const Error &error) {
    GTEST_SKIP() << "hiprtc is not available: " << error.summary();
  }
  const auto &supported = compiler->supported_targets();
  if (std::none_of(supported.begin(), supported.end(),
                   [&](const jit::TargetSupport &each) { return each.arch == target.arch(); }))
    GTEST_SKIP() << compiler->identity() << " cannot compile for " << target.arch();

  int checked = 0;
  for (const templates::VariantSet &set : templates::builtin_sets()) {
    if (set.name() != "core")
      continue;
    for (const templates::SetVariant &variant : set.variants()) {
      if (!variant.for_vendor(Vendor::amd))
        continue;
      const CodeObject &object = runtime.compile(*variant.tmpl, variant.params, target);
      const std::string name =
          variant.tmpl->name() + " " + variant.tmpl->bind(variant.params).canonical_params();
      const auto resources = jit::read_kernel_resources(object.code());
      ASSERT_TRUE(resources) << name << ": no metadata in the code object";
      const auto kernel = std::find_if(resources->begin(), resources->end(), [&](const auto &each) {
        return each.symbol == object.lowered_name();
      });
      ASSERT_NE(kernel, resources->end()) << name << ": no metadata for " << object.lowered_name();
      EXPECT_EQ(kernel->spills.value_or(~0u), 0u) << name << " spills on " << target.arch();
      EXPECT_EQ(kernel->scratch_bytes, 0u) << name << " uses scratch on " << target.arch();
      EXPECT_EQ(kernel->wavefront_size.value_or(0), unsigned(target.warp_size()))
          << name << " on " << target.arch();
      ++checked;
    }
  }
  EXPECT_GT(checked, 50) << "the core set's AMD variants";
  std::printf("checked %d core variants for %s with %s\n", checked, target.arch().c_str(),
              compiler->identity().c_str());
}

INSTANTIATE_TEST_SUITE_P(Amd, BuiltinResources,
                         ::testing::Values("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"));

} // namespace
} // namespace kjit::ops
